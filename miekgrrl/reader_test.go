package miekgrrl

import (
	"encoding/hex"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/miekg/dns"
)

// packetSource is a dns.PacketConnReader that hands out queued packets, each
// from its source, then fails as a read past its deadline does.
type packetSource struct {
	pkts  [][]byte
	from  []net.Addr
	reads int
}

func (p *packetSource) add(m []byte, from string) {
	p.pkts = append(p.pkts, m)
	p.from = append(p.from, &net.UDPAddr{IP: net.ParseIP(from), Port: 5353})
}

func (p *packetSource) ReadPacketConn(net.PacketConn, time.Duration) ([]byte, net.Addr, error) {
	p.reads++
	if len(p.pkts) == 0 {
		return nil, nil, os.ErrDeadlineExceeded
	}
	m, from := p.pkts[0], p.from[0]
	p.pkts, p.from = p.pkts[1:], p.from[1:]
	return m, from, nil
}
func (p *packetSource) ReadTCP(net.Conn, time.Duration) ([]byte, error) {
	return nil, errors.New("no TCP")
}
func (p *packetSource) ReadUDP(*net.UDPConn, time.Duration) ([]byte, *dns.SessionUDP, error) {
	return nil, nil, errors.New("no UDP")
}

// onlyReader hides the ReadPacketConn of the Reader it holds.
type onlyReader struct{ dns.Reader }

func pack(t testing.TB, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readAll reads through r until the source is exhausted and returns the
// sources of the packets let through.
func readAll(t *testing.T, r dns.Reader) []string {
	t.Helper()
	pr, ok := r.(dns.PacketConnReader)
	if !ok {
		t.Fatal("the decorated reader does not read PacketConns")
	}
	var got []string
	for range 10000 {
		m, from, err := pr.ReadPacketConn(nil, time.Second)
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("read: %v", err)
			}
			return got
		}
		if len(m) == 0 {
			t.Fatal("empty packet let through")
		}
		got = append(got, from.(*net.UDPAddr).IP.String())
	}
	t.Fatal("the reader never ran dry")
	return nil
}

// A packet over its request limit is discarded and the next one read in the
// same call; the read that fails (a deadline) returns to the server.
func TestReaderSkipsRefused(t *testing.T) {
	clock := newTestClock()
	lim := newLimiter(t, clock, "requests-per-second", "10")
	var seen decisions
	src := &packetSource{}
	q := pack(t, query("www.example.org."))
	for range 15 {
		src.add(q, "192.0.2.1")
	}
	src.add(q, "198.51.100.7")
	r := DecorateReader(lim, Options{OnDecision: seen.record})(src)

	got := readAll(t, r)
	if len(got) != 11 || got[10] != "198.51.100.7" {
		t.Fatalf("let through %d packets %v, want 10 from 192.0.2.1 then 198.51.100.7", len(got), got)
	}
	if src.reads != 17 {
		t.Errorf("%d reads from the server's reader, want 17 (16 packets and the deadline)", src.reads)
	}
	if len(seen.list) != 5 {
		t.Fatalf("%d decisions, want 5 refusals", len(seen.list))
	}
	for _, d := range seen.list {
		if !d.AtRead || !d.RequestDropped || d.Action != rrl.Drop || d.IPReason != rrl.IPRateLimit ||
			d.RTReason != rrl.RTNotReached || !d.Limited || !d.UDP || d.Request != nil || d.Response != nil ||
			d.Client != netip.MustParseAddr("192.0.2.1") || d.Cookie != CookieNone {
			t.Errorf("decision %+v", d)
		}
	}
	st := lim.GetStats(false)
	if st.Actions[rrl.Drop] != 5 || st.IPReasons[rrl.IPRateLimit] != 5 {
		t.Errorf("stats %v, want 5 requests dropped", st)
	}
}

// A request with a valid server cookie is recognised in its packet: it is
// held to proven-requests-per-second, not refused by requests-per-second
// once its network's account is spent; a bad cookie is not.
func TestReaderCookie(t *testing.T) {
	clock := newTestClock()
	lim := newLimiter(t, clock, "requests-per-second", "10", "proven-requests-per-second", "3")
	cookies := NewCookies([16]byte{7})
	var seen decisions
	src := &packetSource{}
	cc := "0102030405060708"
	valid := func(client string) string {
		sc := cookies.ServerCookie([]byte{1, 2, 3, 4, 5, 6, 7, 8}, netip.MustParseAddr(client), clock.now())
		return cc + hex.EncodeToString(sc[:])
	}
	plain := pack(t, query("www.example.org."))
	for range 10 {
		src.add(plain, "192.0.2.1") // spends the network's requests-per-second
	}
	src.add(plain, "192.0.2.1")                                                         // refused
	src.add(pack(t, cookieQuery("www.example.org.", cc)), "192.0.2.2")                  // client cookie only: refused
	src.add(pack(t, cookieQuery("www.example.org.", valid("192.0.2.99"))), "192.0.2.3") // another client's: refused
	for _, from := range []string{"192.0.2.2", "::ffff:192.0.2.4", "192.0.2.5", "192.0.2.6"} {
		// valid for the source; the fourth is over proven-requests-per-second
		c := valid(netip.MustParseAddr(from).Unmap().String())
		src.add(pack(t, cookieQuery("www.example.org.", c)), from)
	}
	// A server cookie not of this server's length, and two COOKIE options.
	src.add(pack(t, cookieQuery("www.example.org.", cc+"0102030405060708")), "192.0.2.7")
	two := cookieQuery("www.example.org.", valid("192.0.2.8"))
	two.IsEdns0().Option = append(two.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: valid("192.0.2.8")})
	src.add(pack(t, two), "192.0.2.8")

	r := DecorateReader(lim, Options{Cookies: cookies, OnDecision: seen.record, Now: clock.now})(src)
	got := readAll(t, r)
	want := []string{"192.0.2.2", "192.0.2.4", "192.0.2.5"} // a mapped address prints as IPv4
	if len(got) != 13 || got[10] != want[0] || got[11] != want[1] || got[12] != want[2] {
		t.Fatalf("let through %v, want 10 plain requests then %v", got, want)
	}
	wantStates := []CookieState{CookieNone, CookieClientOnly, CookieBad, CookieValid, CookieBad, CookieBad}
	if len(seen.list) != len(wantStates) {
		t.Fatalf("%d refusals, want %d", len(seen.list), len(wantStates))
	}
	for i, d := range seen.list {
		if d.Cookie != wantStates[i] || !d.AtRead {
			t.Errorf("refusal %d from %v: cookie %v, want %v", i, d.Client, d.Cookie, wantStates[i])
		}
	}
}

// Without Options.Cookies a valid server cookie proves nothing, as for
// Middleware.
func TestReaderCookieWithoutCookies(t *testing.T) {
	clock := newTestClock()
	lim := newLimiter(t, clock, "requests-per-second", "1", "proven-requests-per-second", "100")
	cookies := NewCookies([16]byte{7})
	sc := cookies.ServerCookie([]byte{1, 2, 3, 4, 5, 6, 7, 8}, netip.MustParseAddr("192.0.2.1"), clock.now())
	q := pack(t, cookieQuery("x.", "0102030405060708"+hex.EncodeToString(sc[:])))
	src := &packetSource{}
	src.add(q, "192.0.2.1")
	src.add(q, "192.0.2.1")
	if got := readAll(t, DecorateReader(lim, Options{Now: clock.now})(src)); len(got) != 1 {
		t.Fatalf("let through %d, want 1", len(got))
	}
}

// A packet too short for a header goes to the server uncharged, even from a
// network in debt; malformed packets are charged, as unproven, without
// panicking.
func TestReaderShortAndMalformed(t *testing.T) {
	clock := newTestClock()
	lim := newLimiter(t, clock, "requests-per-second", "1", "proven-requests-per-second", "100")
	cookies := NewCookies([16]byte{7})
	var seen decisions
	src := &packetSource{}
	q := pack(t, query("www.example.org."))
	src.add(q, "192.0.2.1") // spends the account
	for n := range headerLen {
		src.add(q[:n], "192.0.2.1")
	}
	bad := [][]byte{
		q[:headerLen+3], // a question cut short
		append(append([]byte{}, q[:headerLen]...), 0xC0),             // a cut pointer
		append(append([]byte{}, q[:headerLen]...), 0x40, 0, 0, 0, 0), // an extended label
		{0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, // counts and nothing else
	}
	for _, b := range bad {
		src.add(b, "192.0.2.1")
	}
	r := DecorateReader(lim, Options{Cookies: cookies, OnDecision: seen.record, Now: clock.now})(src)
	pr := r.(dns.PacketConnReader)
	for n := 0; n <= headerLen; n++ {
		m, _, err := pr.ReadPacketConn(nil, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		want := n
		if n == 0 {
			want = len(q)
		} else {
			want = n - 1
		}
		if len(m) != want {
			t.Fatalf("read %d: %d bytes, want %d", n, len(m), want)
		}
	}
	if got := readAll(t, r); len(got) != 0 {
		t.Fatalf("malformed packets from a network in debt let through: %v", got)
	}
	if len(seen.list) != len(bad) {
		t.Fatalf("%d refusals, want %d", len(seen.list), len(bad))
	}
}

// Odd input: a nil limiter and report-only mode leave the reader as it
// is, a nil reader gives one that fails, a Reader without ReadPacketConn
// stays without, and a source without an address is charged in 0.0.0.0.
func TestReaderOddInput(t *testing.T) {
	src := &packetSource{}
	if r := DecorateReader(nil, Options{})(src); r != dns.Reader(src) {
		t.Errorf("nil limiter: %T, want the reader itself", r)
	}
	lim := newLimiter(t, newTestClock(), "requests-per-second", "1")
	if r := DecorateReader(lim, Options{ReportOnly: true})(src); r != dns.Reader(src) {
		t.Errorf("report-only: %T, want the reader itself", r)
	}
	for _, l := range []*rrl.RRL{nil, lim} {
		r := DecorateReader(l, Options{})(nil)
		if r == nil {
			t.Fatal("nil Reader returned")
		}
		if _, err := r.ReadTCP(nil, time.Second); !errors.Is(err, errNoReader) {
			t.Errorf("ReadTCP through a nil reader: %v", err)
		}
		if _, _, err := r.ReadUDP(nil, time.Second); !errors.Is(err, errNoReader) {
			t.Errorf("ReadUDP through a nil reader: %v", err)
		}
		if _, _, err := r.(dns.PacketConnReader).ReadPacketConn(nil, time.Second); !errors.Is(err, errNoReader) {
			t.Errorf("ReadPacketConn through a nil reader: %v", err)
		}
	}
	if _, ok := DecorateReader(lim, Options{})(onlyReader{src}).(dns.PacketConnReader); ok {
		t.Error("a Reader without ReadPacketConn got one")
	}

	var seen decisions
	q := pack(t, query("x."))
	src = &packetSource{pkts: [][]byte{q, q, q}, from: []net.Addr{nil, (*net.UDPAddr)(nil), &net.UDPAddr{}}}
	if got := DecorateReader(lim, Options{OnDecision: seen.record})(src).(dns.PacketConnReader); got != nil {
		n := 0
		for {
			if _, _, err := got.ReadPacketConn(nil, time.Second); err != nil {
				break
			}
			n++
		}
		if n != 1 || len(seen.list) != 2 {
			t.Fatalf("sources without an address: %d let through and %d refused, want 1 and 2 (one account)", n, len(seen.list))
		}
		for _, d := range seen.list {
			if d.Client.IsValid() || !d.UDP {
				t.Errorf("decision %+v, want the zero address over UDP", d)
			}
		}
	}
}

// floodServer is a UDP and TCP server on loopback whose reader is
// decorated, with a MsgAcceptFunc and a handler that count their calls.
type floodServer struct {
	udp, tcp string
	accepts  atomic.Int64 // MsgAcceptFunc calls
	refused  atomic.Int64 // refusals reported (at read or by the Middleware)
	done     atomic.Int64 // requests refused or served
	mu       sync.Mutex
	served   map[string]int // handler calls by source address
	notify   chan struct{}
}

func (s *floodServer) poke() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *floodServer) servedFrom(ip string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served[ip]
}

// wait waits until the server has done with n requests: refused them or
// served them.
func (s *floodServer) wait(t testing.TB, n int64) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for s.done.Load() < n {
		select {
		case <-s.notify:
		case <-timeout:
			t.Fatalf("the server has done with %d requests of %d", s.done.Load(), n)
		}
	}
}

// startFloodServer serves answerHandler behind lim: with decorate, through
// DecorateReader and Middleware with ChargedAtRead, else through the
// Middleware alone.
func startFloodServer(t testing.TB, lim *rrl.RRL, opts Options, decorate bool) *floodServer {
	s := &floodServer{served: map[string]int{}, notify: make(chan struct{}, 1)}
	hook := opts.OnDecision
	opts.OnDecision = func(d Decision) {
		if d.RequestDropped {
			s.refused.Add(1)
			s.done.Add(1)
			s.poke()
		}
		if hook != nil {
			hook(d)
		}
	}
	counting := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		ip, _ := clientAddr(w.RemoteAddr())
		s.mu.Lock()
		s.served[ip.String()]++
		s.mu.Unlock()
		answerHandler(w, r)
		s.done.Add(1)
		s.poke()
	})
	accept := func(dh dns.Header) dns.MsgAcceptAction {
		s.accepts.Add(1)
		return AcceptCookieOnly(dh)
	}
	var dec dns.DecorateReader
	if decorate {
		dec = DecorateReader(lim, opts)
		opts.ChargedAtRead = true
	}
	h := Middleware(lim, counting, opts)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no 127.0.0.1: %v", err)
	}
	// Room for a burst of packets, so that the kernel drops none.
	pc.(*net.UDPConn).SetReadBuffer(1 << 20)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no 127.0.0.1: %v", err)
	}
	activate(t, &dns.Server{PacketConn: pc, Handler: h, MsgAcceptFunc: accept, DecorateReader: dec})
	activate(t, &dns.Server{Listener: ln, Handler: h, MsgAcceptFunc: accept, DecorateReader: dec})
	s.udp, s.tcp = pc.LocalAddr().String(), ln.Addr().String()
	return s
}

// flood sends n queries from source to the server without reading the
// answers, in batches it waits for the server to read, so that the kernel
// drops none. before is how many requests the server has done with so far.
func (s *floodServer) flood(t *testing.T, source string, n int, before int64) {
	t.Helper()
	conn, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(source)}, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(s.udp)))
	if err != nil {
		t.Skipf("cannot send from %s: %v", source, err)
	}
	defer conn.Close()
	q := query("flood.example.org.")
	const batch = 50
	for sent := 0; sent < n; {
		for i := 0; i < batch && sent < n; i++ {
			q.Id = uint16(sent)
			if _, err := conn.Write(pack(t, q)); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		s.wait(t, before+int64(sent))
	}
}

// The flood of the README: 5,000 requests from one /24 at
// requests-per-second 10 never reach MsgAcceptFunc nor the handler, apart
// from the 10 admitted (the clock does not move), and a client in another
// /24 is answered every time, in the middle of the flood and after it.
func TestReaderFloodNeverAccepted(t *testing.T) {
	clock := newTestClock()
	lim := newLimiter(t, clock, "requests-per-second", "10")
	s := startFloodServer(t, lim, Options{}, true)
	legit := clientFrom("udp", "127.0.2.1", 10*time.Second)
	var read int64
	for round := range 5 {
		s.flood(t, "127.0.1.1", 1000, read)
		read += 1000
		r, _, err := legit.Exchange(query("www.example.org."), s.udp)
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("round %d: the client under its limit got %v, %v", round, r, err)
		}
		read++
		s.wait(t, read)
	}
	if got := s.accepts.Load(); got != 10+5 {
		t.Errorf("MsgAcceptFunc called %d times, want 15 (10 of the flood, 5 of the client)", got)
	}
	if got := s.servedFrom("127.0.1.1"); got != 10 {
		t.Errorf("the handler served the flood %d times, want 10", got)
	}
	if got := s.servedFrom("127.0.2.1"); got != 5 {
		t.Errorf("the handler served the client %d times, want 5", got)
	}
	if got := s.refused.Load(); got != 4990 {
		t.Errorf("%d refusals reported, want 4990", got)
	}
	if st := lim.GetStats(false); st.Actions[rrl.Drop] != 4990 {
		t.Errorf("stats %v, want 4990 drops", st)
	}
}

// With Middleware too, each request is charged once: requests-per-second
// 10 admits 10, not 5; without ChargedAtRead it would charge each twice.
// The Middleware alone, without the reader, admits 10 as well, after
// MsgAcceptFunc.
func TestReaderWithMiddlewareChargedOnce(t *testing.T) {
	for _, decorate := range []bool{true, false} {
		clock := newTestClock()
		lim := newLimiter(t, clock, "requests-per-second", "10")
		s := startFloodServer(t, lim, Options{}, decorate)
		s.flood(t, "127.0.3.1", 30, 0)
		if got := s.servedFrom("127.0.3.1"); got != 10 {
			t.Errorf("decorated %v: served %d of 30, want 10", decorate, got)
		}
		want := int64(10)
		if !decorate {
			want = 30
		}
		if got := s.accepts.Load(); got != want {
			t.Errorf("decorated %v: MsgAcceptFunc called %d times, want %d", decorate, got, want)
		}
		if st := lim.GetStats(false); st.Actions[rrl.Drop] != 20 {
			t.Errorf("decorated %v: stats %v, want 20 drops", decorate, st)
		}
	}
}

// Over TCP the reader charges the request as proven and closes the
// connection of one it refuses, without an answer; a request with a valid
// server cookie over UDP is answered from a network whose unproven account
// is spent.
func TestReaderTCPAndCookieOnLoopback(t *testing.T) {
	clock := newTestClock()
	lim := newLimiter(t, clock, "requests-per-second", "2", "proven-requests-per-second", "3")
	cookies := NewCookies([16]byte{9})
	s := startFloodServer(t, lim, Options{Cookies: cookies, Now: clock.now}, true)

	c := clientFrom("tcp", "127.0.4.1", 10*time.Second)
	conn, err := c.Dial(s.tcp)
	if err != nil {
		t.Skipf("cannot connect from 127.0.4.1: %v", err)
	}
	defer conn.Close()
	for i := range 3 {
		r, _, err := c.ExchangeWithConn(query("www.example.org."), conn)
		if err != nil || len(r.Answer) != 1 {
			t.Fatalf("TCP query %d: %v, %v", i, r, err)
		}
	}
	if _, _, err := c.ExchangeWithConn(query("www.example.org."), conn); err == nil {
		t.Fatal("TCP query over proven-requests-per-second answered")
	}
	if got := s.servedFrom("127.0.4.1"); got != 3 {
		t.Errorf("served %d TCP queries, want 3", got)
	}

	s.flood(t, "127.0.5.1", 10, s.done.Load()) // spends 127.0.5.0/24's requests-per-second
	u := clientFrom("udp", "127.0.5.2", 10*time.Second)
	sc := cookies.ServerCookie([]byte{1, 2, 3, 4, 5, 6, 7, 8}, netip.MustParseAddr("127.0.5.2"), clock.now())
	r, _, err := u.Exchange(cookieQuery("www.example.org.", "0102030405060708"+hex.EncodeToString(sc[:])), s.udp)
	if err != nil || len(r.Answer) != 1 {
		t.Fatalf("a request with a valid server cookie from a network in debt got %v, %v", r, err)
	}
	if got := s.servedFrom("127.0.5.1"); got != 2 {
		t.Errorf("served the flood %d times, want 2", got)
	}
}

// packetCookie finds what package dns finds once it has unpacked the
// message.
func TestPacketCookie(t *testing.T) {
	for _, m := range cookieSamples(t) {
		checkPacketCookie(t, pack(t, m))
	}
}

// cookieSamples are requests with and without COOKIE options, names
// compressed or not, and records in every section.
func cookieSamples(t testing.TB) []*dns.Msg {
	var out []*dns.Msg
	add := func(m *dns.Msg, compress bool) { m.Compress = compress; out = append(out, m) }
	for _, compress := range []bool{false, true} {
		add(query("www.example.org."), compress)
		add(cookieQuery("www.example.org.", ""), compress)
		add(cookieQuery("www.example.org.", "0102030405060708"), compress)
		add(cookieQuery("www.example.org.", "0102030405060708"+"01000000"+"65a0bc00"+"1122334455667788"), compress)
		m := cookieQuery("www.example.org.", "0102030405060708")
		m.IsEdns0().Option = append([]dns.EDNS0{&dns.EDNS0_NSID{Code: dns.EDNS0NSID}}, m.IsEdns0().Option...)
		m.Answer = rrs(t, "www.example.org. 300 IN A 192.0.2.1")
		m.Ns = rrs(t, "example.org. 300 IN NS ns1.example.org.")
		m.Extra = append(rrs(t, "ns1.example.org. 300 IN A 192.0.2.53"), m.Extra...)
		add(m, compress)
		two := cookieQuery("example.org.", "0102030405060708")
		two.IsEdns0().Option = append(two.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "1112131415161718"})
		add(two, compress)
		signed := cookieQuery("www.example.org.", "0102030405060708")
		signed.SetTsig("key.", dns.HmacSHA256, 300, time.Unix(1700000000, 0).Unix())
		add(signed, compress)
	}
	return out
}

// checkPacketCookie checks packetCookie against package dns on b: when b
// unpacks, the same options; when it does not, at most an answer that
// does not panic.
func checkPacketCookie(t *testing.T, b []byte) {
	t.Helper()
	cookie, n := packetCookie(b)
	m := new(dns.Msg)
	if m.Unpack(b) != nil {
		return
	}
	o, wantN := cookieOptions(m)
	if n != wantN {
		t.Fatalf("%d COOKIE options, package dns finds %d in %x", n, wantN, b)
	}
	if n > 0 && hex.EncodeToString(cookie) != o.Cookie {
		t.Fatalf("cookie %x, package dns finds %s in %x", cookie, o.Cookie, b)
	}
}

// FuzzPacketCookie checks packetCookie against package dns on arbitrary
// packets, starting from real requests.
func FuzzPacketCookie(f *testing.F) {
	for _, m := range cookieSamples(f) {
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, b := range fuzzSeeds(f) {
		f.Add(b)
	}
	cookies := NewCookies([16]byte{3})
	client := netip.MustParseAddr("192.0.2.1")
	now := func() time.Time { return time.Unix(1700000000, 0) }
	f.Fuzz(func(t *testing.T, b []byte) {
		checkPacketCookie(t, b)
		st := cookies.packetState(b, client, now)
		m := new(dns.Msg)
		if m.Unpack(b) == nil {
			if want := cookies.Check(m, client, now()); st != want {
				t.Fatalf("state %v, Check says %v for %x", st, want, b)
			}
		}
	})
}

// With ChargedAtRead the Middleware charges no request, and lets every one
// through, reporting a proven response's IPReason as IPNotReached; in
// report-only mode it charges and reports as without it.
func TestMiddlewareChargedAtRead(t *testing.T) {
	clock := newTestClock()
	lim := newLimiter(t, clock, "requests-per-second", "1")
	cookies := NewCookies([16]byte{5})
	var ds decisions
	h := Middleware(lim, answerHandler, Options{ChargedAtRead: true, Cookies: cookies, Now: clock.now, OnDecision: ds.record})
	for i := range 3 {
		w := udpFrom("192.0.2.1")
		h.ServeDNS(w, query("www.example.org."))
		if w.wrote() != 1 || ds.last().RequestDropped || ds.last().IPReason != rrl.IPOk {
			t.Fatalf("request %d: wrote %d, decision %+v", i, w.wrote(), ds.last())
		}
	}
	sc := cookies.ServerCookie([]byte{1, 2, 3, 4, 5, 6, 7, 8}, netip.MustParseAddr("192.0.2.1"), clock.now())
	w := udpFrom("192.0.2.1")
	h.ServeDNS(w, cookieQuery("www.example.org.", "0102030405060708"+hex.EncodeToString(sc[:])))
	if d := ds.last(); w.wrote() != 1 || d.Limited || d.Cookie != CookieValid || d.IPReason != rrl.IPNotReached {
		t.Fatalf("proven request: wrote %d, decision %+v", w.wrote(), d)
	}
	if st := lim.GetStats(false); st.Actions[rrl.Drop] != 0 {
		t.Errorf("stats %v: a request charged", st)
	}

	ds.list = nil
	h = Middleware(lim, answerHandler, Options{ChargedAtRead: true, ReportOnly: true, OnDecision: ds.record})
	h.ServeDNS(udpFrom("192.0.2.1"), query("www.example.org.")) // spends the account
	h.ServeDNS(udpFrom("192.0.2.1"), query("www.example.org.")) // reported refused
	if len(ds.list) != 2 || ds.list[0].RequestDropped || !ds.list[1].RequestDropped || ds.list[1].AtRead {
		t.Fatalf("report-only: decisions %+v, want the second request reported refused by the Middleware", ds.list)
	}
}
