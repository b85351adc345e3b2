package kerneldrop

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/dnsrrl/rrl/kerneldrop/kdtest"
	"golang.org/x/sys/unix"
)

// These tests load the program and send real UDP over lo, from 127.N.M.1
// sources (any 127.0.0.0/8 address binds without setup) and ::1, to the
// tests' own sockets: the program drops only packets to the listeners a
// test adds, so other processes' traffic on lo is untouched.

// needRoot skips t when the process cannot load BPF programs.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("kerneldrop: the kernel tests need root (or CAP_BPF and CAP_NET_ADMIN)")
	}
}

// openLo opens a List on lo with the fake clock c, skipping t with the
// kernel's error when it refuses to load or attach the program.
func openLo(t *testing.T, c *fakeClock, cfg Config) *List {
	t.Helper()
	needRoot(t)
	kdtest.Lock(t)
	cfg.Interfaces = []string{"lo"}
	cfg.Now = c.Now
	cfg.TickEvery = -1
	l, err := Open(cfg)
	var verr *ebpf.VerifierError
	if errors.As(err, &verr) {
		t.Fatalf("the verifier rejects the program: %+v", verr)
	}
	if err != nil {
		t.Skipf("the kernel refuses the program on lo: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// block puts network p into l's kernel list: refused every Pause for
// After.
func block(t *testing.T, l *List, c *fakeClock, p netip.Prefix) {
	t.Helper()
	for start := c.Now(); c.Now().Sub(start) <= l.cfg.After; c.Advance(l.cfg.Pause) {
		l.Refused(p)
	}
	for _, e := range l.Networks() {
		if e.Network == p {
			return
		}
	}
	t.Fatalf("%v not in the kernel after %v of refusals: %v", p, l.cfg.After, l.Networks())
}

// testNet returns a random 127.N.M.0/24, and its .1 address.
func testNet() (netip.Prefix, netip.Addr) {
	a := netip.AddrFrom4([4]byte{127, byte(1 + rand.IntN(250)), byte(rand.IntN(256)), 1})
	return netip.PrefixFrom(a, 24).Masked(), a
}

// udpServer listens on addr and counts datagrams by source address.
type udpServer struct {
	conn *net.UDPConn
	mu   sync.Mutex
	from map[netip.Addr]int
	done chan struct{}
}

func listenUDP(t *testing.T, network, addr string) *udpServer {
	t.Helper()
	pc, err := net.ListenPacket(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &udpServer{conn: pc.(*net.UDPConn), from: map[netip.Addr]int{}, done: make(chan struct{})}
	// A buffer for every burst the tests send, however slowly the reader
	// runs (the race detector, a busy machine): what is lost is the
	// program's doing only.
	if rc, err := s.conn.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
		})
	}
	go func() {
		defer close(s.done)
		buf := make([]byte, 1500)
		for {
			_, from, err := s.conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.from[from.Addr().Unmap()]++
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { s.conn.Close(); <-s.done })
	return s
}

func (s *udpServer) port() uint16 { return s.conn.LocalAddr().(*net.UDPAddr).AddrPort().Port() }

func (s *udpServer) got(a netip.Addr) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.from[a]
}

// send sends n datagrams from src to dst.
func send(t *testing.T, src netip.Addr, dst netip.AddrPort, n int) {
	t.Helper()
	c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), net.UDPAddrFromAddrPort(dst))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range n {
		if _, err := c.Write([]byte(fmt.Sprintf("query %d", i))); err != nil {
			t.Fatal(err)
		}
	}
}

// settle waits until s has counted want datagrams from a, or 2s; it
// returns what s counted.
func (s *udpServer) settle(a netip.Addr, want int) int {
	deadline := time.Now().Add(2 * time.Second)
	for s.got(a) < want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return s.got(a)
}

// waitDropped waits until l has dropped want packets, or 2s: a packet
// sent is through lo when the send returns, almost always.
func waitDropped(l *List, want uint64) uint64 {
	deadline := time.Now().Add(2 * time.Second)
	for l.Dropped() < want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return l.Dropped()
}

// loadProgram loads the program over new maps (the listeners, the blocked
// networks and the counters), closed with t, failing t if the verifier
// rejects it and skipping t if the kernel refuses the maps or the program.
func loadProgram(t *testing.T) (*ebpf.Program, [3]*ebpf.Map) {
	t.Helper()
	needRoot(t)
	ls, bs, cs := mapSpecs()
	var ms [3]*ebpf.Map
	for i, spec := range []*ebpf.MapSpec{ls, bs, cs} {
		m, err := ebpf.NewMap(spec)
		if err != nil {
			t.Skipf("the kernel refuses the map %s: %v", spec.Name, err)
		}
		t.Cleanup(func() { m.Close() })
		ms[i] = m
	}
	prog, err := ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{
		Name: "rrl_kerneldrop", Type: ebpf.XDP, License: "BSD", Instructions: program(ms[0].FD(), ms[1].FD(), ms[2].FD()),
	}, ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats})
	var verr *ebpf.VerifierError
	if errors.As(err, &verr) {
		t.Fatalf("the verifier rejects the program: %+v", verr)
	}
	if err != nil {
		t.Skipf("the kernel refuses to load an XDP program: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	return prog, ms
}

func TestVerifierAccepts(t *testing.T) {
	prog, _ := loadProgram(t)
	t.Logf("verifier: %s", strings.TrimSpace(prog.VerifierLog))
}

func TestDropIPv4(t *testing.T) {
	c := newFakeClock()
	l := openLo(t, c, Config{For: time.Minute})
	srv := listenUDP(t, "udp4", "127.0.0.1:0")
	other := listenUDP(t, "udp4", "127.0.0.1:0") // not a listener
	dst := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), srv.port())
	if err := l.AddListener(dst); err != nil {
		t.Fatal(err)
	}
	bad, badSrc := testNet()
	goodSrc := netip.AddrFrom4([4]byte{badSrc.As4()[0], badSrc.As4()[1], badSrc.As4()[2] + 1, 1})

	send(t, badSrc, dst, 1)
	if got := srv.settle(badSrc, 1); got != 1 {
		t.Fatalf("before the block: the server got %d of 1 from %v", got, badSrc)
	}
	block(t, l, c, bad)

	const n = 200
	send(t, badSrc, dst, n)
	send(t, goodSrc, dst, n)
	if got := srv.settle(goodSrc, n); got != n {
		t.Errorf("%v, not listed: the server got %d of %d", goodSrc, got, n)
	}
	waitDropped(l, n)
	if got := srv.got(badSrc); got != 1 {
		t.Errorf("%v, listed: the server got %d after the block, want 0", badSrc, got-1)
	}
	v4, v6 := l.DroppedByFamily()
	if v4 != n || v6 != 0 {
		t.Errorf("Dropped: IPv4 %d, IPv6 %d; want %d, 0", v4, v6, n)
	}
	t.Logf("listed %v: %d sent, %d received, %d dropped in the kernel; %v: %d of %d received",
		bad, n, srv.got(badSrc)-1, l.Dropped(), goodSrc, srv.got(goodSrc), n)

	// UDP to another port passes.
	send(t, badSrc, netip.AddrPortFrom(dst.Addr(), other.port()), 10)
	if got := other.settle(badSrc, 10); got != 10 {
		t.Errorf("to another port: %d of 10 received", got)
	}

	// TCP from the listed network connects.
	tl, err := net.Listen("tcp4", dst.String())
	if err != nil {
		tl, err = net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
	}
	defer tl.Close()
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(badSrc, 0)), Timeout: 2 * time.Second}
	tc, err := d.Dial("tcp4", tl.Addr().String())
	if err != nil {
		t.Errorf("TCP from the listed network: %v", err)
	} else {
		tc.Close()
	}

	// Close detaches: the listed network reaches the server again.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if a := attached(); len(a) != 0 {
		t.Errorf("after Close, still attached: %v", a)
	}
	send(t, badSrc, dst, 10)
	if got := srv.settle(badSrc, 11); got != 11 {
		t.Errorf("after Close: %d of 10 received", got-1)
	}
}

func TestDropIPv6(t *testing.T) {
	c := newFakeClock()
	l := openLo(t, c, Config{For: time.Minute})
	srv := listenUDP(t, "udp6", "[::1]:0")
	dst := netip.AddrPortFrom(netip.IPv6Loopback(), srv.port())
	if err := l.AddListener(dst); err != nil {
		t.Skipf("IPv6 on lo: %v", err)
	}
	src := netip.IPv6Loopback()
	send(t, src, dst, 1)
	if got := srv.settle(src, 1); got != 1 {
		t.Fatalf("before the block: %d of 1 received", got)
	}
	block(t, l, c, netip.PrefixFrom(src, 128))
	const n = 100
	send(t, src, dst, n)
	waitDropped(l, n)
	if got := srv.got(src); got != 1 {
		t.Errorf("::1, listed: %d received after the block, want 0", got-1)
	}
	v4, v6 := l.DroppedByFamily()
	if v4 != 0 || v6 != n {
		t.Errorf("Dropped: IPv4 %d, IPv6 %d; want 0, %d", v4, v6, n)
	}
	t.Logf("listed ::1/128: %d sent, %d received, %d dropped in the kernel", n, srv.got(src)-1, v6)
}

// TestWildcardListener: a server on [::] (dual stack) is a listener of
// any address on its port, IPv4 too; 0.0.0.0 of IPv4 only.
func TestWildcardListener(t *testing.T) {
	c := newFakeClock()
	l := openLo(t, c, Config{For: time.Minute})
	srv := listenUDP(t, "udp", "[::]:0")
	if err := l.AddListener(netip.AddrPortFrom(netip.IPv6Unspecified(), srv.port())); err != nil {
		t.Fatal(err)
	}
	bad, badSrc := testNet()
	block(t, l, c, bad)
	goodSrc := netip.AddrFrom4([4]byte{badSrc.As4()[0], badSrc.As4()[1], badSrc.As4()[2] + 1, 1})
	for _, to := range []string{"127.0.0.1", "127.0.0.2"} {
		dst := netip.AddrPortFrom(netip.MustParseAddr(to), srv.port())
		send(t, badSrc, dst, 20)
		send(t, goodSrc, dst, 20)
	}
	if got := srv.settle(goodSrc, 40); got != 40 {
		t.Errorf("not listed: %d of 40 received", got)
	}
	if d := waitDropped(l, 40); d != 40 {
		t.Errorf("Dropped %d, want 40", d)
	}
	if got := srv.got(badSrc); got != 0 {
		t.Errorf("listed: %d of 40 received, want 0", got)
	}

	// Taken away, the listener no longer drops.
	l.RemoveListener(netip.AddrPortFrom(netip.IPv6Unspecified(), srv.port()))
	send(t, badSrc, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), srv.port()), 5)
	if got := srv.settle(badSrc, 5); got != 5 {
		t.Errorf("listener removed: %d of 5 received", got)
	}
}

// TestExpiry: the kernel stops dropping at the deadline, and Tick takes an
// entry out when For is over on the List's clock.
func TestExpiry(t *testing.T) {
	c := newFakeClock()
	const forKernel = 1500 * time.Millisecond
	l := openLo(t, c, Config{For: forKernel})
	srv := listenUDP(t, "udp4", "127.0.0.1:0")
	dst := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), srv.port())
	if err := l.AddListener(dst); err != nil {
		t.Fatal(err)
	}
	bad, badSrc := testNet()
	block(t, l, c, bad)
	start := time.Now()
	send(t, badSrc, dst, 1)
	// Until the kernel's deadline, a datagram every 50ms is dropped; then
	// they pass (the entry still in the map: user space's clock stands).
	for i := 0; srv.got(badSrc) == 0; i++ {
		if i == 200 {
			t.Fatalf("still dropped %v after the deadline", time.Since(start))
		}
		time.Sleep(50 * time.Millisecond)
		send(t, badSrc, dst, 1)
	}
	passed := time.Since(start)
	if passed < forKernel-200*time.Millisecond {
		t.Errorf("passed again after %v, before the deadline (%v)", passed, forKernel)
	}
	t.Logf("passed again after %v (For %v); %d dropped before", passed.Round(time.Millisecond), forKernel, l.Dropped())
	if len(l.Networks()) != 1 {
		t.Errorf("user space's clock stands, yet Networks is %v", l.Networks())
	}

	// Taken out by Tick long before the kernel's deadline.
	l2 := openLo(t, c, Config{For: time.Hour})
	srv2 := listenUDP(t, "udp4", "127.0.0.1:0")
	dst2 := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), srv2.port())
	if err := l2.AddListener(dst2); err != nil {
		t.Fatal(err)
	}
	block(t, l2, c, bad)
	send(t, badSrc, dst2, 10)
	time.Sleep(100 * time.Millisecond)
	if got := srv2.got(badSrc); got != 0 {
		t.Fatalf("listed: %d of 10 received", got)
	}
	c.Advance(time.Hour)
	l2.Tick()
	if n := l2.Networks(); len(n) != 0 {
		t.Errorf("after For and Tick: %v", n)
	}
	send(t, badSrc, dst2, 10)
	if got := srv2.settle(badSrc, 10); got != 10 {
		t.Errorf("taken out: %d of 10 received", got)
	}
}

// TestShared: Lists on one interface share one attachment; the latest to
// add a listener owns it; closing the older one (a reload) keeps the
// program attached and the newer one's networks dropped; the last Close
// detaches.
func TestShared(t *testing.T) {
	c := newFakeClock()
	var lines []string
	var mu sync.Mutex
	logf := func(f string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(f, args...))
		mu.Unlock()
	}
	old := openLo(t, c, Config{For: time.Minute, Logf: logf})
	srv := listenUDP(t, "udp4", "127.0.0.1:0")
	dst := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), srv.port())
	if err := old.AddListener(dst); err != nil {
		t.Fatal(err)
	}
	bad, badSrc := testNet()
	block(t, old, c, bad)
	a := attached()
	if len(a) != 1 {
		t.Fatalf("attached: %v", a)
	}
	var first attachment
	for _, at := range a {
		first = at
	}
	if first.refs != 1 {
		t.Errorf("refs %d, want 1", first.refs)
	}

	next := openLo(t, c, Config{For: time.Minute, Logf: logf})
	for _, at := range attached() {
		if at.link != first.link || at.refs != 2 {
			t.Errorf("the second List: link %v refs %d, want the first's link, 2", at.link, at.refs)
		}
	}
	if err := next.AddListener(dst); err != nil {
		t.Fatal(err)
	}
	// The listener is the new List's now, whose list is empty.
	send(t, badSrc, dst, 5)
	if got := srv.settle(badSrc, 5); got != 5 {
		t.Errorf("the new List owns the listener, nothing listed: %d of 5 received", got)
	}
	block(t, next, c, bad)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	if len(attached()) != 1 {
		t.Fatalf("after the old List's Close: attached %v", attached())
	}
	send(t, badSrc, dst, 20)
	d := waitDropped(next, 20)
	if got := srv.got(badSrc); got != 5 {
		t.Errorf("after the handover: %d of 20 received, want 0", got-5)
	}
	if d != 20 {
		t.Errorf("the new List dropped %d, want 20", d)
	}
	next.Close()
	if len(attached()) != 0 {
		t.Errorf("after the last Close: attached %v", attached())
	}
	mu.Lock()
	defer mu.Unlock()
	joined := strings.Join(lines, "\n")
	for _, want := range []string{"attached to lo (generic mode)", bad.String() + " dropped in the kernel for 1m0s", bad.String() + " out of the kernel"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the log lacks %q:\n%s", want, joined)
		}
	}
}

// TestUnprivileged: without privilege, Open says what it needs. (It runs
// only when the tests do not run as root.)
func TestUnprivileged(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("runs without root only")
	}
	l, err := Open(Config{Interfaces: []string{"lo"}})
	if err == nil {
		l.Close()
		t.Skip("this process may load XDP programs without root")
	}
	if !strings.Contains(err.Error(), "needs root, or CAP_BPF and CAP_NET_ADMIN") {
		t.Errorf("Open without privilege: %v", err)
	}
	t.Log(err)
}
