package rrl

import (
	"testing"

	"github.com/coredns/caddy"
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
