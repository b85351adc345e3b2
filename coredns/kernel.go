package rrl

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	cparse "github.com/coredns/coredns/plugin/pkg/parse"
	ctransport "github.com/coredns/coredns/plugin/pkg/transport"

	core "github.com/dnsrrl/rrl"
	"github.com/dnsrrl/rrl/kerneldrop"
)

// kernelOptions are the block's kernel-drop settings: the interfaces the
// XDP program attaches to (none: off), and its two durations, 0 for the
// defaults.
type kernelOptions struct {
	interfaces  []string
	after, hold time.Duration
}

// The ranges of kernel-drop-after and kernel-drop-for. A network must be
// refused for a while before its packets are dropped unseen, and it must
// come back to be judged again: hours in the kernel would hide that a
// flood ended.
const (
	minKernelAfter, maxKernelAfter = 100 * time.Millisecond, time.Hour
	minKernelFor, maxKernelFor     = time.Second, time.Hour
)

// parseKernel reads kernel-drop, kernel-drop-after and kernel-drop-for.
func parseKernel(c *caddy.Controller, opts *kernelOptions, kw string, args []string) error {
	if kw == "kernel-drop" {
		if len(args) == 0 {
			return c.Errf("%s needs at least one interface, such as lo or eth0", kw)
		}
		opts.interfaces = args
		return nil
	}
	if len(args) != 1 {
		return c.Errf("%s takes exactly one value, got %d", kw, len(args))
	}
	lo, hi, dst := minKernelAfter, maxKernelAfter, &opts.after
	if kw == "kernel-drop-for" {
		lo, hi, dst = minKernelFor, maxKernelFor, &opts.hold
	}
	d, err := time.ParseDuration(args[0])
	if err != nil || d < lo || d > hi {
		return c.Errf("%s %q: want a duration from %v to %v, such as 1s", kw, args[0], lo, hi)
	}
	*dst = d
	return nil
}

// checkKernel refuses the durations without kernel-drop, which would
// otherwise set nothing, and kernel-drop without a request limit, which
// would never refuse anything to drop.
func checkKernel(c *caddy.Controller, cfg *core.Config, opts kernelOptions, seen map[string]bool) error {
	if len(opts.interfaces) == 0 {
		for _, kw := range []string{"kernel-drop-after", "kernel-drop-for"} {
			if seen[kw] {
				return c.Errf("%s needs kernel-drop INTERFACE...", kw)
			}
		}
		return nil
	}
	rps, _ := cfg.Value("requests-per-second")
	if rps == "0" && len(cfg.RequestPrefixes(false))+len(cfg.RequestPrefixes(true)) == 0 {
		return c.Err("kernel-drop needs requests-per-second or a request prefix: it drops networks that a request limit keeps refusing")
	}
	return nil
}

// kernelDrop is the kernel drop list of the server blocks of one
// configuration that listen on the same addresses: they share it, so that
// the networks any of them keeps refusing are dropped on those addresses.
// The blocks open it at startup (the first opens the List) and close it
// as they stop (the last closes it).
type kernelDrop struct {
	opts       kernelOptions
	reportOnly bool
	listeners  []netip.AddrPort // where the blocks listen for plain DNS
	zones      []string         // the zones of the first block, for errors

	mu    sync.Mutex
	users map[*RRL]bool // blocks that opened it and have not closed it
	// list is set at startup, read by every query the blocks serve.
	list atomic.Pointer[kerneldrop.List]
}

// newKernelDrop returns the block's kernel drop list, not yet open, or
// nil without kernel-drop. Open happens at startup, so that a
// configuration that fails to load attaches nothing.
func newKernelDrop(opts kernelOptions) *kernelDrop {
	if len(opts.interfaces) == 0 {
		return nil
	}
	return &kernelDrop{opts: opts}
}

// open opens the list for the block h: for the first block, it attaches
// the program to the interfaces (or joins the one this process attached
// there) and names the listeners. The error stops CoreDNS, naming the
// interface and the cause.
func (k *kernelDrop) open(h *RRL) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.users) > 0 {
		k.users[h] = true
		return nil
	}
	list, err := kerneldrop.Open(kerneldrop.Config{
		Interfaces: k.opts.interfaces,
		After:      k.opts.after,
		For:        k.opts.hold,
		ReportOnly: k.reportOnly,
		Logf:       log.Infof,
	})
	if err != nil {
		return err
	}
	for _, ap := range k.listeners {
		if err := list.AddListener(ap); err != nil {
			list.Close()
			return err
		}
	}
	k.users = map[*RRL]bool{h: true}
	k.list.Store(list)
	if prev := openKernels.swap(k); prev != nil {
		list.Adopt(prev) // a reload: the networks in the kernel stay there
	}
	return nil
}

// openKernels are the open kernel drop lists, by the addresses they
// cover, across configurations: the list that a reload's new configuration
// opens takes over the networks of the one it replaces, which is still
// open then (caddy starts the new configuration before it stops the old).
var openKernels = &openRegistry{m: map[string]*kernelDrop{}}

type openRegistry struct {
	mu sync.Mutex
	m  map[string]*kernelDrop
}

// swap records k as the open list on its addresses and returns the list
// it replaces there, if one is open.
func (r *openRegistry) swap(k *kernelDrop) *kerneldrop.List {
	key := fmt.Sprint(k.listeners)
	r.mu.Lock()
	defer r.mu.Unlock()
	prev := r.m[key]
	r.m[key] = k
	if prev == nil {
		return nil
	}
	return prev.list.Load()
}

// forget removes k, closing, unless a newer list has replaced it.
func (r *openRegistry) forget(k *kernelDrop) {
	key := fmt.Sprint(k.listeners)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[key] == k {
		delete(r.m, key)
	}
}

// close closes the list for the block h: when the last block that opened
// it stops, it takes the networks out of the kernel, and detaches the
// program where no other list (a reload's new configuration) uses it.
func (k *kernelDrop) close(h *RRL) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.users[h] {
		return // never opened for h, or closed already
	}
	if delete(k.users, h); len(k.users) == 0 {
		openKernels.forget(k)
		if l := k.list.Swap(nil); l != nil {
			l.Close()
		}
	}
}

// refused tells the list that a request limit refused an unproven UDP
// request from network, the network of the account that refused it.
func (k *kernelDrop) refused(network netip.Prefix) {
	k.list.Load().Refused(network) // a nil List (not open) does nothing
}

// opened returns the open list, or nil: kernel-drop is off, or the block
// has not started.
func (k *kernelDrop) opened() *kerneldrop.List {
	if k == nil {
		return nil
	}
	return k.list.Load()
}

// blockListeners returns the addresses on which a server block with keys
// (such as "example.org:1053", "dns://.:53", "tls://.:853") serves plain
// DNS, on each host of hosts (listenHosts; "" is every address, [::]
// standing for both families), sorted: those whose UDP packets the program
// drops. A host that is not an address is left out.
func blockListeners(keys, hosts []string) []netip.AddrPort {
	var aps []netip.AddrPort
	for _, key := range keys {
		trans, rest := cparse.Transport(key)
		if trans != ctransport.DNS {
			continue
		}
		_, port, err := plugin.SplitHostPort(rest)
		if err != nil {
			continue
		}
		if port == "" {
			port = dnsserver.Port
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			continue
		}
		for _, h := range hosts {
			if h == "" {
				h = "::"
			}
			if a, err := netip.ParseAddr(h); err == nil {
				aps = append(aps, netip.AddrPortFrom(a.Unmap(), uint16(p)))
			}
		}
	}
	slices.SortFunc(aps, netip.AddrPort.Compare)
	return slices.Compact(aps)
}

// kernelShares are the kernel drop lists of the configuration being
// loaded, by the addresses they cover, so that blocks on the same
// addresses share one.
var kernelShares = &kernelRegistry{}

type kernelRegistry struct {
	mu  sync.Mutex
	gen any
	by  map[netip.AddrPort]*kernelDrop
}

// share returns the kernel drop list for a block of configuration gen
// with zones, kernel-drop settings k and report-only mode reportOnly,
// listening on listeners: k itself for the first block on them, else the
// list an earlier block made. Blocks that share an address must share all
// of them and the settings: the program drops a network on an address for
// one list only.
func (r *kernelRegistry) share(gen any, k *kernelDrop, reportOnly bool, listeners []netip.AddrPort, zones []string) (*kernelDrop, error) {
	if len(listeners) == 0 {
		return nil, fmt.Errorf("kernel-drop: the block %v serves no plain DNS on an address (dns://, bind to addresses): the program drops only UDP packets to a listener", zones)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gen != gen {
		r.gen, r.by = gen, map[netip.AddrPort]*kernelDrop{}
	}
	other := r.by[listeners[0]]
	for _, ap := range listeners {
		if r.by[ap] != other {
			return nil, fmt.Errorf("kernel-drop: the blocks %v and %v share %s but not all their addresses: give them the same ones, or kernel-drop to one", zones, r.zonesOn(ap, other), ap)
		}
	}
	if other == nil {
		k.reportOnly, k.listeners, k.zones = reportOnly, listeners, zones
		for _, ap := range listeners {
			r.by[ap] = k
		}
		return k, nil
	}
	if !slices.Equal(other.listeners, listeners) || other.reportOnly != reportOnly || !slices.Equal(other.opts.interfaces, k.opts.interfaces) ||
		other.opts.after != k.opts.after || other.opts.hold != k.opts.hold {
		return nil, fmt.Errorf("kernel-drop: the blocks %v and %v on %s share one kernel drop list, so they need the same addresses, report-only, kernel-drop, kernel-drop-after and kernel-drop-for", other.zones, zones, listeners[0])
	}
	return other, nil
}

// zonesOn names the block whose list covers ap, or that of other.
func (r *kernelRegistry) zonesOn(ap netip.AddrPort, other *kernelDrop) []string {
	if k := r.by[ap]; k != nil {
		return k.zones
	}
	return other.zones
}

// setupKernel gives the block with kernel-drop its kernel drop list,
// shared with the blocks of the configuration on the same addresses, and
// opens it at startup.
func setupKernel(c *caddy.Controller, h *RRL) error {
	if h.kernel == nil {
		return nil
	}
	cfg := dnsserver.GetConfig(c)
	k, err := kernelShares.share(c.Context(), h.kernel, h.reportOnly, blockListeners(c.ServerBlockKeys, listenHosts(cfg)), h.Zones)
	if err != nil {
		return err
	}
	if k != h.kernel {
		h.stats.kernel = nil // the first block's metrics report the shared list
	}
	h.kernel = k
	c.OnStartup(func() error { return k.open(h) })
	return nil
}

// kernelJSON is a network in the kernel drop list as the status endpoint
// serves it (in report-only mode, one that would be).
type kernelJSON struct {
	Network     string    `json:"network"`      // "192.0.2.0/24"
	RefusedFrom time.Time `json:"refused_from"` // when the run of refusals that put it there began
	Since       time.Time `json:"since"`        // when it went into the kernel
	LeftSeconds float64   `json:"left_seconds"` // until it leaves, and its packets reach the server again
}

// newKernelJSON returns the networks of l, nil when l is nil.
func newKernelJSON(l *kerneldrop.List) []kernelJSON {
	var out []kernelJSON
	for _, e := range l.Networks() {
		out = append(out, kernelJSON{Network: e.Network.String(), RefusedFrom: e.Refused, Since: e.Since, LeftSeconds: e.Left.Seconds()})
	}
	return out
}
