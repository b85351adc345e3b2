// Package kerneldrop keeps a DNS server's floods out of the server: a
// network that a request limit keeps refusing goes, for a while, into a
// kernel drop list, and an XDP program on the server's interfaces drops its
// UDP packets to the server's addresses and ports before the kernel hands
// them to a socket.
//
// Refusing a request costs a server about as much as answering it: the
// packet is received, copied, parsed and judged. A network that floods
// without a pause gains nothing from those refusals, so after After of them
// its packets are dropped in the kernel for For, at a fraction of the cost;
// then they reach the server again and are judged afresh.
//
// Only UDP is dropped, and only to the listeners the server names: TCP
// (where a client proves its address) and other ports always pass. The
// server calls Refused for an unproven UDP request a request limit refused.
// The program sees only addresses: every UDP packet from a listed network
// is dropped, so the server must not list a network that holds a client it
// exempts (rrl.RRL.RefusalNetwork names none such), and a client that
// proves itself with a server cookie inside a listed network is dropped
// with it over UDP, while TCP still reaches the server.
//
// A List needs root, or CAP_BPF and CAP_NET_ADMIN, and a kernel with XDP
// (5.9 or later for XDP links, 5.8 for bpf_ktime_get_boot_ns). The program
// is written with github.com/cilium/ebpf's asm package: nothing is compiled
// outside Go.
package kerneldrop

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Defaults of Config.
const (
	DefaultAfter       = time.Second
	DefaultFor         = 10 * time.Second
	DefaultMaxNetworks = 4096
	// MaxNetworksLimit is the largest Config.MaxNetworks.
	MaxNetworksLimit = maxNetworksLimit
)

// Config configures a List.
type Config struct {
	// Interfaces are the network interfaces the XDP program attaches to,
	// by name ("lo", "eth0"). At least one, unless ReportOnly.
	Interfaces []string

	// After is how long a network must be refused without a pause before
	// it goes into the kernel; 0 means DefaultAfter (1s).
	After time.Duration

	// For is how long a network stays in the kernel; 0 means DefaultFor
	// (10s). Then its packets reach the server again and are judged
	// afresh: if it still floods, it goes back in after another After.
	For time.Duration

	// Pause is the longest gap between two refusals of a network that
	// still counts as one run of refusals: a longer gap starts the run
	// again. 0 means After/2, but at least 200ms and at most 1s: a flood
	// is steady at that scale, so a gap of half of After means it stopped;
	// the floor keeps a short After from being broken by a bursty sender
	// or the scheduler, and the ceiling keeps a long After from counting
	// sporadic refusals as a flood.
	Pause time.Duration

	// MaxNetworks is how many networks this List keeps in the kernel at
	// once; 0 means DefaultMaxNetworks (4096), at most MaxNetworksLimit.
	// When it is full, those refused longest stay: a network that
	// qualifies waits, still a candidate, and takes the first place to
	// free (the longest refused of those waiting first). User space
	// follows at most 4×MaxNetworks candidate networks; when that is
	// full, a new network is not followed (its run would be the youngest)
	// until networks whose run has ended are forgotten.
	MaxNetworks int

	// ReportOnly puts nothing in the kernel: the List loads no program,
	// needs no privilege, and only logs and lists (Networks) what it
	// would have dropped.
	ReportOnly bool

	// Logf, if not nil, gets one line when a network goes into the
	// kernel and one when it leaves, and one when the program attaches to
	// an interface. It is not called with the List's lock held.
	Logf func(format string, args ...any)

	// Now, if not nil, is the clock of the user-space timing (runs,
	// pauses, expiry), for tests; the kernel's deadline is always
	// CLOCK_BOOTTIME now plus For.
	Now func() time.Time

	// TickEvery is how often the List's goroutine calls Tick to expire
	// networks and forget ended runs; 0 means For/20, at least 10ms and at
	// most 500ms. Negative starts no goroutine: the caller calls Tick.
	TickEvery time.Duration
}

// withDefaults returns c with its defaults filled in, or an error for a
// value out of range.
func (c Config) withDefaults() (Config, error) {
	switch {
	case c.After < 0, c.For < 0, c.Pause < 0:
		return c, fmt.Errorf("kerneldrop: negative duration (After %v, For %v, Pause %v)", c.After, c.For, c.Pause)
	case c.MaxNetworks < 0 || c.MaxNetworks > MaxNetworksLimit:
		return c, fmt.Errorf("kerneldrop: MaxNetworks %d out of range [0, %d]", c.MaxNetworks, MaxNetworksLimit)
	case len(c.Interfaces) == 0 && !c.ReportOnly:
		return c, errors.New("kerneldrop: no interface to attach to")
	}
	if c.After == 0 {
		c.After = DefaultAfter
	}
	if c.For == 0 {
		c.For = DefaultFor
	}
	if c.Pause == 0 {
		c.Pause = min(max(c.After/2, 200*time.Millisecond), time.Second)
	}
	if c.MaxNetworks == 0 {
		c.MaxNetworks = DefaultMaxNetworks
	}
	if c.TickEvery == 0 {
		c.TickEvery = min(max(c.For/20, 10*time.Millisecond), 500*time.Millisecond)
	}
	return c, nil
}

// kernel is a List's part of the kernel; a List in ReportOnly mode has
// none.
type kernel interface {
	put(p netip.Prefix, d time.Duration) error
	del(p netip.Prefix) error
	addListener(ap netip.AddrPort) error
	removeListener(ap netip.AddrPort)
	dropped() (v4, v6 uint64, err error)
	close()
}

// Entry is a network in the kernel.
type Entry struct {
	Network netip.Prefix
	Refused time.Time     // when the run of refusals that put it there began
	Since   time.Time     // when it went in
	Until   time.Time     // when it leaves
	Left    time.Duration // Until less the time of the call to Networks
}

// candidate is a network being refused, not in the kernel.
type candidate struct {
	start, last int64 // the run's first and latest refusal (List.now)
	waiting     bool  // qualified while the kernel's list was full
}

// entry is a network in the kernel; the times are List.now's.
type entry struct {
	start, since, until int64
}

// List is a kernel drop list. Its methods are safe for concurrent use.
// A nil *List does nothing: Refused, Tick, AddListener, RemoveListener
// and Close do nothing (and return nil), Dropped is 0 and Networks nil, so
// a server can call it whether the kernel drop is on or not.
type List struct {
	cfg      Config
	maxCands int
	k        kernel    // nil in ReportOnly mode
	base     time.Time // the time of List.now's 0
	after    int64     // cfg.After, cfg.Pause and cfg.For in nanoseconds
	pause    int64
	forNS    int64

	mu        sync.Mutex
	cands     map[netip.Prefix]candidate
	in        map[netip.Prefix]entry
	listeners map[netip.AddrPort]bool
	lastSweep int64 // when sweepLocked last ran; long ago before
	closed    bool

	stop chan struct{}
	done chan struct{}
}

// Open loads the XDP program and attaches it to cfg.Interfaces, or joins
// the program this process already attached there: Lists on the same
// interfaces (server blocks, or a reload's new server before the old one
// closes) share one program, attached while any of them is open. Each
// attaches in native (driver) mode where the driver has it, in generic mode
// otherwise. The error names the interface and the cause, e.g.
// "kerneldrop: attach XDP to lo: ...: operation not permitted (needs root,
// or CAP_BPF and CAP_NET_ADMIN)". In ReportOnly mode Open loads nothing.
//
// The List drops nothing until AddListener names the server's addresses.
func Open(cfg Config) (*List, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var k kernel
	if cfg.ReportOnly {
		for _, name := range cfg.Interfaces {
			if _, err := net.InterfaceByName(name); err != nil {
				return nil, fmt.Errorf("kerneldrop: interface %s: %w", name, err)
			}
		}
	} else if k, err = openKernel(cfg.Interfaces, cfg.Logf); err != nil {
		return nil, err
	}
	return newList(cfg, k), nil
}

// newList returns a List over k (nil: report only) for cfg with its
// defaults, and starts its goroutine unless cfg.TickEvery is negative.
func newList(cfg Config, k kernel) *List {
	l := &List{
		cfg:       cfg,
		maxCands:  4 * cfg.MaxNetworks,
		k:         k,
		after:     int64(cfg.After),
		pause:     int64(cfg.Pause),
		forNS:     int64(cfg.For),
		cands:     make(map[netip.Prefix]candidate, 4*cfg.MaxNetworks),
		in:        make(map[netip.Prefix]entry, cfg.MaxNetworks),
		listeners: map[netip.AddrPort]bool{},
		lastSweep: math.MinInt64 / 2,
	}
	if cfg.Now != nil {
		l.base = cfg.Now()
	} else {
		l.base = time.Now()
	}
	if cfg.TickEvery > 0 {
		l.stop, l.done = make(chan struct{}), make(chan struct{})
		go l.ticker(cfg.TickEvery)
	}
	return l
}

func (l *List) ticker(every time.Duration) {
	defer close(l.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.Tick()
		}
	}
}

// AddListener adds one of the server's UDP addresses: packets to it from
// a network in the list are dropped. The unspecified address stands for
// any address on that port: 0.0.0.0 for IPv4, [::] for IPv6 and IPv4 (as a
// socket bound to [::] receives both). An IPv4-mapped address is taken as
// IPv4 and a zone is ignored. Adding a listener twice is adding it once.
//
// When several Lists add the same listener on an interface, the latest
// owns it (its networks are dropped there) until it removes it or closes,
// then the one before: a reload's new server takes over the old one's
// listeners.
func (l *List) AddListener(addr netip.AddrPort) error {
	if l == nil {
		return nil
	}
	ap, ok := listenerAddr(addr)
	if !ok {
		return fmt.Errorf("kerneldrop: invalid listener %s", addr)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("kerneldrop: AddListener on a closed List")
	}
	if l.k != nil {
		if err := l.k.addListener(ap); err != nil {
			return err
		}
	}
	l.listeners[ap] = true
	return nil
}

// RemoveListener removes a listener AddListener added; others it ignores.
func (l *List) RemoveListener(addr netip.AddrPort) {
	if l == nil {
		return
	}
	ap, ok := listenerAddr(addr)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || !l.listeners[ap] {
		return
	}
	if l.k != nil {
		l.k.removeListener(ap)
	}
	delete(l.listeners, ap)
}

// Refused tells the List that a request limit refused an unproven UDP
// request from network (the limit's account, e.g. a /24 or /56). Once a
// network's refusals have gone on for After with no gap longer than Pause,
// it goes into the kernel for For (or waits for a place, see MaxNetworks).
//
// Refused is made to be called for each refused packet under a flood: it
// takes one mutex, does not allocate, and makes a system call only when a
// network goes into the kernel. An invalid prefix is ignored; an
// IPv4-mapped prefix of at least 96 bits is taken as the IPv4 network.
func (l *List) Refused(network netip.Prefix) {
	if l == nil {
		return
	}
	p, ok := normalize(network)
	if !ok {
		return
	}
	now := l.now()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	if _, in := l.in[p]; in {
		l.mu.Unlock()
		return
	}
	c, ok := l.cands[p]
	switch {
	case !ok:
		if len(l.cands) >= l.maxCands {
			if now-l.lastSweep < l.pause {
				l.mu.Unlock()
				return
			}
			l.sweepLocked(now)
			if len(l.cands) >= l.maxCands {
				l.mu.Unlock()
				return
			}
		}
		c = candidate{start: now}
	case now-c.last > l.pause:
		c = candidate{start: now}
	}
	c.last = now
	if c.waiting || now-c.start < l.after {
		l.cands[p] = c
		l.mu.Unlock()
		return
	}
	line, entered := l.enterLocked(p, &c, now)
	if !entered {
		l.cands[p] = c
	}
	l.mu.Unlock()
	l.log(line)
}

// logLine is a line for Logf, built under the lock and written after it.
type logLine struct {
	format string
	args   []any
}

func (l *List) log(lines ...logLine) {
	if l.cfg.Logf == nil {
		return
	}
	for _, line := range lines {
		if line.format != "" {
			l.cfg.Logf(line.format, line.args...)
		}
	}
}

// enterLocked puts p, whose run c qualifies, into the kernel: it returns
// the line to log and whether p went in. When the list is full, c waits;
// when the kernel refuses, c's run starts again, to try again after
// another After.
func (l *List) enterLocked(p netip.Prefix, c *candidate, now int64) (logLine, bool) {
	if len(l.in) >= l.cfg.MaxNetworks {
		c.waiting = true
		return logLine{}, false
	}
	if l.k != nil {
		if err := l.k.put(p, l.cfg.For); err != nil {
			*c = candidate{start: now, last: now}
			return logLine{"kernel drop: %s not put in the kernel: %v", []any{p, err}}, false
		}
	}
	delete(l.cands, p)
	l.in[p] = entry{start: c.start, since: now, until: now + l.forNS}
	run := time.Duration(now - c.start).Round(time.Millisecond)
	if l.k == nil {
		return logLine{"kernel drop (report only): %s would be dropped for %v, refused for %v without a pause", []any{p, l.cfg.For, run}}, true
	}
	return logLine{"kernel drop: %s dropped in the kernel for %v, refused for %v without a pause", []any{p, l.cfg.For, run}}, true
}

// Adopt takes over the networks that from has in the kernel, each for the
// time it has left, so that a server that replaces another (a reload)
// keeps dropping them without a gap: from's entries stay in the kernel
// until from closes, and l's are there before. A network l already holds,
// or for which l has no place left, it leaves as it is; from's runs of
// refusals it does not take. Adopting from a List in ReportOnly mode, or
// into one, adopts what would be dropped.
func (l *List) Adopt(from *List) {
	if l == nil || from == nil || l == from {
		return
	}
	var lines []logLine
	adopted := from.Networks() // before l's lock: two Lists' locks are never held at once
	l.mu.Lock()
	now := l.now()
	for _, e := range adopted {
		if _, in := l.in[e.Network]; in || len(l.in) >= l.cfg.MaxNetworks || e.Left <= 0 || l.closed {
			continue
		}
		if l.k != nil {
			if err := l.k.put(e.Network, e.Left); err != nil {
				lines = append(lines, logLine{"kernel drop: %s not carried over into the kernel: %v", []any{e.Network, err}})
				continue
			}
		}
		l.in[e.Network] = entry{start: int64(e.Refused.Sub(l.base)), since: int64(e.Since.Sub(l.base)), until: now + int64(e.Left)}
	}
	l.mu.Unlock()
	l.log(lines...)
}

// sweepLocked forgets the candidates whose run has ended (no refusal for
// more than Pause).
func (l *List) sweepLocked(now int64) {
	l.lastSweep = now
	for p, c := range l.cands {
		if now-c.last > l.pause {
			delete(l.cands, p)
		}
	}
}

// Tick takes out of the kernel the networks whose For is over, forgets the
// candidates whose run has ended, and gives the places freed to waiting
// candidates, those refused longest first. The List's goroutine calls it
// every Config.TickEvery; a caller that set TickEvery negative calls it.
func (l *List) Tick() {
	if l == nil {
		return
	}
	now := l.now()
	var lines []logLine
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	for p, e := range l.in {
		if now < e.until {
			continue
		}
		if l.k != nil {
			if err := l.k.del(p); err != nil {
				lines = append(lines, logLine{"kernel drop: %s not taken out of the kernel: %v", []any{p, err}})
				continue
			}
		}
		delete(l.in, p)
		lines = append(lines, l.leaveLine(p, e, now))
	}
	l.sweepLocked(now)
	if len(l.in) < l.cfg.MaxNetworks {
		var waiting []netip.Prefix
		for p, c := range l.cands {
			if c.waiting {
				waiting = append(waiting, p)
			}
		}
		slices.SortFunc(waiting, func(a, b netip.Prefix) int {
			return cmp.Or(cmp.Compare(l.cands[a].start, l.cands[b].start), a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
		})
		for _, p := range waiting {
			if len(l.in) >= l.cfg.MaxNetworks {
				break
			}
			c := l.cands[p]
			c.waiting = false
			line, entered := l.enterLocked(p, &c, now)
			if !entered {
				l.cands[p] = c
			}
			lines = append(lines, line)
		}
	}
	l.mu.Unlock()
	l.log(lines...)
}

func (l *List) leaveLine(p netip.Prefix, e entry, now int64) logLine {
	held := time.Duration(now - e.since).Round(time.Millisecond)
	if l.k == nil {
		return logLine{"kernel drop (report only): %s out after %v", []any{p, held}}
	}
	return logLine{"kernel drop: %s out of the kernel after %v", []any{p, held}}
}

// now returns the List's time: nanoseconds since base. Without an injected
// clock it reads only the monotonic clock, half the cost of time.Now.
func (l *List) now() int64 {
	if l.cfg.Now != nil {
		return int64(l.cfg.Now().Sub(l.base))
	}
	return int64(time.Since(l.base))
}

// time returns the List's time t as a time.Time.
func (l *List) time(t int64) time.Time { return l.base.Add(time.Duration(t)) }

// Networks returns the networks in the kernel now (in ReportOnly mode,
// those that would be), with the time they have left, the earliest to
// leave first.
func (l *List) Networks() []Entry {
	if l == nil {
		return nil
	}
	now := l.now()
	l.mu.Lock()
	var es []Entry
	for p, e := range l.in {
		if e.until > now {
			es = append(es, Entry{Network: p, Refused: l.time(e.start), Since: l.time(e.since), Until: l.time(e.until), Left: time.Duration(e.until - now)})
		}
	}
	l.mu.Unlock()
	slices.SortFunc(es, func(a, b Entry) int {
		return cmp.Or(a.Until.Compare(b.Until), a.Network.Addr().Compare(b.Network.Addr()), cmp.Compare(a.Network.Bits(), b.Network.Bits()))
	})
	return es
}

// Dropped returns the number of packets the kernel dropped for this List
// since Open: packets of its networks to its listeners. It is 0 in
// ReportOnly mode, and when the counters cannot be read.
func (l *List) Dropped() uint64 {
	v4, v6 := l.DroppedByFamily()
	return v4 + v6
}

// DroppedByFamily is Dropped for IPv4 and IPv6 packets apart.
func (l *List) DroppedByFamily() (ipv4, ipv6 uint64) {
	if l == nil || l.k == nil {
		return 0, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, 0
	}
	v4, v6, err := l.k.dropped()
	if err != nil {
		return 0, 0
	}
	return v4, v6
}

// Close takes the List's networks out of the kernel and its listeners out
// of the program, and detaches the program from the interfaces no other
// open List uses. Closing twice is closing once.
func (l *List) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	now := l.now()
	var lines []logLine
	var errs []error
	for p, e := range l.in {
		if l.k != nil {
			if err := l.k.del(p); err != nil {
				errs = append(errs, fmt.Errorf("kerneldrop: take %s out: %w", p, err))
			}
		}
		lines = append(lines, l.leaveLine(p, e, now))
	}
	clear(l.in)
	clear(l.cands)
	if l.k != nil {
		l.k.close()
	}
	l.mu.Unlock()
	if l.stop != nil {
		close(l.stop)
		<-l.done
	}
	l.log(lines...)
	return errors.Join(errs...)
}
