package replay

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/dnsrrl/rrl"
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
			act := rrl.Send
			if lim {
				act = rrl.Drop
				if s%2 == 0 {
					act = rrl.Slip
				}
				limited++
			} else {
				sent++
			}
			tb.add(t0.Add(time.Duration(s)*time.Second), net(n), act, 10)
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
	var gs, gl, gsd, gc int64
	for i := range tl.Sent {
		gs, gl, gsd, gc = gs+tl.Sent[i], gl+tl.Limited[i], gsd+tl.Slipped[i]+tl.Dropped[i], gc+tl.BytesCut[i]
	}
	if gs != sent || gl != limited || gsd != limited || gc != 10*(sent+limited) {
		t.Errorf("sent %d limited %d (slipped and dropped %d) bytes cut %d, want %d, %d and %d", gs, gl, gsd, gc, sent, limited, 10*(sent+limited))
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

// Slipped, dropped, refused and bytes cut are series of their own, for the
// network too, in the bucket of their time.
func TestTimelineSeries(t *testing.T) {
	tb := newTimelineBuilder()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := netip.MustParsePrefix("192.0.2.0/24")
	tb.add(t0, n, rrl.Send, 0)
	tb.add(t0.Add(time.Second), n, rrl.Slip, 40)
	tb.add(t0.Add(2*time.Second), n, rrl.Drop, 100)
	tb.refuse(t0.Add(3*time.Second), n)
	tl := tb.build([]*NetworkEntry{{Network: n.String(), prefix: n}}, 5)
	want := map[string][]int64{
		"sent": {1, 0, 0, 0}, "slipped": {0, 1, 0, 0}, "dropped": {0, 0, 1, 0}, "refused": {0, 0, 0, 1}, "bytes cut": {0, 40, 100, 0},
		"network slipped": {0, 1, 0, 0}, "network dropped": {0, 0, 1, 0}, "network refused": {0, 0, 0, 1},
	}
	got := map[string][]int64{"sent": tl.Sent, "slipped": tl.Slipped, "dropped": tl.Dropped, "refused": tl.Refused, "bytes cut": tl.BytesCut}
	if len(tl.Networks) == 1 {
		ns := tl.Networks[0]
		got["network slipped"], got["network dropped"], got["network refused"] = ns.Slipped, ns.Dropped, ns.Refused
	}
	for k, w := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(w) {
			t.Errorf("%s: %v, want %v", k, got[k], w)
		}
	}
}
