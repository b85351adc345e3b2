package replay

import (
	"net/netip"
	"testing"
	"time"
)

// fragmentBytes sums what the pending datagrams hold.
func fragmentBytes(d *defragmenter) int {
	n := 0
	for _, g := range d.pending {
		for _, p := range g.parts {
			n += len(p.data)
		}
	}
	return n
}

// A spray of large fragments that never complete, and a datagram sent
// again and again in overlapping fragments, hold no more than the bounds;
// a datagram that follows is still reassembled.
func TestDefragmenterBounded(t *testing.T) {
	skipped := 0
	d := newDefragmenter(func(string) { skipped++ })
	src, dst := netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("192.0.2.53")
	big := make([]byte, 60000) // a multiple of 8, as fragments but the last must be
	at := time.Unix(1000, 0)
	for i := 0; i < 3*maxFragmented; i++ {
		at = at.Add(time.Microsecond)
		d.add(fragmentKey{src, dst, uint32(i), protoUDP}, 0, true, protoUDP, big, at)
		if d.held > maxFragmentBytes {
			t.Fatalf("after %d fragments: %d bytes held, over %d", i+1, d.held, maxFragmentBytes)
		}
	}
	key := fragmentKey{src, dst, 1 << 20, protoUDP}
	for i := 0; i < maxFragments; i++ { // the same first fragment, over and over
		d.add(key, 0, true, protoUDP, big, at)
	}
	if g := d.pending[key]; g == nil || g.held > maxDatagramHeld {
		t.Fatalf("a datagram of overlapping fragments holds more than %d bytes", maxDatagramHeld)
	}
	if got := fragmentBytes(d); got != d.held {
		t.Fatalf("held counted as %d, the datagrams hold %d", d.held, got)
	}
	if skipped == 0 {
		t.Error("no fragment counted as skipped")
	}

	whole := []byte("a datagram in two fragments!")
	k := fragmentKey{src, dst, 7, protoUDP}
	if _, _, ok := d.add(k, 8, false, protoUDP, whole[8:], at); ok {
		t.Fatal("complete with its first fragment missing")
	}
	got, proto, ok := d.add(k, 0, true, protoUDP, whole[:8], at)
	if !ok || string(got) != string(whole) || proto != protoUDP {
		t.Fatalf("reassembled %q %v %v", got, proto, ok)
	}
	if got := fragmentBytes(d); got != d.held {
		t.Fatalf("held counted as %d, the datagrams hold %d", d.held, got)
	}
}
