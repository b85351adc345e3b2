package miekgrrl

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/miekg/dns"
)

// discardWriter is the cheapest dns.ResponseWriter: it keeps nothing, so the
// benchmarks measure the handler and the middleware alone.
type discardWriter struct{ remote net.Addr }

func (w *discardWriter) LocalAddr() net.Addr         { return w.remote }
func (w *discardWriter) RemoteAddr() net.Addr        { return w.remote }
func (w *discardWriter) WriteMsg(*dns.Msg) error     { return nil }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) Close() error                { return nil }
func (w *discardWriter) TsigStatus() error           { return nil }
func (w *discardWriter) TsigTimersOnly(bool)         {}
func (w *discardWriter) Hijack()                     {}

// benchHandler is a trivial handler: it answers with a response built once.
func benchHandler(b *testing.B) (dns.Handler, *dns.Msg) {
	req := query("www.example.org.")
	resp := new(dns.Msg).SetReply(req)
	resp.Answer = rrs(b, "www.example.org. 300 IN A 192.0.2.1")
	resp.Ns = rrs(b, "example.org. 300 IN NS ns1.example.org.")
	return dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		resp.Id = r.Id
		w.WriteMsg(resp)
	}), req
}

// benchLimiter does all the work of finding and charging an account, but
// the rate is so high that clients spread over benchClients networks are
// never limited: the benchmarks measure the common case, a response sent.
// More settings may follow, as keyword-value pairs.
func benchLimiter(b *testing.B, kv ...string) *rrl.RRL {
	cfg := rrl.NewConfig()
	kv = append([]string{"responses-per-second", "1000000", "window", "1"}, kv...)
	for i := 0; i+1 < len(kv); i += 2 {
		if err := cfg.SetValue(kv[i], kv[i+1]); err != nil {
			b.Fatal(err)
		}
	}
	return rrl.NewRRL(cfg)
}

// benchClients is how many client networks (/24) the benchmarks rotate
// through.
const benchClients = 256

func benchWriters() []*discardWriter {
	ws := make([]*discardWriter, benchClients)
	for i := range ws {
		ws[i] = &discardWriter{remote: &net.UDPAddr{IP: net.IPv4(10, 0, byte(i), 1), Port: 5353}}
	}
	return ws
}

// benchClient is the client of the benchmarks that have only one.
var benchClient = &net.UDPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 5353}

// serve is the loop of a benchmark: h answers req from one client.
func serve(b *testing.B, h dns.Handler, req *dns.Msg) {
	w := &discardWriter{remote: benchClient}
	b.ReportAllocs()
	for b.Loop() {
		h.ServeDNS(w, req)
	}
}

// serveRotating is the loop of a benchmark: h answers req from
// benchClients client networks in turn.
func serveRotating(b *testing.B, h dns.Handler, req *dns.Msg) {
	ws := benchWriters()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		h.ServeDNS(ws[i%benchClients], req)
	}
}

func BenchmarkHandlerBare(b *testing.B) {
	h, req := benchHandler(b)
	serveRotating(b, h, req)
}

func BenchmarkHandlerMiddleware(b *testing.B) {
	inner, req := benchHandler(b)
	lim := benchLimiter(b)
	serveRotating(b, Middleware(lim, inner, Options{}), req)
	if st := lim.GetStats(false); st.Actions[rrl.Send] != st.RPS[rrl.AllowanceAnswer] {
		b.Fatalf("some responses were limited: %s", st.String())
	}
}

func BenchmarkHandlerMiddlewareHook(b *testing.B) {
	inner, req := benchHandler(b)
	sent := 0
	h := Middleware(benchLimiter(b), inner, Options{OnDecision: func(d Decision) {
		if d.Action == rrl.Send {
			sent++
		}
	}})
	serveRotating(b, h, req)
	if sent == 0 {
		b.Fatal("the hook saw no response sent")
	}
}

// Many clients, in parallel: the realistic case for the account table.
func BenchmarkHandlerMiddlewareParallel(b *testing.B) {
	inner, req := benchHandler(b)
	h := Middleware(benchLimiter(b), inner, Options{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ws := benchWriters()
		i := 0
		for pb.Next() {
			i++
			h.ServeDNS(ws[i%benchClients], req)
		}
	})
}

func BenchmarkSlipReply(b *testing.B) {
	_, req := benchHandler(b)
	resp := new(dns.Msg).SetReply(req)
	b.ReportAllocs()
	for b.Loop() {
		SlipReply(req, resp, nil, netipAddr(nil), time.Time{})
	}
}

func netipAddr(a net.Addr) netip.Addr {
	ip, _ := clientAddr(a)
	return ip
}

func BenchmarkSlipReplyBadCookie(b *testing.B) {
	c := NewCookies([16]byte{1})
	req := cookieQuery("www.example.org.", testClientCookie)
	resp := new(dns.Msg).SetReply(req)
	client := netip.MustParseAddr("192.0.2.1")
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		SlipReply(req, resp, c, client, now)
	}
}

// One client flooding: almost every response is limited, half of them
// slipped (slip-ratio 2), the rest dropped. This is the path under attack.
func BenchmarkHandlerMiddlewareFlood(b *testing.B) {
	inner, req := benchHandler(b)
	cfg := rrl.NewConfig()
	cfg.SetValue("responses-per-second", "10")
	serve(b, Middleware(rrl.NewRRL(cfg), inner, Options{}), req)
}

// requests-per-second set (high enough that no client is limited): each
// request is charged before the handler, its response after.
func BenchmarkHandlerMiddlewareRequestLimit(b *testing.B) {
	inner, req := benchHandler(b)
	lim := benchLimiter(b, "requests-per-second", "1000000")
	serveRotating(b, Middleware(lim, inner, Options{}), req)
	if st := lim.GetStats(false); st.Actions[rrl.Send] != st.RPS[rrl.AllowanceAnswer] || st.IPReasons[rrl.IPOk] == 0 {
		b.Fatalf("some requests were limited, or none charged: %s", st.String())
	}
}

// The same handler behind the middleware with requests-per-second set, for
// a client within its allowance: the request is charged, the handler runs,
// the response is debited. Compare with FreshHandlerRequestRefused.
func BenchmarkFreshHandlerServed(b *testing.B) {
	lim := benchLimiter(b, "requests-per-second", "1000000")
	serve(b, Middleware(lim, freshHandler(b), Options{}), cookieQuery("www.example.org.", testClientCookie))
	if st := lim.GetStats(false); st.IPReasons[rrl.IPRateLimit] != 0 || st.Actions[rrl.Send] == 0 {
		b.Fatalf("want every request served: %s", st.String())
	}
}

// One client far over requests-per-second (the limiter's clock stopped):
// every request but the first is refused before the handler, whose cost it
// does not pay. Compare with FreshHandlerBare.
func BenchmarkFreshHandlerRequestRefused(b *testing.B) {
	lim := newLimiter(b, newTestClock(), "requests-per-second", "1")
	calls := 0
	inner := freshHandler(b)
	h := Middleware(lim, dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		calls++
		inner.ServeDNS(w, r)
	}), Options{})
	serve(b, h, cookieQuery("www.example.org.", testClientCookie))
	if calls != 1 {
		b.Fatalf("the handler ran %d times, want once", calls)
	}
}

// freshHandler builds its response for each query, with EDNS, as a real
// handler does; it is the base for the cookie benchmarks.
func freshHandler(b *testing.B) dns.Handler {
	answer := rrs(b, "www.example.org. 300 IN A 192.0.2.1")
	return dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg).SetReply(r)
		m.Answer = answer
		m.SetEdns0(1232, false)
		w.WriteMsg(m)
	})
}

func BenchmarkFreshHandlerBare(b *testing.B) {
	serve(b, freshHandler(b), cookieQuery("www.example.org.", testClientCookie))
}

// The same handler behind the middleware, for a client that sends back its
// server cookie: checked, not debited, and sent back (it is young).
func BenchmarkFreshHandlerValidCookie(b *testing.B) {
	benchServerCookie(b, 0)
}

// A client that sends only its client cookie: a fresh server cookie is made
// for every response.
func BenchmarkFreshHandlerClientCookie(b *testing.B) {
	h := Middleware(benchLimiter(b), freshHandler(b), Options{Cookies: NewCookies([16]byte{1})})
	serve(b, h, cookieQuery("www.example.org.", testClientCookie))
}

// A server cookie over half an hour old: valid, but renewed in every
// response.
func BenchmarkFreshHandlerRenewedCookie(b *testing.B) {
	benchServerCookie(b, 40*time.Minute)
}

// benchServerCookie is the loop of the cookie benchmarks: the client sends
// back a server cookie issued age ago.
func benchServerCookie(b *testing.B, age time.Duration) {
	cookies := NewCookies([16]byte{1})
	cookie := issuedCookie(cookies, netipAddr(benchClient), time.Now().Add(-age))
	h := Middleware(benchLimiter(b), freshHandler(b), Options{Cookies: cookies})
	serve(b, h, cookieQuery("www.example.org.", cookie))
}
