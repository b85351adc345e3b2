package kerneldrop

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeKernel stands for the kernel in the tests of user space's rules.
type fakeKernel struct {
	mu        sync.Mutex
	in        map[netip.Prefix]time.Duration
	listeners map[netip.AddrPort]bool
	failPut   error
	puts      int
	closed    bool
}

func newFakeKernel() *fakeKernel {
	return &fakeKernel{in: map[netip.Prefix]time.Duration{}, listeners: map[netip.AddrPort]bool{}}
}

func (k *fakeKernel) put(p netip.Prefix, d time.Duration) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.puts++
	if k.failPut != nil {
		return k.failPut
	}
	k.in[p] = d
	return nil
}

func (k *fakeKernel) del(p netip.Prefix) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.in, p)
	return nil
}

func (k *fakeKernel) addListener(ap netip.AddrPort) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.listeners[ap] = true
	return nil
}

func (k *fakeKernel) removeListener(ap netip.AddrPort) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.listeners, ap)
}

func (k *fakeKernel) dropped() (uint64, uint64, error) { return 7, 3, nil }

func (k *fakeKernel) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
}

func (k *fakeKernel) has(p netip.Prefix) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.in[p]
	return ok
}

// logRecorder collects a List's log lines.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *logRecorder) Logf(f string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf(f, args...))
}

func (r *logRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lines
	r.lines = nil
	return l
}

// newTestList returns a List over a fake kernel with a fake clock and no
// goroutine.
func newTestList(t *testing.T, cfg Config) (*List, *fakeKernel, *fakeClock, *logRecorder) {
	t.Helper()
	c, k, r := newFakeClock(), newFakeKernel(), &logRecorder{}
	cfg.Interfaces = []string{"test0"}
	cfg.Now, cfg.Logf, cfg.TickEvery = c.Now, r.Logf, -1
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	l := newList(cfg, k)
	t.Cleanup(func() { l.Close() })
	return l, k, c, r
}

var (
	netA = netip.MustParsePrefix("192.0.2.0/24")
	netB = netip.MustParsePrefix("198.51.100.0/24")
	netC = netip.MustParsePrefix("203.0.113.0/24")
	netD = netip.MustParsePrefix("2001:db8:1::/56")
)

func inList(l *List, p netip.Prefix) bool {
	return slices.ContainsFunc(l.Networks(), func(e Entry) bool { return e.Network == p })
}

func TestDefaults(t *testing.T) {
	for _, tc := range []struct {
		after, pause, forD, tick time.Duration
	}{
		{0, 500 * time.Millisecond, 0, 500 * time.Millisecond},
		{100 * time.Millisecond, 200 * time.Millisecond, time.Second, 50 * time.Millisecond},
		{10 * time.Second, time.Second, 100 * time.Millisecond, 10 * time.Millisecond},
	} {
		c, err := Config{After: tc.after, For: tc.forD, ReportOnly: true}.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if c.Pause != tc.pause || c.TickEvery != tc.tick {
			t.Errorf("After %v For %v: Pause %v TickEvery %v, want %v %v", tc.after, tc.forD, c.Pause, c.TickEvery, tc.pause, tc.tick)
		}
		if c.MaxNetworks != DefaultMaxNetworks || c.For == 0 || c.After == 0 {
			t.Errorf("defaults not filled: %+v", c)
		}
	}
	for _, bad := range []Config{
		{After: -1, ReportOnly: true},
		{For: -1, ReportOnly: true},
		{Pause: -1, ReportOnly: true},
		{MaxNetworks: -1, ReportOnly: true},
		{MaxNetworks: MaxNetworksLimit + 1, ReportOnly: true},
		{}, // no interface
	} {
		if _, err := Open(bad); err == nil {
			t.Errorf("Open(%+v): no error", bad)
		}
	}
	if _, err := Open(Config{Interfaces: []string{"no-such-interface0"}, ReportOnly: true}); err == nil || !strings.Contains(err.Error(), "no-such-interface0") {
		t.Errorf("an unknown interface: %v", err)
	}
}

// TestRun: a network goes in once refused for After with no gap over
// Pause; a longer gap starts the run again.
func TestRun(t *testing.T) {
	l, k, c, r := newTestList(t, Config{After: time.Second, Pause: 400 * time.Millisecond, For: 10 * time.Second})
	for i := 0; i < 3; i++ { // 0, 400ms, 800ms
		l.Refused(netA)
		c.Advance(400 * time.Millisecond) // a gap of exactly Pause is no pause
	}
	if inList(l, netA) {
		t.Fatal("in after 800ms")
	}
	l.Refused(netA) // 1.2s
	if !inList(l, netA) || !k.has(netA) {
		t.Fatalf("not in after 1.2s of refusals: %v", l.Networks())
	}
	if k.in[netA] != 10*time.Second {
		t.Errorf("put for %v, want 10s", k.in[netA])
	}
	if lines := r.take(); len(lines) != 1 || !strings.Contains(lines[0], "192.0.2.0/24 dropped in the kernel for 10s, refused for 1.2s without a pause") {
		t.Errorf("log: %q", lines)
	}

	// A gap over Pause starts again.
	for _, gap := range []time.Duration{0, 300, 300, 401, 300, 300, 300} {
		c.Advance(gap * time.Millisecond)
		l.Refused(netB)
	}
	if inList(l, netB) {
		t.Fatal("in after a pause and 900ms")
	}
	c.Advance(100 * time.Millisecond)
	l.Refused(netB)
	if !inList(l, netB) {
		t.Fatal("not in after 1s since the pause")
	}

	// Refusals of a network in the list change nothing.
	puts := k.puts
	l.Refused(netA)
	if k.puts != puts {
		t.Error("a refusal of a listed network put it again")
	}
}

// TestExpire: Tick takes a network out after For, logs it, and the
// network is judged afresh.
func TestExpire(t *testing.T) {
	l, k, c, r := newTestList(t, Config{After: time.Second, For: 5 * time.Second})
	for i := 0; i <= 2; i++ {
		l.Refused(netD)
		c.Advance(500 * time.Millisecond)
	}
	// In at 1s; Networks counts down from 5s.
	es := l.Networks()
	if len(es) != 1 || es[0].Network != netD || es[0].Left != 4500*time.Millisecond {
		t.Fatalf("Networks: %+v", es)
	}
	if !es[0].Until.Equal(es[0].Since.Add(5*time.Second)) || es[0].Refused.Add(time.Second) != es[0].Since {
		t.Errorf("entry times: %+v", es[0])
	}
	r.take()
	c.Advance(4 * time.Second) // 5.5s: still in
	l.Tick()
	if !k.has(netD) {
		t.Fatal("out before For")
	}
	c.Advance(500 * time.Millisecond) // 6s: For is over
	if len(l.Networks()) != 0 {
		t.Error("Networks lists an entry whose For is over")
	}
	l.Tick()
	if k.has(netD) {
		t.Fatal("still in after For and Tick")
	}
	if lines := r.take(); len(lines) != 1 || !strings.Contains(lines[0], "2001:db8:1::/56 out of the kernel after 5s") {
		t.Errorf("log: %q", lines)
	}
	// Afresh: one refusal does not put it back.
	l.Refused(netD)
	if inList(l, netD) {
		t.Error("back in on its first refusal after For")
	}
}

// TestFull: with MaxNetworks in the kernel, a network that qualifies
// waits; places freed go to those waiting refused longest; a waiting
// network whose run ends is forgotten.
func TestFull(t *testing.T) {
	l, k, c, _ := newTestList(t, Config{After: time.Second, Pause: time.Second, For: 10 * time.Second, MaxNetworks: 1})
	refuse := func(ps ...netip.Prefix) {
		for _, p := range ps {
			l.Refused(p)
		}
	}
	refuse(netA)
	c.Advance(500 * time.Millisecond)
	refuse(netA, netB) // B's run starts at 0.5s
	c.Advance(200 * time.Millisecond)
	refuse(netC) // C's at 0.7s
	c.Advance(800 * time.Millisecond)
	refuse(netA) // 1.5s: A in
	refuse(netC, netB)
	c.Advance(500 * time.Millisecond) // 2s: B and C qualify, wait
	refuse(netC, netB)
	if !k.has(netA) || k.has(netB) || k.has(netC) || len(l.Networks()) != 1 {
		t.Fatalf("full at one: kernel %v", k.in)
	}
	for c.Advance(time.Second); c.Now().Sub(newFakeClock().Now()) < 12500*time.Millisecond; c.Advance(time.Second) {
		refuse(netC, netB)
		l.Tick()
	}
	// A left at 11.5s; B, refused since 0.5s, takes its place before C.
	if k.has(netA) || !k.has(netB) || k.has(netC) {
		t.Fatalf("after A's For: kernel %v", k.in)
	}
	// C stops; its run ends; it is forgotten, not put in when B leaves.
	c.Advance(11 * time.Second)
	l.Tick()
	if len(k.in) != 0 {
		t.Errorf("after B's For, with C's run over: kernel %v", k.in)
	}
	if n := len(l.cands); n != 0 {
		t.Errorf("%d candidates left", n)
	}
}

// TestCandidatesBounded: at most 4×MaxNetworks candidates; a new network
// is not followed while they are all in a run, and is once runs have
// ended.
func TestCandidatesBounded(t *testing.T) {
	l, k, c, _ := newTestList(t, Config{After: time.Hour, Pause: 500 * time.Millisecond, MaxNetworks: 1})
	nets := make([]netip.Prefix, 5)
	for i := range nets {
		nets[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 16)
	}
	for range 5 {
		for _, p := range nets {
			l.Refused(p)
		}
		c.Advance(250 * time.Millisecond)
	}
	if len(l.cands) != 4 || len(k.in) != 0 {
		t.Fatalf("%d candidates, kernel %v", len(l.cands), k.in)
	}
	if _, ok := l.cands[nets[4]]; ok {
		t.Fatal("the fifth network followed")
	}
	// The others stop; past Pause they are forgotten and the fifth is
	// followed.
	c.Advance(time.Second)
	l.Refused(nets[4])
	if _, ok := l.cands[nets[4]]; !ok {
		t.Fatalf("the fifth network not followed once runs ended: %d candidates", len(l.cands))
	}
}

// TestPutFails: when the kernel refuses an entry, the network is logged,
// not listed, and tried again after another After.
func TestPutFails(t *testing.T) {
	l, k, c, r := newTestList(t, Config{After: time.Second})
	k.failPut = errors.New("no memory")
	for range 5 {
		l.Refused(netA)
		c.Advance(250 * time.Millisecond)
	}
	if inList(l, netA) || k.puts != 1 {
		t.Fatalf("listed %v, %d puts", l.Networks(), k.puts)
	}
	if lines := r.take(); len(lines) != 1 || !strings.Contains(lines[0], "not put in the kernel: no memory") {
		t.Errorf("log: %q", lines)
	}
	k.failPut = nil
	for range 4 {
		l.Refused(netA)
		c.Advance(250 * time.Millisecond)
	}
	if !inList(l, netA) || k.puts != 2 {
		t.Errorf("after another After: listed %v, %d puts", l.Networks(), k.puts)
	}
}

func TestReportOnly(t *testing.T) {
	c, r := newFakeClock(), &logRecorder{}
	l, err := Open(Config{ReportOnly: true, Now: c.Now, Logf: r.Logf, TickEvery: -1, For: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.AddListener(netip.MustParseAddrPort("[::]:53")); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		l.Refused(netA)
		c.Advance(500 * time.Millisecond)
	}
	if !inList(l, netA) || l.Dropped() != 0 {
		t.Fatalf("Networks %v Dropped %d", l.Networks(), l.Dropped())
	}
	c.Advance(time.Second)
	l.Tick()
	lines := r.take()
	if len(lines) != 2 || !strings.Contains(lines[0], "(report only): 192.0.2.0/24 would be dropped for 1s") || !strings.Contains(lines[1], "(report only): 192.0.2.0/24 out after 1.5s") {
		t.Errorf("log: %q", lines)
	}
}

// TestOddInput: nothing panics; odd prefixes are normalized or ignored.
func TestOddInput(t *testing.T) {
	l, k, c, _ := newTestList(t, Config{After: time.Second})
	for _, p := range []netip.Prefix{
		{},
		netip.PrefixFrom(netip.Addr{}, 0),
		netip.PrefixFrom(netip.MustParseAddr("192.0.2.1"), 33),
		netip.PrefixFrom(netip.MustParseAddr("::1"), 129),
		netip.PrefixFrom(netip.MustParseAddr("fe80::1%eth0"), 64),
		netip.MustParsePrefix("0.0.0.0/0"),
		netip.MustParsePrefix("::/0"),
	} {
		for range 3 {
			l.Refused(p)
			c.Advance(500 * time.Millisecond)
		}
	}
	for p := range k.in {
		if !p.IsValid() || p != p.Masked() {
			t.Errorf("in the kernel: %v", p)
		}
	}
	if !k.has(netip.MustParsePrefix("fe80::/64")) || len(k.in) != 3 {
		t.Errorf("kernel %v: want fe80::/64, 0.0.0.0/0 and ::/0", k.in)
	}

	// An IPv4-mapped network and an unmasked one are the IPv4 network.
	for range 3 {
		l.Refused(netip.MustParsePrefix("::ffff:192.0.2.77/120"))
		c.Advance(500 * time.Millisecond)
	}
	if !k.has(netA) {
		t.Errorf("::ffff:192.0.2.77/120 is not 192.0.2.0/24: %v", k.in)
	}

	for _, ap := range []netip.AddrPort{{}, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0)} {
		if err := l.AddListener(ap); err == nil {
			t.Errorf("AddListener(%v): no error", ap)
		}
		l.RemoveListener(ap)
	}
	if err := l.AddListener(netip.MustParseAddrPort("[::ffff:127.0.0.1]:53")); err != nil {
		t.Fatal(err)
	}
	if err := l.AddListener(netip.AddrPortFrom(netip.MustParseAddr("fe80::1%lo"), 53)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"127.0.0.1:53", "[fe80::1]:53"} {
		if !k.listeners[netip.MustParseAddrPort(want)] {
			t.Errorf("listener %s missing: %v", want, k.listeners)
		}
	}
	l.RemoveListener(netip.MustParseAddrPort("127.0.0.1:53"))
	if k.listeners[netip.MustParseAddrPort("127.0.0.1:53")] {
		t.Error("RemoveListener left it")
	}
}

func TestNilList(t *testing.T) {
	var l *List
	l.Refused(netA)
	l.Tick()
	l.RemoveListener(netip.MustParseAddrPort("127.0.0.1:53"))
	if err := l.AddListener(netip.MustParseAddrPort("127.0.0.1:53")); err != nil {
		t.Error(err)
	}
	if l.Dropped() != 0 || l.Networks() != nil || l.Close() != nil {
		t.Error("a nil List did something")
	}
}

// TestClose: Close takes the networks out, logs them, releases the
// kernel, and the List then does nothing.
func TestClose(t *testing.T) {
	l, k, c, r := newTestList(t, Config{After: time.Second})
	for range 3 {
		l.Refused(netA)
		c.Advance(500 * time.Millisecond)
	}
	if v4, v6 := l.DroppedByFamily(); v4 != 7 || v6 != 3 || l.Dropped() != 10 {
		t.Errorf("Dropped: %d %d %d", v4, v6, l.Dropped())
	}
	r.take()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if len(k.in) != 0 || !k.closed {
		t.Errorf("after Close: kernel %v closed %v", k.in, k.closed)
	}
	if lines := r.take(); len(lines) != 1 || !strings.Contains(lines[0], "out of the kernel") {
		t.Errorf("log: %q", lines)
	}
	l.Refused(netA)
	l.Tick()
	if l.AddListener(netip.MustParseAddrPort("127.0.0.1:53")) == nil || l.Dropped() != 0 || l.Networks() != nil || l.Close() != nil {
		t.Error("a closed List did something")
	}
}

// TestTicker: without TickEvery negative, the List's goroutine expires
// networks.
func TestTicker(t *testing.T) {
	l, err := Open(Config{ReportOnly: true, After: 100 * time.Millisecond, For: 100 * time.Millisecond, TickEvery: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for start := time.Now(); time.Since(start) < 150*time.Millisecond && !inList(l, netA); time.Sleep(10 * time.Millisecond) {
		l.Refused(netA)
	}
	if !inList(l, netA) {
		t.Fatal("not in after 150ms of refusals")
	}
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		l.mu.Lock()
		n := len(l.in)
		l.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("not expired by the goroutine")
		}
	}
}

func TestRefusedDoesNotAllocate(t *testing.T) {
	l, _, c, _ := newTestList(t, Config{After: time.Hour, Pause: time.Hour, MaxNetworks: 1024})
	nets := make([]netip.Prefix, 1000)
	for i := range nets {
		nets[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)
	}
	i := 0
	if n := testing.AllocsPerRun(10000, func() {
		l.Refused(nets[i%len(nets)])
		i++
		c.Advance(time.Microsecond)
	}); n != 0 {
		t.Errorf("Refused allocates %v times a call", n)
	}
}

func BenchmarkRefused(b *testing.B) {
	for _, tc := range []struct {
		name string
		nets int
	}{{"one network", 1}, {"1000 networks", 1000}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg, _ := Config{ReportOnly: true, After: time.Hour, Pause: time.Hour, TickEvery: -1}.withDefaults()
			l := newList(cfg, nil)
			defer l.Close()
			nets := make([]netip.Prefix, tc.nets)
			for i := range nets {
				nets[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 7}), 24)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				l.Refused(nets[i%len(nets)])
				i++
			}
		})
	}
}

// TestAdopt: a List that replaces another takes over its networks, each
// for the time it has left, in its own kernel entries; a network it
// already holds or the ones past its room stay as they are, and from
// keeps its own.
func TestAdopt(t *testing.T) {
	old, oldK, oldC, _ := newTestList(t, Config{After: time.Second, For: 10 * time.Second})
	for _, p := range []netip.Prefix{netA, netB, netC} {
		for range 3 {
			old.Refused(p)
			oldC.Advance(500 * time.Millisecond)
		}
	}
	if n := len(old.Networks()); n != 3 || !oldK.has(netA) {
		t.Fatalf("the old list holds %d networks", n)
	}
	next, nextK, _, _ := newTestList(t, Config{After: time.Second, For: 10 * time.Second, MaxNetworks: 2})
	left := map[netip.Prefix]time.Duration{}
	for _, e := range old.Networks() {
		left[e.Network] = e.Left
	}
	next.Adopt(old)
	got := next.Networks()
	if len(got) != 2 {
		t.Fatalf("adopted %v, want the two that fit", got)
	}
	for _, e := range got {
		if !nextK.has(e.Network) || nextK.in[e.Network] != left[e.Network] || e.Left != left[e.Network] {
			t.Errorf("%s: in the kernel for %v (left %v), want the %v it had left", e.Network, nextK.in[e.Network], e.Left, left[e.Network])
		}
	}
	if !oldK.has(netA) || len(old.Networks()) != 3 {
		t.Error("adopting changed the old list")
	}
	next.Adopt(old) // again: nothing more fits, nothing moves
	if len(next.Networks()) != 2 || nextK.puts != 2 {
		t.Errorf("adopting twice: %d networks, %d puts", len(next.Networks()), nextK.puts)
	}
	var none *List
	none.Adopt(old)
	next.Adopt(nil)
	next.Adopt(next)
}
