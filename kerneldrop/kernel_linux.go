package kerneldrop

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// The process-wide registry. The maps and the program are loaded by the
// first Open and closed with the last List; an interface's attachment is
// made by the first List on it and detached by the last to close. A
// reload opens the new List before it closes the old one, so the program
// stays attached throughout.
var reg struct {
	sync.Mutex
	users                        int
	listeners, blocked, counters *ebpf.Map
	prog                         *ebpf.Program
	links                        map[int]*attachment
	groups                       [maxGroups]bool
	owners                       map[[listenerKeySize]byte][]uint32
	attachFlags                  []link.XDPAttachFlags // tests: the modes tried, in order
}

// attachment is the program attached to one interface.
type attachment struct {
	link link.Link
	refs int
	mode string // "driver" or "generic"
}

// kgroup is one List's part of the kernel: its group, the interfaces it
// is attached to and its listeners.
type kgroup struct {
	id        uint32
	ifindexes []int
	listeners map[netip.AddrPort]bool
	closed    bool
}

// permHint explains an error of permission.
func permHint(err error) string {
	switch {
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		return " (needs root, or CAP_BPF and CAP_NET_ADMIN)"
	case errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST):
		return " (another XDP program is attached to it)"
	}
	return ""
}

// openKernel joins the registry: loads the program if this is the first
// user, attaches it to each interface not yet attached, and takes a group.
func openKernel(ifaces []string, logf func(string, ...any)) (kernel, error) {
	idx := make([]int, 0, len(ifaces))
	for _, name := range ifaces {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			return nil, fmt.Errorf("kerneldrop: interface %s: %w", name, err)
		}
		if !slices.Contains(idx, ifi.Index) {
			idx = append(idx, ifi.Index)
		}
	}

	reg.Lock()
	defer reg.Unlock()
	if reg.users == 0 {
		if err := loadLocked(); err != nil {
			return nil, err
		}
	}
	g := &kgroup{listeners: map[netip.AddrPort]bool{}}
	free := slices.Index(reg.groups[:], false)
	if free < 0 {
		if reg.users == 0 {
			closeLocked()
		}
		return nil, fmt.Errorf("kerneldrop: %d lists open at once, the most there can be", maxGroups)
	}
	reg.groups[free] = true
	g.id = uint32(free)
	reg.users++
	zero := make([]uint64, ebpf.MustPossibleCPU())
	for _, i := range []uint32{g.id << 1, g.id<<1 | 1} {
		if err := reg.counters.Update(i, zero, ebpf.UpdateAny); err != nil {
			releaseLocked(g)
			return nil, fmt.Errorf("kerneldrop: reset the counters: %w", err)
		}
	}
	for n, i := range idx {
		if a := reg.links[i]; a != nil {
			a.refs++
			g.ifindexes = append(g.ifindexes, i)
			continue
		}
		l, mode, err := attachLocked(i)
		if err != nil {
			releaseLocked(g)
			return nil, fmt.Errorf("kerneldrop: attach XDP to %s: %w%s", ifaces[n], err, permHint(err))
		}
		reg.links[i] = &attachment{link: l, refs: 1, mode: mode}
		g.ifindexes = append(g.ifindexes, i)
		if logf != nil {
			logf("kernel drop: XDP program attached to %s (%s mode)", ifaces[n], mode)
		}
	}
	return g, nil
}

// loadLocked creates the maps and loads the program.
func loadLocked() (err error) {
	ls, bs, cs := mapSpecs()
	defer func() {
		if err != nil {
			closeLocked()
			err = fmt.Errorf("kerneldrop: load the XDP program: %w%s", err, permHint(err))
		}
	}()
	if reg.listeners, err = ebpf.NewMap(ls); err != nil {
		return err
	}
	if reg.blocked, err = ebpf.NewMap(bs); err != nil {
		return err
	}
	if reg.counters, err = ebpf.NewMap(cs); err != nil {
		return err
	}
	reg.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "rrl_kerneldrop",
		Type:         ebpf.XDP,
		License:      "BSD",
		Instructions: program(reg.listeners.FD(), reg.blocked.FD(), reg.counters.FD()),
	})
	if err != nil {
		return err
	}
	reg.links = map[int]*attachment{}
	reg.owners = map[[listenerKeySize]byte][]uint32{}
	return nil
}

// closeLocked closes what loadLocked made.
func closeLocked() {
	for _, c := range []interface{ Close() error }{reg.prog, reg.listeners, reg.blocked, reg.counters} {
		switch c := c.(type) {
		case *ebpf.Program:
			if c != nil {
				c.Close()
			}
		case *ebpf.Map:
			if c != nil {
				c.Close()
			}
		}
	}
	reg.prog, reg.listeners, reg.blocked, reg.counters = nil, nil, nil, nil
	reg.links, reg.owners = nil, nil
}

// attachLocked attaches the program to interface i: in driver (native)
// mode where the driver has it, in generic mode otherwise.
func attachLocked(i int) (link.Link, string, error) {
	flags := reg.attachFlags
	if flags == nil {
		flags = []link.XDPAttachFlags{link.XDPDriverMode, link.XDPGenericMode}
	}
	var err error
	for _, f := range flags {
		var l link.Link
		l, err = link.AttachXDP(link.XDPOptions{Program: reg.prog, Interface: i, Flags: f})
		if err == nil {
			if f == link.XDPDriverMode {
				return l, "driver", nil
			}
			return l, "generic", nil
		}
		if permHint(err) != "" {
			break
		}
	}
	return nil, "", err
}

// releaseLocked undoes openKernel for g: its listeners, its group, its
// attachments and, for the last user, the program and maps.
func releaseLocked(g *kgroup) {
	for ap := range g.listeners {
		for _, i := range g.ifindexes {
			for _, k := range listenerKeys(ap, uint32(i)) {
				disownLocked(k, g.id)
			}
		}
	}
	for _, i := range g.ifindexes {
		if a := reg.links[i]; a != nil {
			if a.refs--; a.refs == 0 {
				a.link.Close()
				delete(reg.links, i)
			}
		}
	}
	reg.groups[g.id] = false
	if reg.users--; reg.users == 0 {
		closeLocked()
	}
}

// ownLocked makes group the listener k's owner: the latest to add a
// listener owns it until it removes it, then the one before.
func ownLocked(k [listenerKeySize]byte, group uint32) error {
	if err := reg.listeners.Update(k[:], group, ebpf.UpdateAny); err != nil {
		return err
	}
	s := slices.DeleteFunc(reg.owners[k], func(o uint32) bool { return o == group })
	reg.owners[k] = append(s, group)
	return nil
}

// disownLocked removes group from the listener k's owners.
func disownLocked(k [listenerKeySize]byte, group uint32) {
	s := reg.owners[k]
	i := slices.Index(s, group)
	if i < 0 {
		return
	}
	top := i == len(s)-1
	s = slices.Delete(s, i, i+1)
	switch {
	case len(s) == 0:
		delete(reg.owners, k)
		reg.listeners.Delete(k[:])
	case top:
		reg.owners[k] = s
		reg.listeners.Update(k[:], s[len(s)-1], ebpf.UpdateAny)
	default:
		reg.owners[k] = s
	}
}

func (g *kgroup) addListener(ap netip.AddrPort) error {
	reg.Lock()
	defer reg.Unlock()
	if g.closed || g.listeners[ap] {
		return nil
	}
	for _, i := range g.ifindexes {
		for _, k := range listenerKeys(ap, uint32(i)) {
			if err := ownLocked(k, g.id); err != nil {
				for _, i := range g.ifindexes {
					for _, k := range listenerKeys(ap, uint32(i)) {
						disownLocked(k, g.id)
					}
				}
				return fmt.Errorf("kerneldrop: add listener %s: %w", ap, err)
			}
		}
	}
	g.listeners[ap] = true
	return nil
}

func (g *kgroup) removeListener(ap netip.AddrPort) {
	reg.Lock()
	defer reg.Unlock()
	if g.closed || !g.listeners[ap] {
		return
	}
	for _, i := range g.ifindexes {
		for _, k := range listenerKeys(ap, uint32(i)) {
			disownLocked(k, g.id)
		}
	}
	delete(g.listeners, ap)
}

// put lists network p for d from now on CLOCK_BOOTTIME, the clock of the
// program's bpf_ktime_get_boot_ns.
func (g *kgroup) put(p netip.Prefix, d time.Duration) error {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return err
	}
	k := blockedKey(g.id, p)
	return reg.blocked.Update(k[:], uint64(ts.Nano())+uint64(d), ebpf.UpdateAny)
}

func (g *kgroup) del(p netip.Prefix) error {
	k := blockedKey(g.id, p)
	err := reg.blocked.Delete(k[:])
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	}
	return err
}

func (g *kgroup) dropped() (v4, v6 uint64, err error) {
	return sumCounters(reg.counters, g.id)
}

// sumCounters returns group's counts in counters, summed over the CPUs.
func sumCounters(counters *ebpf.Map, group uint32) (v4, v6 uint64, err error) {
	var vals []uint64
	for fam, i := range []uint32{group << 1, group<<1 | 1} {
		if err := counters.Lookup(i, &vals); err != nil {
			return 0, 0, err
		}
		var n uint64
		for _, v := range vals {
			n += v
		}
		if fam == familyIPv4Key {
			v4 = n
		} else {
			v6 = n
		}
	}
	return v4, v6, nil
}

func (g *kgroup) close() {
	reg.Lock()
	defer reg.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	releaseLocked(g)
}

// attached reports the interfaces the program is attached to in this
// process, by index, with their modes and users.
func attached() map[int]attachment {
	reg.Lock()
	defer reg.Unlock()
	m := map[int]attachment{}
	for i, a := range reg.links {
		m[i] = *a
	}
	return m
}
