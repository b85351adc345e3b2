package replay

import (
	"math"
	"net/netip"
	"testing"
)

func TestPeakCounter(t *testing.T) {
	var c peakCounter
	for _, sec := range []int64{10, 10, 10, 11, 11, 10, 12} { // 10 comes late once: it counts in 11
		c.add(sec, 1)
	}
	if c.peak != 3 {
		t.Errorf("peak %d, want 3", c.peak)
	}
}

func TestOutlierBar(t *testing.T) {
	vals := []int64{1, 1, 1, 2, 2, 2, 3, 3, 4, 5} // 90th percentile: 4
	if got := outlierBar(vals, 5); got != 17 {
		t.Errorf("bar %d, want 17 (more than 4 × 4)", got)
	}
	if got := outlierBar([]int64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 5); got != 5 {
		t.Errorf("bar %d, want the least, 5", got)
	}
	if got := outlierBar(vals[:9], 5); got != math.MaxInt64 {
		t.Errorf("bar of 9 values %d: too few to rank, want none", got)
	}
}

func TestPercentile(t *testing.T) {
	for _, c := range []struct {
		vals []int64
		q    float64
		want int64
	}{
		{nil, 0.9, 0},
		{[]int64{7}, 0.9, 7},
		{[]int64{5, 1, 4, 2, 3}, 0.5, 3},
		{[]int64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 0.9, 9},
	} {
		if got := percentile(c.vals, c.q); got != c.want {
			t.Errorf("percentile(%v, %g) = %d, want %d", c.vals, c.q, got, c.want)
		}
	}
}

// TestNameNetworks: of networks far above the rest, only those with an
// attack's shape are named: not a busy resolver (many accounts, ordinary
// sizes), nor a network that asked over TCP.
func TestNameNetworks(t *testing.T) {
	var nets []*netStats
	add := func(s string, req, top, responses, bytes int64, proven bool) {
		n := &netStats{prefix: netip.MustParsePrefix(s), responses: responses, respBytes: bytes, top: top, proven: proven}
		n.requests.peak, n.all.peak = req, req
		nets = append(nets, n)
	}
	for i := range 40 { // enough that the 90th percentile is an ordinary network's
		add(netip.AddrFrom4([4]byte{100, byte(i), 0, 0}).String()+"/24", 2, 5, 20, 2000, false)
	}
	add("198.51.100.0/24", 100, 1000, 1000, 1200000, false) // a reflection: one account, large
	add("192.0.2.0/24", 40, 10, 400, 40000, false)          // a busy resolver: many accounts
	add("203.0.113.0/24", 100, 1000, 1000, 1200000, true)   // heavy, but proven
	sg := &Suggestion{attackSet: map[netip.Prefix]bool{}}
	sg.nameNetworks(nets)
	if len(sg.Attacks) != 1 || sg.Attacks[0].Network != "198.51.100.0/24" {
		t.Errorf("named %v, want only 198.51.100.0/24", sg.Attacks)
	}
}

func TestNoCookieUDPSize(t *testing.T) {
	small := &netStats{prefix: netip.MustParsePrefix("100.0.0.0/24"), maxSize: 300}
	big := &netStats{prefix: netip.MustParsePrefix("198.51.100.0/24"), maxSize: 1200}
	sg := &Suggestion{attackSet: map[netip.Prefix]bool{big.prefix: true}}
	if s := sg.noCookieUDPSize([]*netStats{small, big}); s.Value != "512" {
		t.Errorf("%+v, want 512: only the attack was sent large answers", s)
	}
	sg.attackSet = map[netip.Prefix]bool{}
	if s := sg.noCookieUDPSize([]*netStats{small, big}); s.Value != "0" {
		t.Errorf("%+v, want off: an ordinary network was sent the largest", s)
	}
}
