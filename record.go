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
// when the response put two accounts in debt (see note). A key may
// take one of recordWays places, whose keys and counts share one cache
// line, so that counting reads and writes that line only. When all of them
// are taken, a new episode takes the place of an account that is no
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
type recordLine [recordWays]struct{ key, refused atomic.Uint64 }

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

// line returns the line of places that key may take.
func (rec *limitedRecord) line(key uint64) (*recordLine, int) {
	i := int(key * 0x9e3779b97f4a7c15 >> 55) // 9 bits: 512 lines
	return &rec.lines[i], i * recordWays
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
	line, _ := rec.line(key)
	for w := range line {
		if line[w].key.Load() != key {
			continue
		}
		if d.edge {
			line[w].key.CompareAndSwap(key, 0) // the episode ended
		} else {
			line[w].refused.Add(1)
		}
		return
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
	line, first := rec.line(key)
	for range recordWays { // another episode may claim the place first
		w, old := rec.victim(acc, line, first, key, now)
		e := &rec.entries[first+w]
		e.mu.Lock()
		// Claimed under the entry's lock: Limited, which reads the key
		// and then locks the entry, never pairs the new key with the
		// old account's entry.
		if line[w].key.CompareAndSwap(old, key) {
			line[w].refused.Store(b2u(decides))
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

// victim returns the way of line (whose first place is first) that the
// account key takes, and the key it holds now.
func (rec *limitedRecord) victim(acc *accounts, line *recordLine, first int, key uint64, now int64) (int, uint64) {
	for w := range line {
		if k := line[w].key.Load(); k == key || k == 0 {
			return w, k
		}
	}
	fewest, fewestKey := 0, uint64(0)
	for w := range line {
		e := &rec.entries[first+w]
		e.mu.Lock()
		k, kind := e.key, e.kind
		e.mu.Unlock()
		if line[w].key.Load() != k {
			continue // being claimed
		}
		if _, limited, sure := acc.limitedTat(k, kind, now); sure && !limited {
			return w, k // its episode is over, or its place lost
		}
		if fewestKey == 0 || line[w].refused.Load() < line[fewest].refused.Load() {
			fewest, fewestKey = w, k
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
