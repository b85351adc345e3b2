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

func TestVerifierAccepts(t *testing.T) {
	needRoot(t)
	ls, bs, cs := mapSpecs()
	var fds []int
	for _, spec := range []*ebpf.MapSpec{ls, bs, cs} {
		m, err := ebpf.NewMap(spec)
		if err != nil {
			t.Skipf("the kernel refuses the map %s: %v", spec.Name, err)
		}
		defer m.Close()
		fds = append(fds, m.FD())
	}
	insns := program(fds[0], fds[1], fds[2])
	prog, err := ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{
		Name: "rrl_kerneldrop", Type: ebpf.XDP, License: "BSD", Instructions: insns,
	}, ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats})
	var verr *ebpf.VerifierError
	if errors.As(err, &verr) {
		t.Fatalf("the verifier rejects the program: %+v", verr)
	}
	if err != nil {
		t.Skipf("the kernel refuses to load an XDP program: %v", err)
	}
	defer prog.Close()
	t.Logf("%d instructions; verifier: %s", len(insns), strings.TrimSpace(prog.VerifierLog))
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
