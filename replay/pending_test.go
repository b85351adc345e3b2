package replay

import (
	"net/netip"
	"testing"
	"time"
)

func TestPendingTable(t *testing.T) {
	t0 := time.Unix(1000, 0)
	key := func(i int) pendingKey {
		return pendingKey{netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 53), uint16(i), true}
	}
	p := newPendingTable()
	for i := 0; i < 3000; i++ { // grows past its first size
		p.put(key(i), pendingQuery{at: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	if q, ok := p.take(key(2999)); !ok || !q.at.Equal(t0.Add(2999*time.Millisecond)) {
		t.Fatalf("take: %v %v", q, ok)
	}
	if _, ok := p.take(key(2999)); ok {
		t.Error("taken twice")
	}
	// A query put again under its key replaces the first; expiring the
	// first's place in the queue leaves the second.
	p.put(key(0), pendingQuery{at: t0.Add(2 * time.Second), valid: true})
	p.expire(t0.Add(pendingTTL + 1500*time.Millisecond)) // forgets those before t0+1.5s
	if q, ok := p.take(key(0)); !ok || !q.valid {
		t.Errorf("the query put again: %v %v", q, ok)
	}
	if _, ok := p.take(key(1000)); ok {
		t.Error("an expired query is still there")
	}
	if _, ok := p.take(key(1600)); !ok {
		t.Error("a query not yet expired is gone")
	}
}

// Beyond maxPending queries the oldest are forgotten.
func TestPendingTableBound(t *testing.T) {
	p := newPendingTable()
	t0 := time.Unix(1000, 0)
	for i := 0; i < maxPending+10; i++ {
		k := pendingKey{netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 53), 1, true}
		p.put(k, pendingQuery{at: t0})
	}
	if len(p.m) != maxPending || p.n != maxPending || len(p.queue) != maxPending {
		t.Errorf("%d queries held, %d queued in %d slots; want %d", len(p.m), p.n, len(p.queue), maxPending)
	}
	first := pendingKey{netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, 0}), 53), 1, true}
	if _, ok := p.take(first); ok {
		t.Error("the oldest query was kept")
	}
}

// A query over a connection stays, answered, after its first response, so
// that its later responses find it; a long transfer renews it, and it
// expires without counting as unanswered.
func TestPendingAnswerKeepsStreamQuery(t *testing.T) {
	t0 := time.Unix(1000, 0)
	k := pendingKey{netip.MustParseAddrPort("192.0.2.1:4000"), 7, false}
	p := newPendingTable()
	p.put(k, pendingQuery{at: t0, valid: true})
	for i, at := range []time.Duration{time.Second, 4 * time.Second, 6 * time.Second, 8 * time.Second} {
		q, ok := p.answer(k, t0.Add(at))
		if !ok || !q.valid || q.answered != (i > 0) {
			t.Fatalf("response %d at %v: %+v %v; want the query, answered from the second on", i+1, at, q, ok)
		}
		p.expire(t0.Add(at))
	}
	if n := p.n; n != 2 {
		t.Errorf("%d places in the queue, want 2: the query's and its renewal at 6 s", n)
	}
	p.expire(t0.Add(14 * time.Second))
	if _, ok := p.m[k]; !ok {
		t.Error("gone 10 s after the query, though renewed at 6 s")
	}
	p.expire(t0.Add(16*time.Second + time.Millisecond)) // 10 s after the renewal
	if _, ok := p.answer(k, t0.Add(17*time.Second)); ok || p.unansweredNow() != 0 {
		t.Errorf("after its time: still held %v, %d unanswered; want gone, 0", ok, p.unansweredNow())
	}
}

// A query keeps the limit that refused it under each configuration, inline
// for the first few and in a slice beyond them.
func TestCauses(t *testing.T) {
	var c causes
	const n = inlineCauses + 4
	c.set(1, n, causeRequests)
	if got := c.of(inlineCauses + 2); got != causeNone || c.more != nil {
		t.Errorf("before any beyond the inline ones: %v, slice %v; want none, nil", got, c.more)
	}
	c.set(inlineCauses+2, n, causeAll)
	for i := 0; i < n; i++ {
		want := causeNone
		switch i {
		case 1:
			want = causeRequests
		case inlineCauses + 2:
			want = causeAll
		}
		if got := c.of(i); got != want {
			t.Errorf("configuration %d: %v, want %v", i, got, want)
		}
	}
}
