package rrl

import (
	"context"
	"encoding/hex"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/coredns/caddy"

	"github.com/coredns/coredns/plugin"
	"github.com/miekg/dns"

	"github.com/dnsrrl/rrl/miekgrrl"
)

// benchWriter is a ResponseWriter that costs nothing: a fixed UDP address
// and writes that go nowhere (test.ResponseWriter allocates its address on
// every call, which would be charged to the plugin).
type benchWriter struct {
	addr *net.UDPAddr
	n    int
}

func (w *benchWriter) LocalAddr() net.Addr         { return w.addr }
func (w *benchWriter) RemoteAddr() net.Addr        { return w.addr }
func (w *benchWriter) Network() string             { return "udp" }
func (w *benchWriter) WriteMsg(*dns.Msg) error     { w.n++; return nil }
func (w *benchWriter) Write(b []byte) (int, error) { w.n++; return len(b), nil }
func (w *benchWriter) Close() error                { return nil }
func (w *benchWriter) TsigStatus() error           { return nil }
func (w *benchWriter) TsigTimersOnly(bool)         {}
func (w *benchWriter) Hijack()                     {}

// trivialNext answers every query with the same prebuilt message, so that
// what is measured is the plugin and not the answer's construction.
func trivialNext() plugin.Handler {
	m := new(dns.Msg)
	m.SetQuestion("www.example.org.", dns.TypeA)
	m.Response, m.Authoritative = true, true
	a, _ := dns.NewRR("www.example.org. 300 IN A 192.0.2.1")
	m.Answer = []dns.RR{a}
	return plugin.HandlerFunc(func(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
		w.WriteMsg(m)
		return dns.RcodeSuccess, nil
	})
}

// benchClients spreads the load over 256 networks, as real traffic is, and
// keeps every account in credit so that each query takes the full Send path.
func benchClients() []*benchWriter {
	ws := make([]*benchWriter, 256)
	for i := range ws {
		ws[i] = &benchWriter{addr: &net.UDPAddr{IP: net.IPv4(127, 1, byte(i), 1), Port: 5300}}
	}
	return ws
}

func runBench(b *testing.B, h plugin.Handler) {
	ws := benchClients()
	r := query("www.example.org.", dns.TypeA)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		h.ServeDNS(ctx, ws[i&255], r)
	}
}

// BenchmarkTrivial is the baseline: the next plugin alone.
func BenchmarkTrivial(b *testing.B) { runBench(b, trivialNext()) }

// BenchmarkRRL is the same through rrl, with limits too high to bite; the
// difference from BenchmarkTrivial is the plugin's cost per query.
func BenchmarkRRL(b *testing.B) {
	h := testHandler(b, "{\n responses-per-second 1000000\n}", trivialNext(), nil)
	runBench(b, h)
}

// BenchmarkRRLAllPerSecond adds the per-network all-per-second account.
func BenchmarkRRLAllPerSecond(b *testing.B) {
	h := testHandler(b, "{\n responses-per-second 1000000\n all-per-second 1000000\n}", trivialNext(), nil)
	runBench(b, h)
}

// BenchmarkRRLProtections adds the protections beyond BIND: three request
// prefixes, nocookie-udp-size (with the answer under it) and
// all-bytes-per-second, which measure each response.
func BenchmarkRRLProtections(b *testing.B) {
	h := testHandler(b, "{\n responses-per-second 1000000\n ipv4-request-prefixes 32:1000000 24:1000000 18:1000000\n nocookie-udp-size 512\n all-bytes-per-second 1000000000\n}", trivialNext(), nil)
	runBench(b, h)
}

// BenchmarkRRLParallel measures contention between cores.
func BenchmarkRRLParallel(b *testing.B) {
	h := testHandler(b, "{\n responses-per-second 1000000\n}", trivialNext(), nil)
	ws := benchClients()
	r := query("www.example.org.", dns.TypeA)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		i := 0
		for pb.Next() {
			h.ServeDNS(ctx, ws[i&255], r)
			i++
		}
	})
}

// TestAllocations holds the plugin to its budget of allocations per query
// on the path every answered query takes.
func TestAllocations(t *testing.T) {
	ws := benchClients()
	r := query("www.example.org.", dns.TypeA)
	ctx := context.Background()
	base := testing.AllocsPerRun(200, func() { trivialNext().ServeDNS(ctx, ws[0], r) })
	next := trivialNext()
	baseline := testing.AllocsPerRun(200, func() { next.ServeDNS(ctx, ws[0], r) })
	_ = base
	h := testHandler(t, "{\n responses-per-second 1000000\n}", next, nil)
	i := 0
	with := testing.AllocsPerRun(200, func() { h.ServeDNS(ctx, ws[i&255], r); i++ })
	if added := with - baseline; added > 4 {
		t.Errorf("rrl adds %.1f allocations per query, budget 4", added)
	}
	// Measuring each response for nocookie-udp-size and
	// all-bytes-per-second, and three request prefixes, fit the same budget.
	h = testHandler(t, "{\n responses-per-second 1000000\n ipv4-request-prefixes 32:1000000 24:1000000 18:1000000\n nocookie-udp-size 512\n all-bytes-per-second 1000000000\n}", next, nil)
	with = testing.AllocsPerRun(200, func() { h.ServeDNS(ctx, ws[i&255], r); i++ })
	if added := with - baseline; added > 4 {
		t.Errorf("with the protections beyond BIND rrl adds %.1f allocations per query, budget 4", added)
	}
}

// BenchmarkRRLEDNS is BenchmarkRRL with an OPT record in the query, as
// resolvers send: the cookie check and a clock reading are added.
func BenchmarkRRLEDNS(b *testing.B) {
	h := testHandler(b, "{\n responses-per-second 1000000\n}", trivialNext(), nil)
	ws := benchClients()
	r := query("www.example.org.", dns.TypeA)
	r.SetEdns0(1232, true)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.ServeDNS(ctx, ws[i&255], r)
	}
}

// cookieQueries returns a query for each bench client with a client cookie,
// and with a valid server cookie for that client when valid is set.
func cookieQueries(b *testing.B, h *RRL, ws []*benchWriter, valid bool) []*dns.Msg {
	cc := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	rs := make([]*dns.Msg, len(ws))
	for i, w := range ws {
		cookie := hex.EncodeToString(cc)
		if valid {
			client, _ := netip.AddrFromSlice(w.addr.IP)
			s := h.cookies.ServerCookie(cc, client.Unmap(), time.Now())
			cookie += hex.EncodeToString(s[:])
		}
		rs[i] = withCookie(query("www.example.org.", dns.TypeA), cookie)
	}
	want := miekgrrl.CookieClientOnly
	if valid {
		want = miekgrrl.CookieValid
	}
	if got := h.cookies.Check(rs[0], netip.AddrFrom4([4]byte{127, 1, 0, 1}), time.Now()); got != want {
		b.Fatalf("cookie state %v, want %v", got, want)
	}
	return rs
}

func runCookieBench(b *testing.B, valid bool) {
	h := testHandler(b, "{\n responses-per-second 1000000\n}", trivialNext(), nil)
	ws := benchClients()
	rs := cookieQueries(b, h, ws, valid)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.ServeDNS(ctx, ws[i&255], rs[i&255])
	}
}

// BenchmarkRRLCookieValid: queries with a valid server cookie, which are
// checked and answered unlimited, with their own server cookie sent back
// (it is young).
func BenchmarkRRLCookieValid(b *testing.B) { runCookieBench(b, true) }

// BenchmarkRRLClientCookie: queries with a client cookie only, which are
// charged and answered with a server cookie.
func BenchmarkRRLClientCookie(b *testing.B) { runCookieBench(b, false) }

// BenchmarkRRLTwoListeners: one block on two listeners, queries alternating
// between them, as with "bind 127.0.0.1 ::1".
func BenchmarkRRLTwoListeners(b *testing.B) {
	h := testHandler(b, "{\n responses-per-second 1000000\n}", trivialNext(), nil)
	ws := benchClients()
	r := query("www.example.org.", dns.TypeA)
	ctxs := serverContexts()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.ServeDNS(ctxs[i&1], ws[i&255], r)
	}
}

// BenchmarkRRLManyZones: a block with 130 zones (a reverse /9 is 128), which
// matchZone looks up by suffix.
func BenchmarkRRLManyZones(b *testing.B) {
	c := caddy.NewTestController("dns", "rrl 10.0.0.0/9 example.org sub.example.org {\n responses-per-second 1000000\n}")
	c.ServerBlockKeys = []string{"10.in-addr.arpa.:53", "example.org.:53"}
	h, err := parse(c)
	if err != nil {
		b.Fatal(err)
	}
	h.Next = trivialNext()
	runBench(b, h)
}
