package replay

import (
	"net/netip"
	"time"

	"github.com/dnsrrl/rrl"
)

// pendingKey identifies a query awaiting its response.
type pendingKey struct {
	client netip.AddrPort
	id     uint16
	udp    bool
}

// pendingQuery is what the response needs to know of its query: whether it
// had a valid server cookie, the limit that refused it under each
// configuration, and whether it was answered already.
type pendingQuery struct {
	at       time.Time
	valid    bool
	answered bool // a response came: later ones (over TCP) continue it
	causes   causes
}

// causes holds the limit that refused a query, by configuration (causeNone
// where none did). The first few are held inline, so that a refused
// request costs no allocation unless a sweep has more configurations.
type causes struct {
	few  [inlineCauses]cause
	more []cause // the configurations from inlineCauses on, when a sweep has them
}

const inlineCauses = 8

// set notes that configuration i of n refused the query, for cause k.
func (c *causes) set(i, n int, k cause) {
	if i < inlineCauses {
		c.few[i] = k
		return
	}
	if c.more == nil {
		c.more = make([]cause, n-inlineCauses)
	}
	c.more[i-inlineCauses] = k
}

// of returns the limit that refused the query under configuration i.
func (c *causes) of(i int) cause {
	if i < inlineCauses {
		return c.few[i]
	}
	if c.more == nil {
		return causeNone
	}
	return c.more[i-inlineCauses]
}

// Bounds of the table of queries awaiting a response: a response that
// comes later than pendingTTL after its query is taken as one without a
// query, and beyond maxPending queries the oldest are forgotten.
const (
	pendingTTL = 10 * time.Second
	maxPending = 1 << 18
)

// pendingTable holds queries until their response comes, in a map and a
// queue in arrival order, through which they expire.
type pendingTable struct {
	m          map[pendingKey]pendingQuery
	queue      []pendingKey // ring buffer of keys in arrival order
	times      []time.Time
	head       int
	n          int
	unanswered int64 // queries forgotten without a response
}

func newPendingTable() *pendingTable {
	return &pendingTable{m: make(map[pendingKey]pendingQuery)}
}

func (t *pendingTable) put(k pendingKey, q pendingQuery) {
	if t.n == len(t.queue) {
		if len(t.queue) >= maxPending {
			t.pop()
		} else {
			t.grow()
		}
	}
	i := (t.head + t.n) % len(t.queue)
	t.queue[i], t.times[i] = k, q.at
	t.n++
	if old, ok := t.m[k]; ok && !old.answered {
		t.unanswered++ // the client asked again under the same ID and port
	}
	t.m[k] = q
}

func (t *pendingTable) grow() {
	size := max(1024, 2*len(t.queue))
	q, ts := make([]pendingKey, size), make([]time.Time, size)
	for i := 0; i < t.n; i++ {
		j := (t.head + i) % len(t.queue)
		q[i], ts[i] = t.queue[j], t.times[j]
	}
	t.queue, t.times, t.head = q, ts, 0
}

// pop forgets the oldest query, unless a later one with the same key took
// its place in the map.
func (t *pendingTable) pop() {
	k, at := t.queue[t.head], t.times[t.head]
	if q, ok := t.m[k]; ok && q.at.Equal(at) {
		if !q.answered {
			t.unanswered++
		}
		delete(t.m, k)
	}
	t.head = (t.head + 1) % len(t.queue)
	t.n--
}

// expire forgets the queries older than pendingTTL before now.
func (t *pendingTable) expire(now time.Time) {
	limit := now.Add(-pendingTTL)
	for t.n > 0 && t.times[t.head].Before(limit) {
		t.pop()
	}
}

// unansweredNow returns the queries that had no response: those forgotten
// without one, and those still waiting.
func (t *pendingTable) unansweredNow() int64 {
	n := t.unanswered
	for _, q := range t.m {
		if !q.answered {
			n++
		}
	}
	return n
}

// take returns and forgets the query of key.
func (t *pendingTable) take(k pendingKey) (pendingQuery, bool) {
	q, ok := t.m[k]
	if ok {
		delete(t.m, k)
	}
	return q, ok
}

// answer returns the query of key, a query over a connection, and keeps it
// marked answered: its later responses (a zone transfer) continue the
// first. It expires as a query does, but once half its time has passed a
// response renews it, so that a long transfer stays matched.
func (t *pendingTable) answer(k pendingKey, now time.Time) (pendingQuery, bool) {
	q, ok := t.m[k]
	if !ok {
		return q, false
	}
	kept := q
	kept.answered = true
	t.m[k] = kept
	if now.Sub(q.at) > pendingTTL/2 {
		kept.at = now
		t.put(k, kept) // a new place in the queue; the old one finds it moved
	}
	return q, true
}

// tupleMemo remembers the tuples of recent responses by their wire form
// without the ID: a flood repeats a few responses, and unpacking a message
// costs more than the rest of its replay. miekgrrl.Tuple depends on the
// message alone, so a remembered tuple is the one it would return.
type tupleMemo struct {
	m map[string]rrl.ResponseTuple
}

// Bounds of the memo: responses longer than memoMaxLen are not kept, and it
// is emptied when it holds memoEntries.
const (
	memoMaxLen  = 512
	memoEntries = 4096
)

func newTupleMemo() *tupleMemo {
	return &tupleMemo{m: make(map[string]rrl.ResponseTuple)}
}

// get looks the response up by all but its first two bytes, the ID (the
// conversion to string in the index expression does not copy).
func (m *tupleMemo) get(wire []byte) (rrl.ResponseTuple, bool) {
	if len(wire) > memoMaxLen {
		return rrl.ResponseTuple{}, false
	}
	t, ok := m.m[string(wire[2:])]
	return t, ok
}

func (m *tupleMemo) put(wire []byte, t rrl.ResponseTuple) {
	if len(wire) > memoMaxLen {
		return
	}
	if len(m.m) >= memoEntries {
		clear(m.m)
	}
	m.m[string(wire[2:])] = t
}
