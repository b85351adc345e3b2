package miekgrrl

import (
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/miekg/dns"
)

// fakeWriter is a dns.ResponseWriter that records what is written.
type fakeWriter struct {
	remote   net.Addr
	msgs     []*dns.Msg
	raw      [][]byte
	hijacked bool
	closed   int // Close calls
}

func (w *fakeWriter) LocalAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}
}
func (w *fakeWriter) RemoteAddr() net.Addr        { return w.remote }
func (w *fakeWriter) WriteMsg(m *dns.Msg) error   { w.msgs = append(w.msgs, m); return nil }
func (w *fakeWriter) Write(b []byte) (int, error) { w.raw = append(w.raw, b); return len(b), nil }
func (w *fakeWriter) Close() error                { w.closed++; return nil }
func (w *fakeWriter) TsigStatus() error           { return nil }
func (w *fakeWriter) TsigTimersOnly(bool)         {}
func (w *fakeWriter) Hijack()                     { w.hijacked = true }
func (w *fakeWriter) reset()                      { w.msgs, w.raw = nil, nil }
func udpFrom(ip string) *fakeWriter {
	return &fakeWriter{remote: &net.UDPAddr{IP: net.ParseIP(ip), Port: 5353}}
}
func tcpFrom(ip string) *fakeWriter {
	return &fakeWriter{remote: &net.TCPAddr{IP: net.ParseIP(ip), Port: 5353}}
}
func (w *fakeWriter) last() *dns.Msg { return w.msgs[len(w.msgs)-1] }
func (w *fakeWriter) wrote() int     { return len(w.msgs) + len(w.raw) }

// testClock is a settable clock for the limiter.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := new(testClock)
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *testClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// newLimiter returns an RRL on clock with the given settings.
func newLimiter(t testing.TB, clock *testClock, kv ...string) *rrl.RRL {
	t.Helper()
	cfg := rrl.NewConfig()
	for i := 0; i+1 < len(kv); i += 2 {
		if err := cfg.SetValue(kv[i], kv[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	cfg.SetNowFunc(clock.now)
	return rrl.NewRRL(cfg)
}

// answerHandler answers every query with one A record.
var answerHandler = dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg).SetReply(r)
	m.Authoritative = true
	if len(r.Question) > 0 {
		m.Answer = []dns.RR{&dns.A{
			Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
			A:   net.IPv4(192, 0, 2, 1),
		}}
	}
	w.WriteMsg(m)
})

func query(name string) *dns.Msg { return new(dns.Msg).SetQuestion(name, dns.TypeA) }

// decisions collects what OnDecision reports.
type decisions struct{ list []Decision }

func (d *decisions) record(x Decision) { d.list = append(d.list, x) }
func (d *decisions) last() Decision    { return d.list[len(d.list)-1] }

func TestMiddlewareLimitsUDP(t *testing.T) {
	clock := newTestClock()
	lim := newLimiter(t, clock, "responses-per-second", "5", "slip-ratio", "2")
	var ds decisions
	h := Middleware(lim, answerHandler, Options{OnDecision: ds.record})

	w := udpFrom("192.0.2.1")
	var actions []rrl.Action
	for range 10 {
		w.reset()
		h.ServeDNS(w, query("www.example.org."))
		actions = append(actions, ds.last().Action)
		switch ds.last().Action {
		case rrl.Send:
			if w.wrote() != 1 || len(w.last().Answer) != 1 || w.last().Truncated {
				t.Fatalf("Send wrote %v", w.msgs)
			}
		case rrl.Slip:
			if w.wrote() != 1 || !w.last().Truncated || len(w.last().Answer) != 0 {
				t.Fatalf("Slip wrote %v", w.msgs)
			}
		case rrl.Drop:
			if w.wrote() != 0 {
				t.Fatalf("Drop wrote %v", w.msgs)
			}
		}
	}
	want := []rrl.Action{rrl.Send, rrl.Send, rrl.Send, rrl.Send, rrl.Send, rrl.Slip, rrl.Drop, rrl.Slip, rrl.Drop, rrl.Slip}
	if !equalActions(actions, want) {
		t.Errorf("actions %v, want %v", actions, want)
	}
	d := ds.last()
	if !d.Limited || !d.UDP || d.RTReason != rrl.RTRateLimit || d.Client != netip.MustParseAddr("192.0.2.1") ||
		d.Tuple.SalientName != "www.example.org." || d.Tuple.AllowanceCategory != rrl.AllowanceAnswer || d.Request == nil || d.Response == nil {
		t.Errorf("decision %+v", d)
	}

	// Another network is not affected; the same network after a second is
	// allowed again.
	w2 := udpFrom("198.51.100.7")
	h.ServeDNS(w2, query("www.example.org."))
	if ds.last().Action != rrl.Send || w2.wrote() != 1 {
		t.Errorf("other network: %v", ds.last().Action)
	}
	clock.advance(3 * time.Second)
	w.reset()
	h.ServeDNS(w, query("www.example.org."))
	if ds.last().Action != rrl.Send {
		t.Errorf("after 3s: %v", ds.last().Action)
	}
}

func equalActions(a, b []rrl.Action) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestMiddlewareTCPNotLimited(t *testing.T) {
	lim := newLimiter(t, newTestClock(), "responses-per-second", "1")
	var ds decisions
	h := Middleware(lim, answerHandler, Options{OnDecision: ds.record})
	w := tcpFrom("192.0.2.1")
	for i := range 20 {
		w.reset()
		h.ServeDNS(w, query("www.example.org."))
		if w.wrote() != 1 || w.last().Truncated || ds.last().RTReason != rrl.RTNotUDP || ds.last().UDP {
			t.Fatalf("TCP query %d: wrote %v, decision %+v", i, w.msgs, ds.last())
		}
	}
	if st := lim.GetStats(false); st.RTReasons[rrl.RTNotUDP] != 20 {
		t.Errorf("TCP responses were not debited: %v", st.String())
	}
}

func TestMiddlewareReportOnly(t *testing.T) {
	lim := newLimiter(t, newTestClock(), "responses-per-second", "1", "slip-ratio", "2")
	var ds decisions
	h := Middleware(lim, answerHandler, Options{ReportOnly: true, OnDecision: ds.record})
	w := udpFrom("192.0.2.1")
	var actions []rrl.Action
	for range 4 {
		h.ServeDNS(w, query("www.example.org."))
		actions = append(actions, ds.last().Action)
		if !ds.last().ReportOnly {
			t.Error("decision not marked report-only")
		}
	}
	if want := []rrl.Action{rrl.Send, rrl.Slip, rrl.Drop, rrl.Slip}; !equalActions(actions, want) {
		t.Errorf("reported %v, want %v", actions, want)
	}
	if w.wrote() != 4 {
		t.Fatalf("wrote %d of 4", w.wrote())
	}
	for _, m := range w.msgs {
		if m.Truncated || len(m.Answer) != 1 {
			t.Errorf("report-only changed a response: %v", m)
		}
	}
}

func TestMiddlewareNothingWritten(t *testing.T) {
	lim := newLimiter(t, newTestClock(), "responses-per-second", "1")
	called := 0
	h := Middleware(lim, dns.HandlerFunc(func(dns.ResponseWriter, *dns.Msg) {}), Options{OnDecision: func(Decision) { called++ }})
	w := udpFrom("192.0.2.1")
	for range 3 {
		h.ServeDNS(w, query("www.example.org."))
	}
	if w.wrote() != 0 || called != 0 {
		t.Errorf("wrote %d, %d decisions, want none", w.wrote(), called)
	}
	if st := lim.GetStats(false); st.Actions[rrl.Send]+st.Actions[rrl.Drop]+st.Actions[rrl.Slip] != 0 {
		t.Errorf("debited without a response: %s", st.String())
	}
}

func TestMiddlewareCookies(t *testing.T) {
	clock := newTestClock()
	lim := newLimiter(t, clock, "responses-per-second", "1", "slip-ratio", "1")
	cookies := NewCookies([16]byte{3})
	var ds decisions
	h := Middleware(lim, answerHandler, Options{Cookies: cookies, OnDecision: ds.record, Now: clock.now})
	w := udpFrom("192.0.2.1")
	client := netip.MustParseAddr("192.0.2.1")

	// First query with a client cookie: sent, with a server cookie.
	h.ServeDNS(w, cookieQuery("www.example.org.", "0102030405060708"))
	if ds.last().Action != rrl.Send || ds.last().Cookie != CookieClientOnly {
		t.Fatalf("first: %+v", ds.last())
	}
	full := respCookie(w.last())
	if cookies.Check(cookieQuery("x.", full), client, clock.now()) != CookieValid {
		t.Fatalf("the response's cookie %q does not validate", full)
	}

	// Second, still without the server cookie: limited, BADCOOKIE.
	w.reset()
	h.ServeDNS(w, cookieQuery("www.example.org.", "0102030405060708"))
	if ds.last().Action != rrl.Slip || w.wrote() != 1 || w.last().Rcode != dns.RcodeBadCookie {
		t.Fatalf("second: decision %+v, wrote %v", ds.last(), w.msgs)
	}
	full = respCookie(w.last())

	// With the server cookie: never limited, each response with a fresh
	// cookie.
	for i := range 10 {
		w.reset()
		clock.advance(time.Millisecond)
		h.ServeDNS(w, cookieQuery("www.example.org.", full))
		d := ds.last()
		if d.Action != rrl.Send || d.Limited || d.Cookie != CookieValid || w.wrote() != 1 || len(w.last().Answer) != 1 ||
			d.Tuple.SalientName != "www.example.org." {
			t.Fatalf("with server cookie %d: decision %+v, wrote %v", i, d, w.msgs)
		}
		if got := respCookie(w.last()); len(got) != 48 || got[:16] != full[:16] {
			t.Fatalf("cookie %q", got)
		}
	}

	// An expired server cookie is limited again, and the slip is BADCOOKIE
	// with a fresh cookie.
	clock.advance(2 * time.Hour)
	h.ServeDNS(w, cookieQuery("www.example.org.", full)) // fresh credit after 2h: Send
	w.reset()
	h.ServeDNS(w, cookieQuery("www.example.org.", full))
	if d := ds.last(); d.Cookie != CookieBad || d.Action != rrl.Slip || w.last().Rcode != dns.RcodeBadCookie {
		t.Fatalf("expired: decision %+v, wrote %v", d, w.msgs)
	}
	if cookies.Check(cookieQuery("x.", respCookie(w.last())), client, clock.now()) != CookieValid {
		t.Error("BADCOOKIE carries no valid fresh cookie")
	}

	// Without a client cookie the slip is TC.
	w.reset()
	h.ServeDNS(w, query("www.example.org."))
	if !w.last().Truncated {
		t.Errorf("no cookie: %v", w.last())
	}
	if len(w.last().Extra) != 0 {
		t.Errorf("no EDNS in request but %v in reply", w.last().Extra)
	}
}

func TestMiddlewareWildcard(t *testing.T) {
	lim := newLimiter(t, newTestClock(), "responses-per-second", "2")
	var ds decisions
	told := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if !SetWildcardOrigin(w, "example.org.") {
			t.Error("SetWildcardOrigin did not reach the middleware")
		}
		answerHandler(w, r)
	})
	h := Middleware(lim, told, Options{OnDecision: ds.record})
	w := udpFrom("192.0.2.1")
	// Different names under one wildcard share one account.
	for i, name := range []string{"a.example.org.", "b.example.org.", "c.example.org."} {
		h.ServeDNS(w, query(name))
		if ds.last().Tuple.SalientName != "*.example.org." {
			t.Errorf("name %q", ds.last().Tuple.SalientName)
		}
		if want := map[bool]rrl.Action{true: rrl.Send, false: rrl.Slip}[i < 2]; ds.last().Action != want {
			t.Errorf("%s: %v, want %v", name, ds.last().Action, want)
		}
	}

	// Through Options.WildcardOrigin.
	h = Middleware(lim, answerHandler, Options{OnDecision: ds.record, WildcardOrigin: func(req, resp *dns.Msg) string { return "example.net" }})
	h.ServeDNS(w, query("x.example.net."))
	if ds.last().Tuple.SalientName != "*.example.net." {
		t.Errorf("name %q", ds.last().Tuple.SalientName)
	}
	if SetWildcardOrigin(udpFrom("192.0.2.1"), "x.") {
		t.Error("SetWildcardOrigin claims success on a foreign writer")
	}
}

// A handler that packs its own message is classified from the bytes.
func TestMiddlewareRawWrite(t *testing.T) {
	clock := newTestClock()
	lim := newLimiter(t, clock, "responses-per-second", "1", "slip-ratio", "1")
	cookies := NewCookies([16]byte{3})
	raw := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg).SetRcode(r, dns.RcodeNameError)
		m.Ns = rrs(t, soaLine)
		b, _ := m.Pack()
		w.Write(b)
	})
	var ds decisions
	h := Middleware(lim, raw, Options{OnDecision: ds.record, Cookies: cookies, Now: clock.now})
	w := udpFrom("192.0.2.1")
	h.ServeDNS(w, query("x.example.org."))
	if ds.last().Tuple.AllowanceCategory != rrl.AllowanceNXDomain || ds.last().Tuple.SalientName != "example.org." || len(w.raw) != 1 {
		t.Fatalf("decision %+v, wrote %d raw", ds.last(), len(w.raw))
	}
	h.ServeDNS(w, query("y.example.org."))
	if ds.last().Action != rrl.Slip || len(w.msgs) != 1 || !w.last().Truncated || w.last().Rcode != dns.RcodeNameError {
		t.Fatalf("slip of a raw write: %+v %v", ds.last(), w.msgs)
	}
	// With a client cookie the raw response is repacked with a server cookie.
	clock.advance(time.Minute)
	w.reset()
	h.ServeDNS(w, cookieQuery("z.example.org.", "0102030405060708"))
	m := new(dns.Msg)
	if len(w.raw) != 1 || m.Unpack(w.raw[0]) != nil || len(respCookie(m)) != 48 {
		t.Fatalf("raw write with cookie: %d raw, %v", len(w.raw), m)
	}
	// Garbage is an error response for the limiter and is passed on as is.
	garbage := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) { w.Write([]byte{1, 2, 3}) })
	h = Middleware(lim, garbage, Options{OnDecision: ds.record})
	w.reset()
	h.ServeDNS(w, query("x.example.org."))
	if ds.last().Tuple.AllowanceCategory != rrl.AllowanceError || len(w.raw) != 1 {
		t.Errorf("garbage: %+v", ds.last())
	}
}

// Later messages of one request follow the first message's fate, and a
// hijacked writer is not recycled.
func TestMiddlewareSeveralMessages(t *testing.T) {
	lim := newLimiter(t, newTestClock(), "responses-per-second", "1", "slip-ratio", "1")
	n := 0
	var kept dns.ResponseWriter
	multi := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		w.Hijack()
		kept = w
		for range 3 {
			answerHandler(w, r)
		}
		n++
	})
	h := Middleware(lim, multi, Options{})
	w := udpFrom("192.0.2.1")
	h.ServeDNS(w, query("www.example.org."))
	if w.wrote() != 3 || !w.hijacked {
		t.Fatalf("first request: wrote %d, hijacked %v", w.wrote(), w.hijacked)
	}
	w.reset()
	h.ServeDNS(w, query("www.example.org."))
	if w.wrote() != 1 || !w.last().Truncated {
		t.Fatalf("second request (limited): wrote %v, want a single TC reply", w.msgs)
	}
	// The hijacked writer still works after ServeDNS returned.
	w.reset()
	kept.WriteMsg(new(dns.Msg))
	if w.wrote() != 0 {
		t.Errorf("a write after a slip was sent")
	}
	if kept.RemoteAddr().String() != "192.0.2.1:5353" {
		t.Errorf("hijacked writer lost its connection: %v", kept.RemoteAddr())
	}
}

func TestClientAddr(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
		udp  bool
	}{
		{&net.UDPAddr{IP: net.ParseIP("::ffff:192.0.2.1"), Port: 1}, "192.0.2.1", true},
		{&net.UDPAddr{IP: net.ParseIP("fe80::1"), Port: 1, Zone: "eth0"}, "fe80::1", true},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 1}, "2001:db8::1", false},
		{fakeAddr{"udp", "192.0.2.9:53"}, "192.0.2.9", true},
		{fakeAddr{"tcp", "[2001:db8::9]:53"}, "2001:db8::9", false},
		{fakeAddr{"tcp", "[::ffff:192.0.2.9%eth0]:53"}, "192.0.2.9", false},
		// Sources whose address cannot be had are the zero address over
		// UDP, as the core takes them: limited, never let through.
		{fakeAddr{"unix", "/tmp/sock"}, "invalid IP", true},
		{nil, "invalid IP", true},
		{(*net.UDPAddr)(nil), "invalid IP", true},
		{(*net.TCPAddr)(nil), "invalid IP", true},
		{&net.TCPAddr{}, "invalid IP", true},
		{(*fakePtrAddr)(nil), "invalid IP", true},
	} {
		got, udp := clientAddr(tc.addr)
		if got.String() != tc.want || udp != tc.udp {
			t.Errorf("%#v: %v %v, want %v %v", tc.addr, got, udp, tc.want, tc.udp)
		}
	}
}

// fakePtrAddr is a net.Addr whose methods panic on a nil receiver.
type fakePtrAddr struct{ s string }

func (a *fakePtrAddr) Network() string { return "udp" }
func (a *fakePtrAddr) String() string  { return a.s }

type fakeAddr struct{ net, s string }

func (a fakeAddr) Network() string { return a.net }
func (a fakeAddr) String() string  { return a.s }

// The middleware allocates per query only the handle the handler writes
// through (16 bytes), plus, for a response that carries a server cookie,
// the copy of the response that carries it (see cookieReply), with or
// without a hook.
func TestMiddlewareAllocations(t *testing.T) {
	clock := newTestClock()
	lim := newLimiter(t, clock, "responses-per-second", "1000000")
	resp := new(dns.Msg).SetReply(query("www.example.org."))
	fixed := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) { w.WriteMsg(resp) })
	cookies := NewCookies([16]byte{7})
	client := netip.MustParseAddr("192.0.2.1")
	young := issuedCookie(cookies, client, clock.now())
	old := issuedCookie(cookies, client, clock.now().Add(-40*time.Minute))
	w := udpFrom("192.0.2.1")
	for _, tc := range []struct {
		name string
		opts Options
		req  *dns.Msg
		max  float64
	}{
		{"no hook", Options{}, query("www.example.org."), 1},
		{"hook", Options{OnDecision: func(Decision) {}}, query("www.example.org."), 1},
		{"cookies on, no cookie", Options{Cookies: cookies}, query("www.example.org."), 1},
		{"client cookie", Options{Cookies: cookies}, cookieQuery("www.example.org.", "0102030405060708"), 2},
		{"valid cookie, sent back", Options{Cookies: cookies}, cookieQuery("www.example.org.", young), 2},
		{"valid cookie, renewed", Options{Cookies: cookies}, cookieQuery("www.example.org.", old), 2},
		{"valid cookie, hook", Options{Cookies: cookies, OnDecision: func(Decision) {}}, cookieQuery("www.example.org.", young), 2},
	} {
		tc.opts.Now = clock.now
		h := Middleware(lim, fixed, tc.opts)
		n := testing.AllocsPerRun(1000, func() { w.msgs = w.msgs[:0]; h.ServeDNS(w, tc.req) })
		t.Logf("%s: %v allocations per query", tc.name, n)
		if n > tc.max {
			t.Errorf("%s: %v allocations per query, want at most %v", tc.name, n, tc.max)
		}
	}
}

// A nil limiter limits nothing, and cookies still work.
func TestMiddlewareNilLimiter(t *testing.T) {
	var ds decisions
	h := Middleware(nil, answerHandler, Options{Cookies: NewCookies([16]byte{1}), OnDecision: ds.record})
	w := udpFrom("192.0.2.1")
	for range 5 {
		h.ServeDNS(w, cookieQuery("www.example.org.", "0102030405060708"))
	}
	if w.wrote() != 5 || ds.last().Action != rrl.Send || len(respCookie(w.last())) != 48 {
		t.Errorf("wrote %d, last %+v", w.wrote(), ds.last())
	}
}

// Many goroutines through one middleware, with cookies and a hook, for the
// race detector; every request is answered one way or another.
func TestMiddlewareConcurrent(t *testing.T) {
	lim := newLimiter(t, newTestClock(), "responses-per-second", "3", "slip-ratio", "2")
	cookies := NewCookies([16]byte{8})
	var decided atomic.Int64
	h := Middleware(lim, answerHandler, Options{Cookies: cookies, OnDecision: func(Decision) { decided.Add(1) }})
	const workers, perWorker = 8, 200
	done := make(chan int)
	for g := range workers {
		go func() {
			w := udpFrom(netip.AddrFrom4([4]byte{192, 0, byte(g % 3), 1}).String())
			for i := range perWorker {
				if i%2 == 0 {
					h.ServeDNS(w, cookieQuery("www.example.org.", "0102030405060708"))
				} else {
					h.ServeDNS(w, query("www.example.org."))
				}
			}
			done <- w.wrote()
		}()
	}
	for range workers {
		<-done
	}
	if decided.Load() != workers*perWorker {
		t.Errorf("%d decisions for %d requests", decided.Load(), workers*perWorker)
	}
	st := lim.GetStats(false)
	if st.Actions[rrl.Send]+st.Actions[rrl.Slip]+st.Actions[rrl.Drop] != workers*perWorker || st.Actions[rrl.Send] != 3*3 {
		t.Errorf("stats %s: want 9 sent (3 networks, 3 each)", st.String())
	}
}
