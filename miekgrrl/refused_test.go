package miekgrrl

import (
	"net/netip"
	"slices"
	"sync"
	"testing"
)

// networks records what Options.RefusedNetwork is told.
type networks struct {
	mu   sync.Mutex
	list []netip.Prefix
}

func (n *networks) record(p netip.Prefix) {
	n.mu.Lock()
	n.list = append(n.list, p)
	n.mu.Unlock()
}

// TestRefusedNetwork: each unproven UDP request a request limit refuses
// is reported with the network of the account that refused it, by the
// middleware and by a reader from DecorateReader alike; TCP requests,
// those let through and those of a proven client are not.
func TestRefusedNetwork(t *testing.T) {
	lim := newLimiter(t, newTestClock(), "requests-per-second", "2", "ipv4-request-prefixes", "18:3")
	var got networks
	opts := Options{RefusedNetwork: got.record}
	h := Middleware(lim, answerHandler, opts)
	for range 4 { // 2 served, 2 refused by the /24's account
		h.ServeDNS(udpFrom("192.0.2.1"), query("www.example.org."))
	}
	h.ServeDNS(udpFrom("192.0.3.1"), query("www.example.org.")) // another /24 of 192.0.0.0/18: its third request
	h.ServeDNS(udpFrom("192.0.4.1"), query("www.example.org.")) // its fourth, refused by the /18
	for range 4 {
		h.ServeDNS(tcpFrom("192.0.2.1"), query("www.example.org.")) // proven: requests-per-second, never reported
	}
	want := []string{"192.0.2.0/24", "192.0.2.0/24", "192.0.0.0/18"}
	if !slices.Equal(prefixStrings(got.list), want) {
		t.Errorf("middleware reported %v, want %v", got.list, want)
	}

	got.list = nil
	src := &packetSource{}
	q := pack(t, query("www.example.org."))
	for range 3 {
		src.add(q, "198.51.100.1")
	}
	readAll(t, DecorateReader(lim, opts)(src))
	if want := []string{"198.51.100.0/24"}; !slices.Equal(prefixStrings(got.list), want) {
		t.Errorf("reader reported %v, want %v", got.list, want)
	}
}

func prefixStrings(ps []netip.Prefix) []string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return s
}
