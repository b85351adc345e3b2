package miekgrrl

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/miekg/dns"
)

// Tests of what the middleware does to the responses it sends: it never
// changes the handler's message, keeps TSIG last, and keeps UDP responses
// within the client's size.

const (
	tsigKey    = "k.example."
	tsigSecret = "so6ZGir4GPAqINNh9U5c3A=="
)

// signingHandler answers with one A record, signing its reply with TSIG
// when the request was signed and verified, and without an OPT record.
var signingHandler = dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg).SetReply(r)
	m.Authoritative = true
	m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.IPv4(192, 0, 2, 1)}}
	if r.IsTsig() != nil && w.TsigStatus() == nil {
		m.SetTsig(tsigKey, dns.HmacSHA256, 300, time.Now().Unix())
	}
	w.WriteMsg(m)
})

// startTSIGServer serves h over UDP on 127.0.0.1 with the test key.
func startTSIGServer(t *testing.T, h dns.Handler) string {
	t.Helper()
	return startUDPLoopback(t, &dns.Server{Handler: h, TsigSecret: map[string]string{tsigKey: tsigSecret}})
}

// tsigExchange sends a signed query, with the client cookie cc if not "",
// and returns the reply, whose TSIG the client has verified if it has one.
func tsigExchange(t *testing.T, addr, cc string) *dns.Msg {
	t.Helper()
	q := cookieQuery("www.example.org.", cc)
	q.SetTsig(tsigKey, dns.HmacSHA256, 300, time.Now().Unix())
	c := &dns.Client{TsigSecret: map[string]string{tsigKey: tsigSecret}, Timeout: 5 * time.Second}
	r, _, err := c.Exchange(q, addr)
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	return r
}

// A signed response without an OPT record gets its cookie's OPT record
// before the TSIG record, so that package dns still signs it.
func TestMiddlewareCookieKeepsTSIGLast(t *testing.T) {
	addr := startTSIGServer(t, Middleware(rrl.NewRRL(nil), signingHandler, Options{Cookies: NewCookies([16]byte{1})}))
	r := tsigExchange(t, addr, "0102030405060708")
	if r.IsTsig() == nil || r.IsTsig().MACSize == 0 {
		t.Fatalf("reply not signed: %v", r)
	}
	if got := respCookie(r); len(got) != 48 || got[:16] != "0102030405060708" {
		t.Errorf("reply cookie %q", got)
	}
	if len(r.Answer) != 1 {
		t.Errorf("answer %v", r.Answer)
	}
}

func TestAddServerCookieBeforeTSIG(t *testing.T) {
	c := NewCookies([16]byte{1})
	req := cookieQuery("a.example.", "0102030405060708")
	resp := new(dns.Msg).SetReply(req)
	resp.SetTsig(tsigKey, dns.HmacSHA256, 300, time.Now().Unix())
	c.AddServerCookie(req, resp, netip.MustParseAddr("192.0.2.1"), time.Now())
	if len(resp.Extra) != 2 || resp.IsTsig() == nil || resp.IsEdns0() == nil || len(respCookie(resp)) != 48 {
		t.Errorf("additional section %v: want the OPT record with the cookie, then the TSIG record", resp.Extra)
	}
}

// A handler that packs and signs its own message: the middleware sends its
// bytes unchanged, since a cookie would break the MAC.
func TestMiddlewareRawWriteTSIGUnchanged(t *testing.T) {
	var signed []byte
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg).SetReply(r)
		m.SetEdns0(1232, false)
		m.SetTsig(tsigKey, dns.HmacSHA256, 300, time.Now().Unix())
		var err error
		signed, _, err = dns.TsigGenerate(m, tsigSecret, "", false)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(signed)
	})
	w := udpFrom("192.0.2.1")
	Middleware(rrl.NewRRL(nil), h, Options{Cookies: NewCookies([16]byte{1})}).ServeDNS(w, cookieQuery("www.example.org.", "0102030405060708"))
	if len(w.raw) != 1 || string(w.raw[0]) != string(signed) {
		t.Fatalf("the signed message was changed: wrote %d raw messages", len(w.raw))
	}
}

// A handler may send one prebuilt message to everyone: the cookie meant for
// one client never reaches another, and the message is left as it was.
func TestMiddlewareLeavesResponseAlone(t *testing.T) {
	nsid := &dns.EDNS0_NSID{Code: dns.EDNS0NSID, Nsid: "6869"}
	for name, build := range map[string]func() *dns.Msg{
		"no OPT": func() *dns.Msg {
			m := new(dns.Msg).SetReply(query("www.example.org."))
			m.Answer = rrs(t, "www.example.org. 300 IN A 192.0.2.1")
			return m
		},
		"OPT with NSID": func() *dns.Msg {
			m := new(dns.Msg).SetReply(query("www.example.org."))
			m.Answer = rrs(t, "www.example.org. 300 IN A 192.0.2.1")
			m.SetEdns0(1232, false)
			m.IsEdns0().Option = []dns.EDNS0{nsid}
			return m
		},
	} {
		t.Run(name, func(t *testing.T) {
			cached := build()
			before := cached.String()
			extra, opt := len(cached.Extra), cached.IsEdns0()
			var options []dns.EDNS0
			if opt != nil {
				options = opt.Option
			}
			h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) { w.WriteMsg(cached) })
			mw := Middleware(rrl.NewRRL(nil), h, Options{Cookies: NewCookies([16]byte{1})})

			a := udpFrom("192.0.2.1")
			mw.ServeDNS(a, cookieQuery("www.example.org.", "a1a1a1a1a1a1a1a1"))
			if got := respCookie(a.last()); len(got) != 48 || got[:16] != "a1a1a1a1a1a1a1a1" {
				t.Errorf("A's cookie %q", got)
			}
			b := udpFrom("198.51.100.9")
			mw.ServeDNS(b, query("www.example.org."))
			if got := respCookie(b.last()); got != "" {
				t.Errorf("B, which sent no cookie, got A's: %q", got)
			}
			if cached.String() != before || len(cached.Extra) != extra || cached.IsEdns0() != opt {
				t.Errorf("the handler's message changed:\n%s\nwas\n%s", cached, before)
			}
			if opt != nil && (len(opt.Option) != len(options) || opt.Option[0] != nsid) {
				t.Errorf("the handler's OPT record changed: %v", opt.Option)
			}
		})
	}
}

// The same, concurrently, for the race detector.
func TestMiddlewareSharedResponseConcurrent(t *testing.T) {
	cached := new(dns.Msg).SetReply(query("www.example.org."))
	cached.Answer = rrs(t, "www.example.org. 300 IN A 192.0.2.1")
	cached.SetEdns0(1232, false)
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) { w.WriteMsg(cached) })
	mw := Middleware(rrl.NewRRL(nil), h, Options{Cookies: NewCookies([16]byte{1})})
	var wg sync.WaitGroup
	var wrong atomic.Int64
	for g := range 4 {
		wg.Go(func() {
			cc := strings.Repeat(string("abcd"[g]), 16)
			w := udpFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(g + 1)}).String())
			for range 200 {
				w.reset()
				mw.ServeDNS(w, cookieQuery("www.example.org.", cc))
				if got := respCookie(w.last()); len(got) != 48 || got[:16] != cc {
					wrong.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if wrong.Load() != 0 || len(cached.IsEdns0().Option) != 0 {
		t.Errorf("%d responses with another client's cookie; handler's options %v", wrong.Load(), cached.IsEdns0().Option)
	}
}

// bigHandler writes a response of many TXT records truncated by the handler
// to what the client advertised, without room for a cookie.
func bigHandler(t *testing.T, raw bool) dns.Handler {
	return dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg).SetReply(r)
		for i := range 40 {
			m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 1},
				Txt: []string{strings.Repeat("x", 20+i)}})
		}
		m.SetEdns0(1232, false)
		m.Truncate(udpSize(r))
		if b, _ := m.Pack(); len(b) < 500 {
			t.Fatalf("the handler's response is too small to test: %d bytes", len(b))
		}
		if !raw {
			w.WriteMsg(m)
			return
		}
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
	})
}

// The cookie added to a response the handler truncated to the client's
// size must not take it over that size.
func TestMiddlewareCookieWithinUDPSize(t *testing.T) {
	for _, raw := range []bool{false, true} {
		w := udpFrom("192.0.2.1")
		mw := Middleware(rrl.NewRRL(nil), bigHandler(t, raw), Options{Cookies: NewCookies([16]byte{1})})
		q := cookieQuery("txt.example.org.", "0102030405060708")
		q.IsEdns0().SetUDPSize(512)
		mw.ServeDNS(w, q)
		var b []byte
		if raw {
			b = w.raw[0]
		} else {
			var err error
			if b, err = w.last().Pack(); err != nil {
				t.Fatal(err)
			}
		}
		m := new(dns.Msg)
		if err := m.Unpack(b); err != nil {
			t.Fatal(err)
		}
		if len(b) > 512 || !m.Truncated || len(respCookie(m)) != 48 {
			t.Errorf("raw %v: %d bytes (client's size 512), TC %v, cookie %q", raw, len(b), m.Truncated, respCookie(m))
		}
	}
	// Over TCP nothing is cut.
	w := tcpFrom("192.0.2.1")
	mw := Middleware(rrl.NewRRL(nil), bigHandler(t, false), Options{Cookies: NewCookies([16]byte{1})})
	q := cookieQuery("txt.example.org.", "0102030405060708")
	q.IsEdns0().SetUDPSize(512)
	mw.ServeDNS(w, q)
	if b, _ := w.last().Pack(); len(b) <= 512 {
		t.Errorf("TCP response cut to %d bytes", len(b))
	}
}

// A handler that packs a compressed message: the middleware's repacked copy
// is compressed too.
func TestMiddlewareRawWriteStaysCompressed(t *testing.T) {
	var orig int
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg).SetReply(r)
		for i := range 20 {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: net.IPv4(192, 0, 2, byte(i))})
		}
		m.SetEdns0(1232, false)
		m.Compress = true
		b, _ := m.Pack()
		orig = len(b)
		w.Write(b)
	})
	w := tcpFrom("192.0.2.1")
	Middleware(rrl.NewRRL(nil), h, Options{Cookies: NewCookies([16]byte{1})}).ServeDNS(w, cookieQuery("a-rather-long-name.with.many.labels.example.org.", "0102030405060708"))
	const cookieLen = 4 + 24 // option code and length, client and server cookie
	if len(w.raw) != 1 || len(w.raw[0]) != orig+cookieLen {
		t.Errorf("handler wrote %d bytes, the middleware sent %d, want %d", orig, len(w.raw[0]), orig+cookieLen)
	}
}

// A cookie under half an hour old, made with the current secret, is sent
// back as it came; an older one, or one made with the previous secret, is
// replaced by a fresh one.
func TestMiddlewareCookieResend(t *testing.T) {
	clock := newTestClock()
	cookies := NewCookies([16]byte{1})
	client := netip.MustParseAddr("192.0.2.1")
	made := func(c *Cookies, age time.Duration) string {
		return issuedCookie(c, client, clock.now().Add(-age))
	}
	old := NewCookies([16]byte{2})
	cookies.SetPrevious([16]byte{2})
	fresh := made(cookies, 0)
	for _, tc := range []struct {
		name   string
		cookie string
		resend bool
	}{
		{"10 minutes old", made(cookies, 10*time.Minute), true},
		{"29 minutes old", made(cookies, 29*time.Minute), true},
		{"31 minutes old", made(cookies, 31*time.Minute), false},
		{"previous secret", made(old, time.Minute), false},
	} {
		w := udpFrom("192.0.2.1")
		h := Middleware(rrl.NewRRL(nil), answerHandler, Options{Cookies: cookies, Now: clock.now})
		h.ServeDNS(w, cookieQuery("www.example.org.", tc.cookie))
		got := respCookie(w.last())
		if tc.resend && got != tc.cookie {
			t.Errorf("%s: got %s, want it sent back", tc.name, got)
		}
		if !tc.resend && got != fresh {
			t.Errorf("%s: got %s, want a fresh cookie %s", tc.name, got, fresh)
		}
	}
}

// The cookie clock is read only for requests that carry a cookie.
func TestMiddlewareClockOnlyForCookies(t *testing.T) {
	var reads int
	now := func() time.Time { reads++; return time.Now() }
	h := Middleware(rrl.NewRRL(nil), answerHandler, Options{Cookies: NewCookies([16]byte{1}), Now: now})
	w := udpFrom("192.0.2.1")
	h.ServeDNS(w, query("www.example.org."))
	h.ServeDNS(w, cookieQuery("www.example.org.", ""))
	if reads != 0 {
		t.Errorf("clock read %d times for requests without a cookie", reads)
	}
	h.ServeDNS(w, cookieQuery("www.example.org.", "0102030405060708"))
	if reads != 1 {
		t.Errorf("clock read %d times for a request with a cookie, want 1", reads)
	}
}

// panicky is a handler that indexes the question, as most do.
func panicky(called *int) dns.Handler {
	return dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		*called++
		answerHandler(w, new(dns.Msg).SetQuestion(r.Question[0].Name, dns.TypeA))
	})
}

// Requests without a question never reach the handler: a cookie-only query
// gets NOERROR and a server cookie, anything else FORMERR.
func TestMiddlewareQuestionless(t *testing.T) {
	cookies := NewCookies([16]byte{1})
	client := netip.MustParseAddr("192.0.2.1")
	noQuestion := func(cookie string) *dns.Msg {
		m := cookieQuery("x.", cookie)
		m.Question = nil
		return m
	}
	for _, tc := range []struct {
		name    string
		cookies *Cookies
		req     *dns.Msg
		rcode   int
		cookie  bool
	}{
		{"client cookie", cookies, noQuestion("0102030405060708"), dns.RcodeSuccess, true},
		{"no cookie", cookies, noQuestion(""), dns.RcodeFormatError, false},
		{"no OPT", cookies, &dns.Msg{MsgHdr: dns.MsgHdr{Id: 7}}, dns.RcodeFormatError, false},
		{"cookies off", nil, noQuestion("0102030405060708"), dns.RcodeFormatError, false},
		{"not a query", cookies, func() *dns.Msg { m := noQuestion("0102030405060708"); m.Opcode = dns.OpcodeNotify; return m }(), dns.RcodeFormatError, true},
	} {
		called := 0
		var ds decisions
		h := Middleware(rrl.NewRRL(nil), panicky(&called), Options{Cookies: tc.cookies, OnDecision: ds.record})
		w := udpFrom("192.0.2.1")
		h.ServeDNS(w, tc.req)
		if called != 0 || w.wrote() != 1 || len(ds.list) != 1 {
			t.Fatalf("%s: handler called %d times, %d written, %d decisions", tc.name, called, w.wrote(), len(ds.list))
		}
		r := roundTrip(t, w.last())
		if r.Rcode != tc.rcode || r.Id != tc.req.Id || len(r.Question) != 0 {
			t.Errorf("%s: reply %v", tc.name, r)
		}
		if got := respCookie(r); tc.cookie != (got != "") {
			t.Errorf("%s: cookie %q", tc.name, got)
		} else if tc.cookie && cookies.Check(cookieQuery("x.", got), client, time.Now()) != CookieValid {
			t.Errorf("%s: the cookie %q does not validate", tc.name, got)
		}
	}
	// Through a real server that accepts such queries.
	called := 0
	srv := startLoopbackAccepting(t, Middleware(rrl.NewRRL(nil), panicky(&called), Options{Cookies: cookies}))
	c := &dns.Client{Timeout: 5 * time.Second}
	r, _, err := c.Exchange(noQuestion("0102030405060708"), srv)
	if err != nil || r.Rcode != dns.RcodeSuccess || len(respCookie(r)) != 48 || called != 0 {
		t.Errorf("cookie-only exchange over UDP: %v, %v, handler called %d times", r, err, called)
	}
}

// startLoopbackAccepting serves h over UDP on 127.0.0.1 with
// AcceptCookieOnly.
func startLoopbackAccepting(t *testing.T, h dns.Handler) string {
	t.Helper()
	return startUDPLoopback(t, &dns.Server{Handler: h, MsgAcceptFunc: AcceptCookieOnly})
}

// Malformed COOKIE options get FORMERR without reaching the handler (RFC
// 7873 section 5.2.2); well-formed ones reach it.
func TestMiddlewareMalformedCookie(t *testing.T) {
	several := cookieQuery("www.example.org.", "0102030405060708")
	several.IsEdns0().Option = append(several.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0807060504030201"})
	for _, tc := range []struct {
		name string
		req  *dns.Msg
		bad  bool
	}{
		{"7 bytes", cookieQuery("www.example.org.", "01020304050607"), true},
		{"9 bytes", cookieQuery("www.example.org.", "010203040506070809"), true},
		{"15 bytes", cookieQuery("www.example.org.", "0102030405060708"+strings.Repeat("00", 7)), true},
		{"41 bytes", cookieQuery("www.example.org.", "0102030405060708"+strings.Repeat("00", 33)), true},
		{"two options", several, true},
		{"8 bytes", cookieQuery("www.example.org.", "0102030405060708"), false},
		{"16 bytes", cookieQuery("www.example.org.", "0102030405060708"+strings.Repeat("00", 8)), false},
		{"40 bytes", cookieQuery("www.example.org.", "0102030405060708"+strings.Repeat("00", 32)), false},
	} {
		called := 0
		var ds decisions
		h := Middleware(rrl.NewRRL(nil), panicky(&called), Options{Cookies: NewCookies([16]byte{1}), OnDecision: ds.record})
		w := udpFrom("192.0.2.1")
		h.ServeDNS(w, tc.req)
		if MalformedCookie(tc.req) != tc.bad {
			t.Errorf("%s: MalformedCookie %v", tc.name, !tc.bad)
		}
		if w.wrote() != 1 {
			t.Fatalf("%s: wrote %d", tc.name, w.wrote())
		}
		r := roundTrip(t, w.last())
		if tc.bad {
			if called != 0 || r.Rcode != dns.RcodeFormatError || respCookie(r) != "" || ds.last().Tuple.AllowanceCategory != rrl.AllowanceError {
				t.Errorf("%s: handler called %d times, reply %v", tc.name, called, r)
			}
		} else if called != 1 || r.Rcode != dns.RcodeSuccess || len(respCookie(r)) != 48 {
			t.Errorf("%s: handler called %d times, reply %v", tc.name, called, r)
		}
	}
}

// A handler that keeps its ResponseWriter and writes after returning
// reaches no one, not even the client of the request the recycled writer
// now serves.
func TestMiddlewareLateWrite(t *testing.T) {
	var kept dns.ResponseWriter
	keeper := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if kept == nil {
			kept = w
		}
		answerHandler(w, r)
	})
	h := Middleware(rrl.NewRRL(nil), keeper, Options{})
	first := udpFrom("192.0.2.1")
	h.ServeDNS(first, query("www.example.org."))
	second := udpFrom("198.51.100.2")
	h.ServeDNS(second, query("www.example.org."))
	first.reset()
	second.reset()
	if err := kept.WriteMsg(new(dns.Msg)); !errors.Is(err, ErrWriterDone) {
		t.Errorf("late WriteMsg: %v, want ErrWriterDone", err)
	}
	if _, err := kept.Write([]byte{0}); !errors.Is(err, ErrWriterDone) {
		t.Errorf("late Write: %v, want ErrWriterDone", err)
	}
	if first.wrote()+second.wrote() != 0 {
		t.Errorf("a late write reached a client")
	}
	if kept.RemoteAddr() == nil || kept.Close() == nil || kept.TsigStatus() == nil {
		t.Error("a stale writer still answers")
	}
	kept.Hijack()
	kept.TsigTimersOnly(true)
	SetWildcardOrigin(kept, "x.")
}

// Late writes racing with the requests that follow, for the race detector.
func TestMiddlewareLateWriteConcurrent(t *testing.T) {
	var kept dns.ResponseWriter
	keeper := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		answerHandler(w, r)
		kept = w
	})
	h := Middleware(rrl.NewRRL(nil), keeper, Options{})
	late := make(chan dns.ResponseWriter, 100)
	var lateErrs atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for w := range late {
			if w.WriteMsg(new(dns.Msg).SetQuestion("late.", dns.TypeA)) != nil {
				lateErrs.Add(1)
			}
		}
	}()
	ws := make([]*fakeWriter, 100)
	for i := range ws {
		ws[i] = udpFrom("192.0.2.1")
		h.ServeDNS(ws[i], query("www.example.org."))
		late <- kept // written to only once its handler has returned
	}
	close(late)
	<-done
	for i, w := range ws {
		if w.wrote() != 1 || w.last().Question[0].Name != "www.example.org." {
			t.Fatalf("client %d got %v", i, w.msgs)
		}
	}
	if lateErrs.Load() != 100 {
		t.Errorf("%d of 100 late writes failed", lateErrs.Load())
	}
}

// oddAddrWriter is a writer whose RemoteAddr is a typed nil or another
// address the middleware cannot read.
type oddAddrWriter struct {
	fakeWriter
	addr net.Addr
}

func (w *oddAddrWriter) RemoteAddr() net.Addr { return w.addr }

// Sources whose address cannot be had are limited as the network 0.0.0.0
// over UDP, as the core documents, and do not panic.
func TestMiddlewareUnreadableAddressLimited(t *testing.T) {
	for _, addr := range []net.Addr{(*net.UDPAddr)(nil), (*net.TCPAddr)(nil), nil, fakeAddr{"unix", "/tmp/sock"}, (*fakePtrAddr)(nil)} {
		lim := newLimiter(t, newTestClock(), "responses-per-second", "1", "slip-ratio", "1")
		var ds decisions
		h := Middleware(lim, answerHandler, Options{OnDecision: ds.record, Cookies: NewCookies([16]byte{1})})
		w := &oddAddrWriter{addr: addr}
		var got []rrl.Action
		for range 3 {
			h.ServeDNS(w, cookieQuery("www.example.org.", "0102030405060708"))
			got = append(got, ds.last().Action)
		}
		if !equalActions(got, []rrl.Action{rrl.Send, rrl.Slip, rrl.Slip}) || !ds.last().UDP || ds.last().Client.IsValid() {
			t.Errorf("%#v: %v, decision %+v", addr, got, ds.last())
		}
		if st := lim.GetStats(false); st.CacheLength == 0 {
			t.Errorf("%#v: nothing accounted", addr)
		}
	}
}
