package rrl

import (
	"context"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"

	"github.com/dnsrrl/rrl/miekgrrl"
)

// FuzzParse feeds arbitrary Corefile text to the parser: it must return a
// handler or an error, never panic, and never hand back a handler without
// zones.
//
//	go test -run XXX -fuzz FuzzParse -fuzztime 30s ./coredns
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"rrl",
		"rrl example.org {\n responses-per-second 10\n}",
		"rrl {\n window 15\n ipv4-prefix-length 24\n ipv6-prefix-length 56\n slip-ratio 2\n}",
		"rrl {\n exempt-clients 192.0.2.0/24 2001:db8::/32\n report-only\n}",
		"rrl {\n cookie-secret 000102030405060708090a0b0c0d0e0f\n qps-scale 100\n all-per-second 50\n}",
		"rrl {\n max-table-size 1\n requests-per-second 0.5\n log-only\n}",
		"rrl {\n requests-per-second 5\n proven-requests-per-second 50\n}",
		"rrl . {\n errors-per-second 1e3\n}",
		"rrl {\n ipv4-request-prefixes 32:5 20:400 18:1200\n ipv6-request-prefixes 128:5,64:50,48:800\n}",
		"rrl {\n nocookie-udp-size 512\n all-bytes-per-second 20000\n}",
		"rrl {\n ipv4-request-prefixes 33:5 32:x\n nocookie-udp-size 127\n}",
		"rrl {\n window\n}",
		"rrl {\n {\n}",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, input string) {
		c := caddy.NewTestController("dns", input)
		c.ServerBlockKeys = []string{"example.org.:53"}
		h, err := parse(c)
		if err == nil && (h == nil || len(h.Zones) == 0) {
			t.Fatalf("%q: no error, but handler %v", input, h)
		}
	})
}

// FuzzServeDNS runs arbitrary queries through a block with request limits
// (request prefixes too), response limits (nocookie-udp-size and
// all-bytes-per-second too) and cookies, over UDP and TCP: ServeDNS must never panic,
// must write at most one message over UDP, must answer a malformed COOKIE
// option with FORMERR when it answers, and must return an rcode that leaves
// no second write to the server. The time since the previous query is part
// of the input (gap, in hundredths of a second; the limiter's clock moves
// by it), so that queries both pass the request limit and are refused: with
// the clock standing still, every query after the first few would be
// refused before the response path is reached.
//
//	go test -run XXX -fuzz FuzzServeDNS -fuzztime 30s ./coredns
func FuzzServeDNS(f *testing.F) {
	// zoneNext wants a question; rrl passes a query without one on.
	next := plugin.HandlerFunc(func(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
		if len(r.Question) == 0 {
			return dns.RcodeFormatError, nil
		}
		return zoneNext(ctx, w, r)
	})
	clk := newClock()
	h := testHandler(f, "{\n responses-per-second 2\n requests-per-second 3\n proven-requests-per-second 5\n all-per-second 10\n slip-ratio 1\n ipv4-request-prefixes 32:4 16:6\n nocookie-udp-size 128\n all-bytes-per-second 2000\n}", next, clk)
	// A server cookie of this handler for the fuzzed client, valid while the
	// fuzzing lasts, so that the cookie-exempt path is a seed too.
	valid := serverCookie(f, h, "127.0.1.1")
	for _, m := range []*dns.Msg{
		query("www.example.org.", dns.TypeA),
		withCookie(query("www.example.org.", dns.TypeA), "0102030405060708"),
		withCookie(query("www.example.org.", dns.TypeA), "0102"),
		withCookie(query("www.example.org.", dns.TypeA), valid),
		withCookie(query("nope.example.org.", dns.TypeAAAA), "0102030405060708010000006b0e3aac3f91be3154028329"),
		query("other.net.", dns.TypeA),
	} {
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		for _, gap := range []uint8{0, 40, 100} { // 0, 0.4 and 1 s
			f.Add(b, false, gap)
			f.Add(b, true, gap)
		}
	}
	f.Fuzz(func(t *testing.T, wire []byte, tcp bool, gap uint8) {
		r := new(dns.Msg)
		if r.Unpack(wire) != nil {
			return
		}
		clk.advance(time.Duration(gap) * 10 * time.Millisecond)
		w := &capture{ResponseWriter: test.ResponseWriter{RemoteIP: "127.0.1.1", TCP: tcp}}
		rcode, _ := h.ServeDNS(context.Background(), w, r)
		if !tcp && len(w.msgs) > 1 {
			t.Fatalf("%d messages over UDP for %v", len(w.msgs), r)
		}
		inZone := len(r.Question) > 0 && h.matchZone(r.Question[0].Name) >= 0
		if inZone && !plugin.ClientWrite(rcode) {
			t.Fatalf("rcode %d for a query in the zone leaves a write to the server", rcode)
		}
		if inZone && miekgrrl.MalformedCookie(r) && len(w.msgs) > 0 && w.msgs[0].Rcode != dns.RcodeFormatError {
			t.Fatalf("a malformed COOKIE option answered %s, want FORMERR: %v", dns.RcodeToString[w.msgs[0].Rcode], r)
		}
	})
}
