package replay

import (
	"encoding/binary"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// sprayClient is the i-th spoofed client of a spray.
func sprayClient(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), uint16(1024+i%50000))
}

// heldBytes sums what the flows hold, as the reassembler should count it.
func heldBytes(r *reassembler) int {
	n := 0
	for _, f := range r.flows {
		n += f.bytes()
	}
	return n
}

// A spray of spoofed segments, each opening a flow with the first bytes of
// a message that never completes, holds no more than maxHeldTotal in all,
// counts the flows it gives up, and leaves a real connection that follows
// it reassembled.
func TestReassemblerSprayBounded(t *testing.T) {
	skipped := map[string]int{}
	var msgs []*Message
	r := newReassembler(func(s string) { skipped[s]++ }, func(m *Message) {
		c := *m
		c.Wire = append([]byte(nil), m.Wire...)
		msgs = append(msgs, &c)
	})
	server := netip.MustParseAddrPort("192.0.2.53:53")
	at := time.Unix(1000, 0)
	payload := make([]byte, 1400)
	binary.BigEndian.PutUint16(payload, 0xffff) // a 65,535-byte message, never finished
	const spray = 120000                        // 168 MB of incomplete messages
	for i := 0; i < spray; i++ {
		at = at.Add(time.Microsecond)
		r.segment(&tcpSegment{client: sprayClient(i), server: server, seq: uint32(i), payload: payload, at: at})
		if r.held > maxHeldTotal {
			t.Fatalf("after %d segments: %d bytes held, over %d", i+1, r.held, maxHeldTotal)
		}
	}
	if got := heldBytes(r); got != r.held {
		t.Fatalf("held counted as %d, the flows hold %d", r.held, got)
	}
	if len(r.flows) > maxFlows {
		t.Errorf("%d flows, over %d", len(r.flows), maxFlows)
	}
	if skipped[SkipTCPOverflow] == 0 {
		t.Errorf("skipped %v: no flow given up over the limit", skipped)
	}

	// A real query split over two segments, after the spray.
	q := []byte{0, 14, 0xab, 0xcd, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}
	client := netip.MustParseAddrPort("203.0.113.9:4000")
	r.segment(&tcpSegment{client: client, server: server, flags: tcpSYN, seq: 99, at: at})
	r.segment(&tcpSegment{client: client, server: server, seq: 100, payload: q[:5], at: at})
	r.segment(&tcpSegment{client: client, server: server, seq: 105, payload: q[5:], at: at, flags: tcpFIN})
	if len(msgs) != 1 || string(msgs[0].Wire) != string(q[2:]) || msgs[0].Client != client {
		t.Fatalf("messages after the spray: %v", msgs)
	}
	if got := heldBytes(r); got != r.held {
		t.Fatalf("held counted as %d, the flows hold %d", r.held, got)
	}
}

// A flow that reassembled a large message does not keep its buffer.
func TestReassemblerReleasesLargeBuffer(t *testing.T) {
	r := newReassembler(func(string) {}, func(*Message) {})
	client, server := netip.MustParseAddrPort("203.0.113.9:4000"), netip.MustParseAddrPort("192.0.2.53:53")
	msg := make([]byte, 2+30000)
	binary.BigEndian.PutUint16(msg, 30000)
	for off := 0; off < len(msg); off += 1000 {
		end := min(off+1000, len(msg))
		r.segment(&tcpSegment{client: client, server: server, seq: uint32(off), payload: msg[off:end], at: time.Unix(1, 0)})
	}
	f := r.flows[flowKey{client, server, false}]
	if f == nil || f.bytes() > keepBuf || r.held != f.bytes() {
		t.Fatalf("flow %v holds %d bytes, %d counted; want at most %d", f != nil, f.bytes(), r.held, keepBuf)
	}
}

// When more flows are open than maxFlows, the ones evicted are the least
// recently seen, the same on every run.
func TestReassemblerEvictsOldest(t *testing.T) {
	run := func() []flowKey {
		r := newReassembler(func(string) {}, func(*Message) {})
		server := netip.MustParseAddrPort("192.0.2.53:53")
		at := time.Unix(1000, 0)
		for i := 0; i < maxFlows+10; i++ {
			at = at.Add(time.Microsecond)
			r.segment(&tcpSegment{client: sprayClient(i), server: server, seq: 1, payload: []byte{0, 20, 1}, at: at})
		}
		return slices.SortedFunc(maps.Keys(r.flows), func(a, b flowKey) int { return a.client.Compare(b.client) })
	}
	first := run()
	if len(first) > maxFlows {
		t.Fatalf("%d flows, over %d", len(first), maxFlows)
	}
	oldestKept := slices.MinFunc(first, func(a, b flowKey) int { return a.client.Compare(b.client) })
	if want := sprayClient(maxFlows / 8); oldestKept.client != want {
		t.Errorf("the oldest flow kept is %v, want %v: the first eighth evicted", oldestKept.client, want)
	}
	if !slices.Equal(first, run()) {
		t.Error("two runs kept different flows")
	}
}

// Over the memory bound, a connection that holds only the spare buffer
// of a message it has finished is not given up: its buffer is let go and
// its next message still comes out. The spray's flows, which hold the
// starts of messages, are given up instead.
func TestReassemblerShedsOnlyPendingFlows(t *testing.T) {
	var msgs int
	r := newReassembler(func(string) {}, func(*Message) { msgs++ })
	client, server := netip.MustParseAddrPort("203.0.113.9:4000"), netip.MustParseAddrPort("192.0.2.53:53")
	q := []byte{0, 14, 0xab, 0xcd, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}
	at := time.Unix(1000, 0)
	r.segment(&tcpSegment{client: client, server: server, flags: tcpSYN, seq: 99, at: at})
	r.segment(&tcpSegment{client: client, server: server, seq: 100, payload: q[:5], at: at}) // split: a buffer is made
	r.segment(&tcpSegment{client: client, server: server, seq: 105, payload: q[5:], at: at})
	f := r.flows[flowKey{client, server, false}]
	if msgs != 1 || f.pending() || cap(f.buf) == 0 {
		t.Fatalf("%d messages, pending %v, buffer %d: want 1, a whole flow keeping a spare buffer", msgs, f.pending(), cap(f.buf))
	}
	payload := make([]byte, 1400)
	binary.BigEndian.PutUint16(payload, 0xffff) // never finished
	for i := 0; i < 60000; i++ {                // 84 MB: over maxHeldTotal
		at = at.Add(time.Microsecond)
		r.segment(&tcpSegment{client: sprayClient(i), server: server, seq: uint32(i), payload: payload, at: at})
	}
	if f.broken || cap(f.buf) != 0 {
		t.Fatalf("the whole connection: broken %v, buffer %d; want kept, its spare buffer let go", f.broken, cap(f.buf))
	}
	r.segment(&tcpSegment{client: client, server: server, seq: 116, payload: q, at: at})
	if msgs != 2 {
		t.Errorf("%d messages, want the connection's second query after the spray", msgs)
	}
	if got := heldBytes(r); got != r.held {
		t.Errorf("held counted as %d, the flows hold %d", r.held, got)
	}
}

// A flow that goes idle, or is evicted, in the middle of a message is
// counted as cut off, once.
func TestReassemblerCountsCutOnSweepAndEviction(t *testing.T) {
	skipped := map[string]int{}
	r := newReassembler(func(s string) { skipped[s]++ }, func(*Message) {})
	server := netip.MustParseAddrPort("192.0.2.53:53")
	at := time.Unix(1000, 0)
	open := func(i int) {
		at = at.Add(time.Microsecond)
		r.segment(&tcpSegment{client: sprayClient(i), server: server, flags: tcpSYN, seq: 0, at: at})
		r.segment(&tcpSegment{client: sprayClient(i), server: server, seq: 1, payload: []byte{0, 20, 1}, at: at})
	}
	open(0)
	r.sweep(at.Add(time.Second))
	if len(r.flows) != 0 || skipped[SkipTCPCut] != 1 {
		t.Fatalf("after an idle sweep: %d flows, skipped %v; want none, 1 cut off", len(r.flows), skipped)
	}
	for i := range maxFlows + 1 {
		open(i)
	}
	if want := maxFlows / 8; skipped[SkipTCPCut] != 1+want {
		t.Errorf("after eviction: skipped %v, want %d cut off (the sweep's and the eighth evicted)", skipped, 1+want)
	}
}
