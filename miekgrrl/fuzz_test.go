package miekgrrl

import (
	"encoding/hex"
	"net/netip"
	"testing"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/miekg/dns"
)

// fuzzSeeds are packed responses of every kind, for the fuzzers to start
// from.
func fuzzSeeds(f *testing.F) [][]byte {
	var out [][]byte
	add := func(req, resp *dns.Msg) {
		resp.SetEdns0(1232, true)
		if b, err := resp.Pack(); err == nil {
			out = append(out, b)
		}
	}
	add(response("www.example.org.", dns.TypeA, 0, rrs(f, "www.example.org. 300 IN A 192.0.2.1", sigA), nil, nil))
	add(response("foo.bar.example.org.", dns.TypeA, 0, rrs(f, "foo.bar.example.org. 300 IN A 192.0.2.1", sigWild), nil, nil))
	add(response("x.example.org.", dns.TypeMX, 0, nil, rrs(f, soaLine, "*.example.org. 3600 IN NSEC www.example.org. A RRSIG NSEC"), nil))
	add(response("www.child.example.org.", dns.TypeA, 0, nil, rrs(f, "child.example.org. 3600 IN NS ns1.child.example.org."), rrs(f, "ns1.child.example.org. 3600 IN A 192.0.2.53")))
	add(response("x.example.org.", dns.TypeA, dns.RcodeNameError, nil, rrs(f, soaLine), nil))
	add(response("x.example.org.", dns.TypeA, dns.RcodeServerFailure, nil, nil, nil))
	q := cookieQuery("x.", "0102030405060708")
	q.Question = nil
	if b, err := q.Pack(); err == nil {
		out = append(out, b)
	}
	return out
}

// FuzzTuple feeds arbitrary messages to Tuple and SlipReply: they must not
// panic, must classify by the rcode as documented, and the slip reply must
// pack.
func FuzzTuple(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, "")
		f.Add(s, "example.org.")
	}
	cookies := NewCookies([16]byte{1})
	client := netip.MustParseAddr("192.0.2.1")
	f.Fuzz(func(t *testing.T, data []byte, origin string) {
		m := new(dns.Msg)
		if m.Unpack(data) != nil {
			return
		}
		for _, req := range []*dns.Msg{nil, m} {
			tu := Tuple(req, m, origin)
			switch {
			case m.Rcode == dns.RcodeNameError && tu.AllowanceCategory != rrl.AllowanceNXDomain,
				m.Rcode != dns.RcodeSuccess && m.Rcode != dns.RcodeNameError && tu.AllowanceCategory != rrl.AllowanceError,
				m.Rcode == dns.RcodeSuccess && tu.AllowanceCategory >= rrl.AllowanceNXDomain:
				t.Fatalf("rcode %d classified %v", m.Rcode, tu.AllowanceCategory)
			case tu.AllowanceCategory != rrl.AllowanceError && tu.SalientName == "":
				t.Fatalf("%v without a name", tu.AllowanceCategory)
			}
			for _, c := range []*Cookies{nil, cookies} {
				r := SlipReply(req, m, c, client, time.Unix(1700000000, 0))
				if r == nil {
					t.Fatal("no slip reply")
				}
				if _, err := r.Pack(); err != nil {
					t.Fatalf("slip reply does not pack: %v\n%v", err, r)
				}
			}
		}
	})
}

// FuzzCookie feeds arbitrary COOKIE options, and arbitrary messages, to the
// cookie code: no panics, lengths classified as RFC 7873 says, and a cookie
// made for any client cookie validates.
func FuzzCookie(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, []byte(nil))
	f.Add(make([]byte, 24), []byte(nil))
	f.Add(make([]byte, 41), []byte(nil))
	for _, s := range fuzzSeeds(f) {
		f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, s)
	}
	c := NewCookies([16]byte{5})
	c.SetPrevious([16]byte{6})
	client := netip.MustParseAddr("2001:db8::5")
	now := time.Unix(1700000000, 0)
	f.Fuzz(func(t *testing.T, cookie []byte, data []byte) {
		req := cookieQuery("x.", "")
		opt := req.IsEdns0()
		opt.Option = append(opt.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: hex.EncodeToString(cookie)})
		st := c.Check(req, client, now)
		n := len(cookie)
		switch {
		case n == 8 && st != CookieClientOnly,
			n != 8 && st == CookieClientOnly,
			n != 24 && st == CookieValid,
			(n < 8 || (n > 8 && n < 16) || n > 40) && st != CookieBad:
			t.Fatalf("%d-byte cookie: %v", n, st)
		}
		if wellFormed := n == 8 || (n >= 16 && n <= 40); MalformedCookie(req) == wellFormed {
			t.Fatalf("%d-byte cookie: MalformedCookie %v", n, !wellFormed)
		}
		resp := new(dns.Msg).SetReply(req)
		c.AddServerCookie(req, resp, client, now)
		if n == 8 || (n >= 16 && n <= 40) {
			if got := c.Check(cookieQuery("x.", respCookie(resp)), client, now); got != CookieValid {
				t.Fatalf("fresh cookie for %x: %v", cookie, got)
			}
		}

		// Request decodes once what Check and MalformedCookie decode apart,
		// and Reply gives a cookie that validates.
		clock := func() time.Time { return now }
		rc := c.Request(req, client, clock)
		if rc.State() != st || rc.Malformed() != MalformedCookie(req) {
			t.Fatalf("%d-byte cookie: Request %v, malformed %v; Check %v", n, rc.State(), rc.Malformed(), st)
		}
		if got := respCookie(rc.Reply(new(dns.Msg).SetReply(req), true)); !rc.Malformed() {
			if c.Check(cookieQuery("x.", got), client, now) != CookieValid {
				t.Fatalf("reply cookie %s for %x does not validate", got, cookie)
			}
		} else if got != "" {
			t.Fatalf("reply cookie %s for a malformed option", got)
		}

		m := new(dns.Msg)
		if m.Unpack(data) != nil {
			return
		}
		c.Check(m, client, now)
		r := new(dns.Msg)
		c.AddServerCookie(m, r, client, now)
		if _, err := r.Pack(); err != nil {
			t.Fatalf("response with cookie does not pack: %v", err)
		}
		mc := c.Request(m, client, clock)
		for _, out := range []*dns.Msg{mc.Reply(new(dns.Msg).SetReply(m), true), mc.SlipReply(nil)} {
			if _, err := out.Pack(); err != nil {
				t.Fatalf("reply does not pack: %v", err)
			}
		}
	})
}

// FuzzMiddleware serves arbitrary requests, each a few times so that the
// request and response limits are crossed, over UDP or TCP, with a valid
// server cookie or as they come, in report-only mode or not. It checks
// what the request limit promises: a request it refuses never reaches the
// handler, gets nothing written, and closes a TCP connection; every request
// that reaches the handler was let through (or report-only); a response
// exempt by its cookie is sent and reports RTNotReached; what is written
// packs.
func FuzzMiddleware(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		for flags := range byte(8) {
			f.Add(s, flags)
		}
	}
	if b, err := cookieQuery("www.example.org.", "0102").Pack(); err == nil {
		f.Add(b, byte(0)) // a malformed cookie
	}
	f.Fuzz(func(t *testing.T, data []byte, flags byte) {
		req := new(dns.Msg)
		if req.Unpack(data) != nil {
			return
		}
		udp, reportOnly, valid := flags&1 == 0, flags&2 != 0, flags&4 != 0
		clock := newTestClock()
		lim := newLimiter(t, clock, "requests-per-second", "1", "proven-requests-per-second", "2",
			"responses-per-second", "1", "slip-ratio", "1")
		cookies := NewCookies([16]byte{9})
		if valid {
			client := netip.MustParseAddr("192.0.2.1")
			if findOPT(req) == nil {
				req.SetEdns0(1232, false)
			}
			opt := findOPT(req)
			c := &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: issuedCookie(cookies, client, clock.now())}
			opt.Option = withCookie(opt.Option, c, nil)
		}
		calls := 0
		handler := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
			calls++
			answerHandler(w, r)
		})
		var ds decisions
		h := Middleware(lim, handler, Options{Cookies: cookies, ReportOnly: reportOnly, OnDecision: ds.record, Now: clock.now})
		for i := range 4 {
			w := udpFrom("192.0.2.1")
			if !udp {
				w = tcpFrom("192.0.2.1")
			}
			before, n := calls, len(ds.list)
			h.ServeDNS(w, req)
			if len(ds.list) > n+1 {
				t.Fatalf("request %d: %d decisions", i, len(ds.list)-n)
			}
			for _, m := range w.msgs {
				if _, err := m.Pack(); err != nil {
					t.Fatalf("request %d: written message does not pack: %v", i, err)
				}
			}
			if len(ds.list) == n {
				continue // served, nothing written
			}
			d := ds.last()
			switch {
			case d.RequestDropped && (d.Action != rrl.Drop || d.RTReason != rrl.RTNotReached || d.Response != nil):
				t.Fatalf("request %d refused: %+v", i, d)
			case d.RequestDropped && !reportOnly && (calls != before || w.wrote() != 0 || (w.closed == 1) == udp):
				t.Fatalf("request %d refused: handler called %d times, wrote %d, closed %d", i, calls-before, w.wrote(), w.closed)
			case !d.Limited && (d.Action != rrl.Send || d.RTReason != rrl.RTNotReached || d.Cookie != CookieValid):
				t.Fatalf("request %d exempt by its cookie: %+v", i, d)
			case !d.RequestDropped && w.closed != 0:
				t.Fatalf("request %d served, and its connection closed", i)
			}
		}
	})
}
