package rrl

import (
	"sync"
	"sync/atomic"
)

// The table holds an account's key, a hash, and not the network and tuple
// it stands for, so Limited reads a record kept beside it when
// Config.SetRecordLimited asks for one: a fixed array of recordPlaces
// places, 192 KB, allocated by NewRRL. An
// account takes a place when it starts an episode, and gives it up when
// the episode ends on a Debit (or when Limited finds it ended otherwise); while it is in debt, each
// response it limited (or request it refused) adds one to its place's
// count: a refusal counts at the one account whose limit decided it, even
// when the response put two accounts in debt (see note). A key may take
// one of the recordWays places of either of two lines (see places), each
// line's keys and counts one cache line, so that counting reads and writes
// one line, or two when the key went to its second. When all of them are
// taken, a new episode takes the place of an account that is no
// longer limited (its episode ended by EndQuietEpisodes or its place in
// the table lost), or else that of the one with the fewest refusals: the
// record keeps the heaviest of the accounts being limited, at most
// recordPlaces of them. Limited checks each account against the table,
// which says whether its episode goes on and how deep in debt it is, and
// reports only those in debt now.
//
// Limited now and a limiting episode differ on purpose. An account is
// limited now while it is in debt (a request account, which sinks into
// none: while it would refuse a request). Its episode, which the
// observer's start and stop events bound (the log lines of an
// integration), goes on until a Debit leaves it out of debt or
// EndQuietEpisodes finds it quiet for the period asked (60 seconds in BIND
// and the integrations), so that a flood that pauses is one episode, not a
// start and a stop for every pause. An account back in
// credit drops out of Limited at once, keeps its place and count while its
// episode goes on, and is listed again, with the count of the whole
// episode, if it goes into debt again before the episode ends.

// recordPlaces is the number of accounts the record holds, and recordWays
// the number of places one key may take.
const (
	recordPlaces = 2048
	recordWays   = 4
)

// limitedRecord is the record of accounts being limited.
type limitedRecord struct {
	lines   [recordPlaces / recordWays]recordLine
	entries [recordPlaces]recordEntry
}

// recordLine is the keys and refusal counts of recordWays places: one
// cache line. Key 0 is an empty place.
type recordLine [recordWays]recordPlace

// recordPlace is a place's key and refusal count.
type recordPlace struct{ key, refused atomic.Uint64 }

// recordEntry is the rest of a place, written when an episode starts and
// read by Limited, under its lock.
type recordEntry struct {
	mu           sync.Mutex
	key          uint64
	kind         LimitKind
	net          network
	class, qtype uint16
	name         string
	since        int64 // internal time
}

// places returns the first places of the two lines that key may take, the
// second picked by another hash than the first: two choices, so that the
// record holds any few hundred accounts without one line overflowing,
// where a line of its own for each key overflows, with 200 accounts, one
// time in 30.
func (rec *limitedRecord) places(key uint64) [2]int {
	return [2]int{int(key*0x9e3779b97f4a7c15>>55) * recordWays, int((key^key>>29)*0xbf58476d1ce4e5b9>>55) * recordWays}
}

// place returns the key and count of place i.
func (rec *limitedRecord) place(i int) *recordPlace {
	return &rec.lines[i/recordWays][i%recordWays]
}

// find returns the place of the record that holds key, or -1.
func (rec *limitedRecord) find(key uint64) int {
	for _, first := range rec.places(key) {
		for i := first; i < first+recordWays; i++ {
			if rec.place(i).key.Load() == key {
				return i
			}
		}
	}
	return -1
}

// SetRecordLimited sets whether the RRL keeps the record of the accounts
// being limited that Limited reads. Off, the default, it costs nothing; on,
// it costs 192 KB, allocated by NewRRL, and each limited response or
// refused request counts in the record, one cache line apart from the
// account's.
func (c *Config) SetRecordLimited(on bool) { c.recordLimited = on }

// note records what a Debit did to the account key, of the given
// kind, of network n (and tuple t, nil for the per-network accounts), at
// now: an episode that started or ended, or one more refusal. decides says
// whether the account's debt decided the Debit's refusal: a response over
// all-per-second and its tuple's allowance both is charged to both
// accounts and goes into debt on both, but is one refusal, all-per-second's
// (the first limit Debit applies), so that the refusals the record counts
// for a network add up to those it was refused.
func (rec *limitedRecord) note(acc *accounts, n network, t *ResponseTuple, key uint64, kind LimitKind, d debited, decides bool, now int64) {
	if d.edge && d.inDebt {
		rec.startEpisode(acc, n, t, key, kind, decides, now)
		return
	}
	if !d.edge && !decides {
		return
	}
	i := rec.find(key)
	switch {
	case i < 0:
	case d.edge:
		rec.place(i).key.CompareAndSwap(key, 0) // the episode ended
	default:
		rec.place(i).refused.Add(1)
	}
}

// startEpisode gives the account key a place in the record: its own if it
// has one, else an empty one, else one whose account is no longer limited,
// else the one with the fewest refusals. The Debit that started the
// episode is its first refusal if the account decided it (decides).
func (rec *limitedRecord) startEpisode(acc *accounts, n network, t *ResponseTuple, key uint64, kind LimitKind, decides bool, now int64) {
	if key == 0 {
		return // the empty place's key: never a hash in practice
	}
	for range 2 * recordWays { // another episode may claim the place first
		i, old := rec.victim(acc, key, now)
		e, at := &rec.entries[i], rec.place(i)
		e.mu.Lock()
		// Claimed under the entry's lock: Limited, which reads the key
		// and then locks the entry, never pairs the new key with the
		// old account's entry.
		if at.key.CompareAndSwap(old, key) {
			at.refused.Store(b2u(decides))
			e.key, e.kind, e.net, e.since = key, kind, n, now
			e.class, e.qtype, e.name = 0, 0, ""
			if t != nil {
				e.class, e.qtype, e.name = tupleKey(t)
			}
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
	}
}

// victim returns the place that the account key takes, of the two lines
// it may take, and the key it holds now: its own, else an empty one, else
// one whose account is no longer limited, else the one with the fewest
// refusals.
func (rec *limitedRecord) victim(acc *accounts, key uint64, now int64) (int, uint64) {
	if i := rec.find(key); i >= 0 {
		return i, key
	}
	lines := rec.places(key)
	for _, first := range lines {
		for i := first; i < first+recordWays; i++ {
			if rec.place(i).key.Load() == 0 {
				return i, 0
			}
		}
	}
	fewest, fewestKey := 0, uint64(0)
	for _, first := range lines {
		for i := first; i < first+recordWays; i++ {
			e := &rec.entries[i]
			e.mu.Lock()
			k, kind := e.key, e.kind
			e.mu.Unlock()
			if rec.place(i).key.Load() != k {
				continue // being claimed
			}
			if _, limited, sure := acc.limitedTat(k, kind, now); sure && !limited {
				return i, k // its episode is over, or its place lost
			}
			if fewestKey == 0 || rec.place(i).refused.Load() < rec.place(fewest).refused.Load() {
				fewest, fewestKey = i, k
			}
		}
	}
	return fewest, fewestKey
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
