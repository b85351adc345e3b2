package replay

import (
	"net/netip"
	"testing"
	"time"
)

// Over a long capture the steps grow, the buckets stay within bounds and
// no response is lost; the tracked networks are the most limited ones.
func TestTimeline(t *testing.T) {
	tb := newTimelineBuilder()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	net := func(i int) netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 24) }
	var sent, limited int64
	for s := 0; s < 3*3600; s++ { // three hours, a response a second each from 40 networks
		for n := 0; n < 40; n++ {
			lim := n < 3 || (n < 30 && s%100 == 0) // networks 0-2 always limited, others now and then
			tb.add(t0.Add(time.Duration(s)*time.Second), net(n), lim)
			if lim {
				limited++
			} else {
				sent++
			}
		}
	}
	var top []*NetworkEntry
	for n := 0; n < 5; n++ {
		top = append(top, &NetworkEntry{Network: net(n).String(), prefix: net(n)})
	}
	tl := tb.build(top, 5)
	if len(tl.Sent) > maxBuckets || len(tl.Sent) < maxBuckets/2 || tl.Step != 16 {
		t.Errorf("%d buckets of %g s", len(tl.Sent), tl.Step)
	}
	var gs, gl int64
	for i := range tl.Sent {
		gs, gl = gs+tl.Sent[i], gl+tl.Limited[i]
	}
	if gs != sent || gl != limited {
		t.Errorf("sent %d limited %d, want %d and %d", gs, gl, sent, limited)
	}
	if len(tl.Networks) < 3 {
		t.Fatalf("%d networks charted", len(tl.Networks))
	}
	for i := 0; i < 3; i++ {
		if tl.Networks[i].Network != net(i).String() {
			t.Errorf("network %d charted is %s", i, tl.Networks[i].Network)
		}
	}
}
