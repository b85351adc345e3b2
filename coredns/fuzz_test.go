package rrl

import (
	"context"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
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

// FuzzServeDNS runs arbitrary queries through a block with request limits,
// response limits and cookies, over UDP and TCP: ServeDNS must never panic,
// must write at most one message over UDP, and must return an rcode that
// leaves no second write to the server.
//
//	go test -run XXX -fuzz FuzzServeDNS -fuzztime 30s ./coredns
func FuzzServeDNS(f *testing.F) {
	for _, m := range []*dns.Msg{
		query("www.example.org.", dns.TypeA),
		withCookie(query("www.example.org.", dns.TypeA), "0102030405060708"),
		withCookie(query("www.example.org.", dns.TypeA), "0102"),
		withCookie(query("nope.example.org.", dns.TypeAAAA), "0102030405060708010000006b0e3aac3f91be3154028329"),
		query("other.net.", dns.TypeA),
	} {
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
	}
	// zoneNext wants a question; rrl passes a query without one on.
	next := plugin.HandlerFunc(func(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
		if len(r.Question) == 0 {
			return dns.RcodeFormatError, nil
		}
		return zoneNext(ctx, w, r)
	})
	h := testHandler(f, "{\n responses-per-second 2\n requests-per-second 3\n proven-requests-per-second 5\n all-per-second 10\n slip-ratio 1\n}", next, newClock())
	f.Fuzz(func(t *testing.T, wire []byte, tcp bool) {
		r := new(dns.Msg)
		if r.Unpack(wire) != nil {
			return
		}
		w := &capture{ResponseWriter: test.ResponseWriter{RemoteIP: "127.0.1.1", TCP: tcp}}
		rcode, _ := h.ServeDNS(context.Background(), w, r)
		if !tcp && len(w.msgs) > 1 {
			t.Fatalf("%d messages over UDP for %v", len(w.msgs), r)
		}
		if len(r.Question) > 0 && h.matchZone(r.Question[0].Name) >= 0 && !plugin.ClientWrite(rcode) {
			t.Fatalf("rcode %d for a query in the zone leaves a write to the server", rcode)
		}
	})
}
