package miekgrrl

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/miekg/dns"
)

// countingHandler answers like answerHandler and counts its calls per
// client network (the /24 or /56 of the source, the core's defaults).
type countingHandler struct {
	mu    sync.Mutex
	calls map[netip.Prefix]int
}

func newCountingHandler() *countingHandler {
	return &countingHandler{calls: map[netip.Prefix]int{}}
}

func (c *countingHandler) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	c.mu.Lock()
	c.calls[networkOf(w.RemoteAddr().String())]++
	c.mu.Unlock()
	answerHandler.ServeDNS(w, r)
}

// of returns how many calls came from the network of addr.
func (c *countingHandler) of(addr string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[networkOf(addr)]
}

// networkOf returns the client network of addr, an address with or
// without a port.
func networkOf(addr string) netip.Prefix {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		a = netip.MustParseAddrPort(addr).Addr()
	}
	bits := 24
	if a.Unmap().Is6() {
		bits = 56
	}
	return netip.PrefixFrom(a.Unmap(), bits).Masked()
}

// floodPlan is a flood at ten times a rate: the limiter's clock moves one
// tenth of a rate's interval per query, for the given seconds.
type floodPlan struct {
	rate    int // the allowance, requests per second
	seconds int
}

func (p floodPlan) queries() int        { return 10 * p.rate * p.seconds }
func (p floodPlan) step() time.Duration { return time.Second / time.Duration(10*p.rate) }

// ceiling is the most a flood may get through: the allowance over its
// duration, plus one second of burst.
func (p floodPlan) ceiling() int { return p.rate*p.seconds + p.rate }

// A flood ten times over requests-per-second from one network reaches the
// handler at most the allowance plus a second of burst; nothing is sent to
// the requests refused; another network asking within its allowance at
// the same time is served in full.
func TestMiddlewareRequestLimitFlood(t *testing.T) {
	plan := floodPlan{rate: 5, seconds: 4}
	clock := newTestClock()
	lim := newLimiter(t, clock, "requests-per-second", fmt.Sprint(plan.rate))
	count := newCountingHandler()
	var ds decisions
	h := Middleware(lim, count, Options{OnDecision: ds.record})

	otherAsked, otherSent := 0, 0
	for i := range plan.queries() {
		w := udpFrom(fmt.Sprintf("192.0.2.%d", 1+i%200)) // one network, many hosts
		h.ServeDNS(w, query("www.example.org."))
		d := ds.last()
		switch {
		case d.RequestDropped:
			if w.wrote() != 0 || d.Action != rrl.Drop || d.IPReason != rrl.IPRateLimit ||
				d.RTReason != rrl.RTNotReached || d.Response != nil || d.Tuple != (rrl.ResponseTuple{}) {
				t.Fatalf("query %d refused: wrote %d, decision %+v", i, w.wrote(), d)
			}
		case w.wrote() != 1 || d.Action != rrl.Send || d.IPReason != rrl.IPOk:
			t.Fatalf("query %d served: wrote %d, decision %+v", i, w.wrote(), d)
		}
		if i%(10*plan.rate/4) == 0 { // about 4 a second, within the allowance
			otherAsked++
			o := udpFrom("198.51.100.7")
			h.ServeDNS(o, query("www.example.org."))
			if o.wrote() == 1 && ds.last().Action == rrl.Send {
				otherSent++
			}
		}
		clock.advance(plan.step())
	}

	flood := count.of("192.0.2.1")
	if flood > plan.ceiling() || flood < plan.rate {
		t.Errorf("the flood reached the handler %d times, want %d to %d", flood, plan.rate, plan.ceiling())
	}
	if otherSent != otherAsked || count.of("198.51.100.7") != otherAsked {
		t.Errorf("the other network got %d answers and %d handler calls of %d", otherSent, count.of("198.51.100.7"), otherAsked)
	}
	st := lim.GetStats(false)
	if refused := plan.queries() - flood; st.IPReasons[rrl.IPRateLimit] != int64(refused) {
		t.Errorf("%d refused, the limiter counted %d: %v", refused, st.IPReasons[rrl.IPRateLimit], st.String())
	}
}

// Over TCP a refused request closes the connection: nothing will come on
// it. TCP requests are proven: proven-requests-per-second holds them.
func TestMiddlewareRequestLimitTCP(t *testing.T) {
	lim := newLimiter(t, newTestClock(), "requests-per-second", "1", "proven-requests-per-second", "2")
	count := newCountingHandler()
	var ds decisions
	h := Middleware(lim, count, Options{OnDecision: ds.record})
	for i := range 4 {
		w := tcpFrom("192.0.2.1")
		h.ServeDNS(w, query("www.example.org."))
		served := i < 2
		if served != (w.wrote() == 1) || served == (w.closed == 1) || served == ds.last().RequestDropped {
			t.Errorf("TCP query %d: wrote %d, closed %d, decision %+v", i, w.wrote(), w.closed, ds.last())
		}
	}
	if n := count.of("192.0.2.1"); n != 2 {
		t.Errorf("handler called %d times, want 2", n)
	}
	// The UDP requests of the network have their own, smaller, allowance.
	w := udpFrom("192.0.2.1")
	for range 2 {
		h.ServeDNS(w, query("www.example.org."))
	}
	if w.wrote() != 1 || w.closed != 0 {
		t.Errorf("UDP: wrote %d of 2 with requests-per-second 1, closed %d", w.wrote(), w.closed)
	}
}

// In report-only mode a request over its limit is served and reported as
// dropped; its response is not debited, as it would not have existed.
func TestMiddlewareRequestLimitReportOnly(t *testing.T) {
	lim := newLimiter(t, newTestClock(), "requests-per-second", "1", "responses-per-second", "1")
	count := newCountingHandler()
	var ds decisions
	h := Middleware(lim, count, Options{ReportOnly: true, OnDecision: ds.record})
	for i := range 3 {
		w := tcpFrom("192.0.2.1")
		h.ServeDNS(w, query("www.example.org."))
		d := ds.last()
		if len(ds.list) != i+1 {
			t.Fatalf("query %d: %d decisions, want one per request", i, len(ds.list))
		}
		if w.wrote() != 1 || w.closed != 0 || !d.ReportOnly || d.RequestDropped != (i > 0) {
			t.Errorf("query %d: wrote %d, closed %d, decision %+v", i, w.wrote(), w.closed, d)
		}
	}
	if n := count.of("192.0.2.1"); n != 3 {
		t.Errorf("handler called %d times, want 3", n)
	}
	st := lim.GetStats(false)
	if st.RPS[rrl.AllowanceAnswer] != 1 || st.IPReasons[rrl.IPRateLimit] != 2 {
		t.Errorf("want 1 response debited and 2 requests over the limit: %v", st.String())
	}
}

// A client with a valid server cookie flooding at ten times
// proven-requests-per-second gets that allowance answered and no more; its
// responses are exempt from the response limits (responses-per-second 1
// would otherwise have slipped all but one), and report the request's
// reason.
func TestMiddlewareValidCookieRequestLimit(t *testing.T) {
	plan := floodPlan{rate: 5, seconds: 4}
	clock := newTestClock()
	lim := newLimiter(t, clock, "requests-per-second", "1", "proven-requests-per-second", fmt.Sprint(plan.rate),
		"responses-per-second", "1", "slip-ratio", "1")
	cookies := NewCookies([16]byte{7})
	client := netip.MustParseAddr("192.0.2.1")
	count := newCountingHandler()
	var ds decisions
	h := Middleware(lim, count, Options{Cookies: cookies, OnDecision: ds.record, Now: clock.now})

	answered := 0
	for i := range plan.queries() {
		w := udpFrom("192.0.2.1")
		h.ServeDNS(w, cookieQuery("www.example.org.", issuedCookie(cookies, client, clock.now())))
		d := ds.last()
		if d.Cookie != CookieValid {
			t.Fatalf("query %d: cookie %v", i, d.Cookie)
		}
		switch {
		case d.RequestDropped:
			if w.wrote() != 0 || d.IPReason != rrl.IPRateLimit {
				t.Fatalf("query %d refused: wrote %d, decision %+v", i, w.wrote(), d)
			}
		case w.wrote() == 1 && len(w.last().Answer) == 1:
			answered++
			if d.Limited || d.Action != rrl.Send || d.IPReason != rrl.IPOk || d.RTReason != rrl.RTNotReached {
				t.Fatalf("query %d answered: decision %+v", i, d)
			}
		default:
			t.Fatalf("query %d: wrote %v, decision %+v", i, w.msgs, d)
		}
		clock.advance(plan.step())
	}
	// At least the burst: more than responses-per-second would answer.
	if answered > plan.ceiling() || answered < plan.rate {
		t.Errorf("%d answered, want %d to %d", answered, plan.rate, plan.ceiling())
	}
	if st := lim.GetStats(false); st.RPS[rrl.AllowanceAnswer] != 0 {
		t.Errorf("responses to a proven source were debited: %v", st.String())
	}

	// The network's unproven requests have their own allowance, untouched.
	w := udpFrom("192.0.2.9")
	h.ServeDNS(w, query("www.example.org."))
	if w.wrote() != 1 || len(w.last().Answer) != 1 {
		t.Errorf("an unproven request after the flood: %v", w.msgs)
	}
}

// A response exempt by its valid cookie reports the IPReason of its
// request's charge and RTNotReached.
func TestMiddlewareCookieExemptReasons(t *testing.T) {
	client := netip.MustParseAddr("192.0.2.1")
	for _, tc := range []struct {
		settings []string
		want     rrl.IPReason
	}{
		{[]string{"responses-per-second", "1"}, rrl.IPNotConfigured},
		{[]string{"requests-per-second", "10"}, rrl.IPOk},
		{[]string{"proven-requests-per-second", "10"}, rrl.IPOk},
		{[]string{"requests-per-second", "10", "exempt-clients", "192.0.2.0/24"}, rrl.IPExempt},
	} {
		clock := newTestClock()
		cookies := NewCookies([16]byte{7})
		var ds decisions
		h := Middleware(newLimiter(t, clock, tc.settings...), answerHandler, Options{Cookies: cookies, OnDecision: ds.record, Now: clock.now})
		w := udpFrom("192.0.2.1")
		h.ServeDNS(w, cookieQuery("www.example.org.", issuedCookie(cookies, client, clock.now())))
		d := ds.last()
		if d.Limited || d.Action != rrl.Send || d.IPReason != tc.want || d.RTReason != rrl.RTNotReached ||
			d.Tuple.SalientName != "www.example.org." || w.wrote() != 1 {
			t.Errorf("%v: decision %+v, want %v and RTNotReached", tc.settings, d, tc.want)
		}
	}
}

// The requests the middleware answers itself are charged first too: a flood
// of malformed cookies gets FORMERR within the allowance, then nothing.
func TestMiddlewareRequestLimitMalformedCookie(t *testing.T) {
	lim := newLimiter(t, newTestClock(), "requests-per-second", "2")
	called := 0
	h := Middleware(lim, panicky(&called), Options{Cookies: NewCookies([16]byte{1})})
	var rcodes []int
	for range 4 {
		w := udpFrom("192.0.2.1")
		h.ServeDNS(w, cookieQuery("www.example.org.", "0102"))
		for _, m := range w.msgs {
			rcodes = append(rcodes, m.Rcode)
		}
	}
	if len(rcodes) != 2 || rcodes[0] != dns.RcodeFormatError || rcodes[1] != dns.RcodeFormatError || called != 0 {
		t.Errorf("rcodes sent %v, want two FORMERR; handler called %d times", rcodes, called)
	}
}

// Many goroutines through one middleware, over UDP and TCP, with and
// without valid cookies, the limiter's clock stopped: each network's
// handler calls are exactly its two allowances, however the requests
// interleave, and every request is decided once.
func TestMiddlewareRequestLimitConcurrent(t *testing.T) {
	const requests, proven = 3, 5
	clock := newTestClock()
	lim := newLimiter(t, clock, "requests-per-second", fmt.Sprint(requests), "proven-requests-per-second", fmt.Sprint(proven))
	cookies := NewCookies([16]byte{8})
	count := newCountingHandler()
	var mu sync.Mutex
	dropped := 0
	h := Middleware(lim, count, Options{Cookies: cookies, Now: clock.now, OnDecision: func(d Decision) {
		if d.RequestDropped {
			mu.Lock()
			dropped++
			mu.Unlock()
		}
	}})
	const networks, workers, perWorker = 3, 8, 200
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			host := fmt.Sprintf("192.0.%d.%d", g%networks, 1+g)
			valid := cookieQuery("www.example.org.", issuedCookie(cookies, netip.MustParseAddr(host), clock.now()))
			for i := range perWorker {
				switch i % 3 {
				case 0:
					h.ServeDNS(udpFrom(host), query("www.example.org."))
				case 1:
					h.ServeDNS(udpFrom(host), valid)
				default:
					h.ServeDNS(tcpFrom(host), query("www.example.org."))
				}
			}
		})
	}
	wg.Wait()
	for n := range networks {
		if got := count.of(fmt.Sprintf("192.0.%d.1", n)); got != requests+proven {
			t.Errorf("network %d: handler called %d times, want %d", n, got, requests+proven)
		}
	}
	if want := workers*perWorker - networks*(requests+proven); dropped != want {
		t.Errorf("%d requests dropped, want %d", dropped, want)
	}
}

// Requests with valid cookies count for qps-scale, though their responses
// are not debited: a cookie flood that takes the server over qps-scale
// tightens the allowance of the other clients, as any load does.
func TestMiddlewareValidCookieCountsForQPSScale(t *testing.T) {
	clock := newTestClock()
	lim := newLimiter(t, clock, "responses-per-second", "10", "slip-ratio", "1", "qps-scale", "20")
	cookies := NewCookies([16]byte{7})
	var ds decisions
	h := Middleware(lim, answerHandler, Options{Cookies: cookies, OnDecision: ds.record, Now: clock.now})
	flooder := netip.MustParseAddr("192.0.2.1")
	limited := 0
	for i := range 300 { // 3 seconds: 100 proven requests a second, and 8 others
		cookie := issuedCookie(cookies, flooder, clock.now())
		h.ServeDNS(udpFrom("192.0.2.1"), cookieQuery("www.example.org.", cookie))
		if d := ds.last(); d.Limited || d.Action != rrl.Send {
			t.Fatalf("proven request %d: %+v", i, d)
		}
		if i%12 == 0 {
			h.ServeDNS(udpFrom("198.51.100.7"), query("www.example.org."))
			if ds.last().Action != rrl.Send {
				limited++
			}
		}
		clock.advance(10 * time.Millisecond)
	}
	// Without the proven requests the server would see 8 a second, under
	// qps-scale, and the other client's 8 would all be within its 10.
	if limited == 0 {
		t.Error("the other client was never limited: the proven requests did not count for qps-scale")
	}
}

// A stream whose address the core cannot read (a Unix socket, a
// *net.TCPAddr without an IP) is limited as a UDP source would be, but its
// responses are never slipped as TC replies nor truncated: the client is
// already on a connection, and a TC reply would send it to retry over one.
func TestMiddlewareStreamWithoutAddressIsNeverTruncated(t *testing.T) {
	for _, remote := range []net.Addr{
		&net.UnixAddr{Name: "@dns", Net: "unix"},
		&net.UnixAddr{Name: "@dns", Net: "unixpacket"},
		&net.TCPAddr{Port: 5353},
	} {
		lim := newLimiter(t, newTestClock(), "responses-per-second", "1", "slip-ratio", "1")
		var ds decisions
		h := Middleware(lim, answerHandler, Options{OnDecision: ds.record})
		w := &fakeWriter{remote: remote}
		for range 3 {
			h.ServeDNS(w, query("www.example.org."))
		}
		slips := 0
		for _, d := range ds.list {
			if d.Action == rrl.Slip {
				slips++
			}
		}
		if slips == 0 {
			t.Fatalf("%s: the limiter slipped nothing, so nothing is tested", remote.Network())
		}
		for _, m := range w.msgs {
			if m.Truncated {
				t.Errorf("%s: a TC reply written on a connection", remote.Network())
			}
		}
		if w.wrote() != 3 {
			t.Errorf("%s: wrote %d of 3, want a slip sent as the response", remote.Network(), w.wrote())
		}
	}
}

// A response with a server cookie is truncated to the client's payload
// size over UDP only; over TCP it goes whole. A stream whose address
// cannot be read gets no cookie (there is no address to bind it to), and
// its response goes whole too.
func TestCookieReplyTruncatedOverUDPOnly(t *testing.T) {
	big := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		for i := range 60 {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A: net.IPv4(192, 0, 2, byte(i))})
		}
		w.WriteMsg(m)
	})
	for _, c := range []struct {
		remote            net.Addr
		truncated, cookie bool
	}{
		{&net.UDPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 5353}, true, true},
		{&net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 5353}, false, true},
		{&net.UnixAddr{Name: "@dns", Net: "unix"}, false, false},
		{&net.TCPAddr{Port: 5353}, false, false},
	} {
		h := Middleware(newLimiter(t, newTestClock()), big, Options{Cookies: NewCookies([16]byte{1})})
		w := &fakeWriter{remote: c.remote}
		q := cookieQuery("www.example.org.", "0102030405060708")
		q.IsEdns0().SetUDPSize(512)
		h.ServeDNS(w, q)
		if w.wrote() != 1 || w.last().Truncated != c.truncated || (respCookie(w.last()) != "") != c.cookie ||
			(!c.truncated && len(w.last().Answer) != 60) {
			t.Errorf("%s: wrote %d, truncated %v with %d answers, cookie %q; want truncated %v",
				c.remote.Network(), w.wrote(), w.last().Truncated, len(w.last().Answer), respCookie(w.last()), c.truncated)
		}
	}
}

// A response dropped on a stream whose address the core cannot read (and
// so limits as UDP) closes the connection, rather than leave its client
// waiting for an answer.
func TestMiddlewareDropOnStreamCloses(t *testing.T) {
	for _, remote := range []net.Addr{&net.UnixAddr{Name: "@dns", Net: "unix"}, &net.TCPAddr{Port: 5353}} {
		lim := newLimiter(t, newTestClock(), "responses-per-second", "1", "slip-ratio", "0")
		h := Middleware(lim, answerHandler, Options{})
		w := &fakeWriter{remote: remote}
		h.ServeDNS(w, query("www.example.org."))
		h.ServeDNS(w, query("www.example.org.")) // dropped
		if w.wrote() != 1 || w.closed != 1 {
			t.Errorf("%s: wrote %d, closed %d; want the first answered and the connection closed at the drop", remote.Network(), w.wrote(), w.closed)
		}
	}
	// A datagram's listener is never closed.
	lim := newLimiter(t, newTestClock(), "responses-per-second", "1", "slip-ratio", "0")
	h := Middleware(lim, answerHandler, Options{})
	w := udpFrom("192.0.2.1")
	h.ServeDNS(w, query("www.example.org."))
	h.ServeDNS(w, query("www.example.org."))
	if w.wrote() != 1 || w.closed != 0 {
		t.Errorf("UDP: wrote %d, closed %d; want 1, 0", w.wrote(), w.closed)
	}
}

// In report-only mode a UDP request over its limit is answered as it would
// be without the limit, not truncated, and its response is not debited.
func TestMiddlewareRequestLimitReportOnlyUDP(t *testing.T) {
	lim := newLimiter(t, newTestClock(), "requests-per-second", "1", "responses-per-second", "1", "slip-ratio", "1")
	var ds decisions
	h := Middleware(lim, answerHandler, Options{ReportOnly: true, OnDecision: ds.record})
	w := udpFrom("192.0.2.1")
	for range 3 {
		h.ServeDNS(w, query("www.example.org."))
	}
	if w.wrote() != 3 || w.msgs[1].Truncated || w.msgs[2].Truncated || len(w.msgs[2].Answer) == 0 {
		t.Errorf("wrote %d: %v; want 3 full answers", w.wrote(), w.msgs)
	}
	if st := lim.GetStats(false); st.RPS[rrl.AllowanceAnswer] != 1 || st.IPReasons[rrl.IPRateLimit] != 2 {
		t.Errorf("want 1 response debited and 2 requests over the limit: %v", st.String())
	}
}

// A refused request closes its connection whatever the stream's address:
// a stream over a Unix socket and a *net.TCPAddr without an IP have no
// address the core can read (it counts them as 0.0.0.0 over UDP), yet
// both are connections.
// Nothing is written, so a connection left open would keep its client
// waiting for an answer that never comes.
func TestMiddlewareRequestLimitClosesEveryStream(t *testing.T) {
	for _, remote := range []net.Addr{
		&net.UnixAddr{Name: "@dns", Net: "unix"},
		&net.TCPAddr{Port: 5353},
	} {
		lim := newLimiter(t, newTestClock(), "requests-per-second", "1")
		h := Middleware(lim, answerHandler, Options{})
		for i := range 2 {
			w := &fakeWriter{remote: remote}
			h.ServeDNS(w, query("www.example.org."))
			if refused := i == 1; w.wrote() == 0 != refused || (w.closed == 1) != refused {
				t.Errorf("%s request %d: wrote %d, closed %d", remote.Network(), i, w.wrote(), w.closed)
			}
		}
	}
	// A datagram is never closed: its listener serves every client.
	for _, remote := range []net.Addr{
		&net.UDPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 5353},
		&net.UnixAddr{Name: "@dns", Net: "unixgram"},
	} {
		lim := newLimiter(t, newTestClock(), "requests-per-second", "1")
		h := Middleware(lim, answerHandler, Options{})
		w := &fakeWriter{remote: remote}
		h.ServeDNS(w, query("www.example.org."))
		h.ServeDNS(w, query("www.example.org."))
		if w.wrote() != 1 || w.closed != 0 {
			t.Errorf("%s: wrote %d, closed %d", remote.Network(), w.wrote(), w.closed)
		}
	}
}

// A request refused by its request limit allocates nothing, over UDP or
// TCP, with a valid cookie or none, with a hook or without: the writer the
// handler would get is never made, and nothing is written.
func TestMiddlewareRefusedAllocatesNothing(t *testing.T) {
	clock := newTestClock()
	cookies := NewCookies([16]byte{3})
	valid := cookieQuery("www.example.org.", issuedCookie(cookies, netip.MustParseAddr("192.0.2.1"), clock.now()))
	for _, tc := range []struct {
		name string
		w    *fakeWriter
		req  *dns.Msg
		opts Options
	}{
		{"udp", udpFrom("192.0.2.1"), query("www.example.org."), Options{}},
		{"udp, hook", udpFrom("192.0.2.1"), query("www.example.org."), Options{OnDecision: func(Decision) {}}},
		{"tcp, hook", tcpFrom("192.0.2.1"), query("www.example.org."), Options{OnDecision: func(Decision) {}}},
		{"valid cookie, hook", udpFrom("192.0.2.1"), valid, Options{Cookies: cookies, Now: clock.now, OnDecision: func(Decision) {}}},
	} {
		lim := newLimiter(t, clock, "requests-per-second", "1")
		h := Middleware(lim, answerHandler, tc.opts)
		h.ServeDNS(tc.w, tc.req) // the allowance
		n := testing.AllocsPerRun(100, func() { h.ServeDNS(tc.w, tc.req) })
		if tc.w.wrote() != 1 || n != 0 {
			t.Errorf("%s: %d written, %v allocations per refused request, want 1 and 0", tc.name, tc.w.wrote(), n)
		}
	}
}
