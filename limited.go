package rrl

import (
	"cmp"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The table holds an account's key, a hash, and not the network and tuple
// it stands for, so Limited reads a record kept beside it when
// Config.SetRecordLimited asks for one: a fixed array of recordPlaces
// places, 192 KB, allocated by NewRRL. An
// account takes a place when it starts an episode, and gives it up when
// the episode ends on a Debit (or when Limited finds it ended otherwise); while it is in debt, each
// response it limited (or request it refused) adds one to its place's
// count: a refusal counts at the one account whose limit decided it, even
// when the response put two accounts in debt (see noteLimited). A key may
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

// LimitedOrder is the order of the accounts that Limited returns.
type LimitedOrder uint8

const (
	ByDebt    LimitedOrder = iota // deepest in debt first, then most refused
	ByRefused                     // most refused first, then deepest in debt
)

// LimitedAccount is an account being limited, as Limited reports it.
type LimitedAccount struct {
	// Network is the client network (the source masked to the prefix
	// length).
	Network netip.Prefix

	// LimitKind is the allowance the account is over: a response
	// category's, or a per-network limit.
	LimitKind LimitKind

	// Tuple holds what the account key holds of the response that
	// started the episode (see AllowanceCategory): class, type and name
	// for an answer, class and name for a referral or NODATA, the name
	// for NXDOMAIN; its other fields are zero. It is zero for the
	// per-network limits.
	Tuple ResponseTuple

	// Since is when the episode started, on the clock of the RRL (the
	// injected one, if set), to the coarse clock's millisecond.
	Since time.Time

	// Debt is how long the account would take, if nothing more were
	// charged to it, to come out of debt: at most the window for a
	// response account (the response after that is sent once it has
	// earned one response's worth); for a request account, which sinks
	// into no debt, how long until it serves a request again, at most
	// one request's interval. It is always above 0: an account back in
	// credit is not reported.
	Debt time.Duration

	// Refused counts the responses the account limited (dropped or
	// slipped), or the requests it refused, since its episode started:
	// those whose refusal it decided. A response over all-per-second (or
	// all-bytes-per-second) and its tuple's allowance at once counts at
	// the per-network limit alone, which Debit applies first (RTAllLimit,
	// RTAllBytesLimit), so that the counts of a network's accounts add up
	// to the refusals it was given, each once. The tuple's account may
	// then be reported in debt with fewer refusals, or none.
	Refused int64
}

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

// noteLimited records what a Debit did to the account key, of the given
// kind, of network n (and tuple t, nil for the per-network accounts), at
// now: an episode that started or ended, or one more refusal. decides says
// whether the account's debt decided the Debit's refusal: a response over
// all-per-second and its tuple's allowance both is charged to both
// accounts and goes into debt on both, but is one refusal, all-per-second's
// (the first limit Debit applies), so that the refusals the record counts
// for a network add up to those it was refused.
func (r *RRL) noteLimited(n network, t *ResponseTuple, key uint64, kind LimitKind, d debited, decides bool, now int64) {
	rec := r.record
	if d.edge && d.inDebt {
		r.startEpisode(rec, n, t, key, kind, decides, now)
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
func (r *RRL) startEpisode(rec *limitedRecord, n network, t *ResponseTuple, key uint64, kind LimitKind, decides bool, now int64) {
	if key == 0 {
		return // the empty place's key: never a hash in practice
	}
	line, first := rec.line(key)
	for range recordWays { // another episode may claim the place first
		w, old := r.recordVictim(rec, line, first, key, now)
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

// recordVictim returns the way of line (whose first place is first) that
// the account key takes, and the key it holds now.
func (r *RRL) recordVictim(rec *limitedRecord, line *recordLine, first int, key uint64, now int64) (int, uint64) {
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
		if _, live := r.accountTat(k, kind, now); !live {
			return w, k
		}
		if fewestKey == 0 || line[w].refused.Load() < line[fewest].refused.Load() {
			fewest, fewestKey = w, k
		}
	}
	return fewest, fewestKey
}

// Limited returns up to n of the accounts being limited now, those in
// debt, in the given order: the heaviest of those the record holds (see
// above). An account drops out once back in credit, though its episode
// (and the observer's stop event) may last until EndQuietEpisodes ends it
// (see the comment at the top of limited.go). It reads the
// record once, at most 2,048 accounts, and looks each up in the table, so
// it costs the same whatever the size of the table; it allocates only the
// slice it returns, and Debits run on meanwhile. An account whose episode
// ended otherwise than on a Debit is dropped from the record here. It returns nil for n of 0
// or less, and for an RRL that keeps no record (see
// Config.SetRecordLimited).
func (r *RRL) Limited(n int, order LimitedOrder) []LimitedAccount {
	if r == nil || n <= 0 {
		return nil
	}
	rec := r.record
	if rec == nil {
		return nil
	}
	now := r.now()
	wall := time.Now()
	if r.injected != nil {
		wall = r.injected.wall()
	}
	top := topLimited{order: order, out: make([]LimitedAccount, 0, min(n, recordPlaces))}
	for i := range rec.entries {
		place := &rec.lines[i/recordWays][i%recordWays]
		key := place.key.Load()
		if key == 0 {
			continue
		}
		e := &rec.entries[i]
		e.mu.Lock()
		a, kind, since, ok := e.account(), e.kind, e.since, e.key == key
		e.mu.Unlock()
		if !ok {
			continue // an episode moving in
		}
		tat, live := r.accountTat(key, kind, now)
		if !live {
			place.key.CompareAndSwap(key, 0) // ended by a sweep, or its place lost
			continue
		}
		debt := r.debtOf(tat, kind, a.Network.Bits(), now)
		if debt <= 0 {
			continue // back in credit: not limited now, though its episode goes on
		}
		a.Debt = time.Duration(debt)
		a.Since = wall.Add(-time.Duration(now - since))
		a.Refused = int64(place.refused.Load())
		top.add(a)
	}
	slices.SortFunc(top.out, order.compare)
	return top.out
}

// topLimited keeps the first cap(out) accounts in the order, in a heap
// whose root is the last of them.
type topLimited struct {
	order LimitedOrder
	out   []LimitedAccount
}

func (h *topLimited) add(a LimitedAccount) {
	if len(h.out) < cap(h.out) {
		h.out = append(h.out, a)
		for i := len(h.out) - 1; i > 0; {
			p := (i - 1) / 2
			if h.order.compare(h.out[p], h.out[i]) >= 0 {
				break
			}
			h.out[p], h.out[i] = h.out[i], h.out[p]
			i = p
		}
		return
	}
	if h.order.compare(a, h.out[0]) >= 0 {
		return // after every account kept
	}
	h.out[0] = a
	for i := 0; ; {
		last, l, r := i, 2*i+1, 2*i+2
		if l < len(h.out) && h.order.compare(h.out[l], h.out[last]) > 0 {
			last = l
		}
		if r < len(h.out) && h.order.compare(h.out[r], h.out[last]) > 0 {
			last = r
		}
		if last == i {
			return
		}
		h.out[i], h.out[last] = h.out[last], h.out[i]
		i = last
	}
}

// account returns what the entry says of its account.
func (e *recordEntry) account() LimitedAccount {
	a := LimitedAccount{Network: e.net.prefix(), LimitKind: e.kind}
	if e.kind < LimitRequests {
		a.Tuple = ResponseTuple{Class: e.class, Type: e.qtype, AllowanceCategory: AllowanceCategory(e.kind), SalientName: e.name}
	}
	return a
}

// compare orders accounts by o's measure, then by the other, then the
// oldest episode first, then by network and kind: an order in which no two
// accounts of one network and kind tie, however many share a measure.
func (o LimitedOrder) compare(a, b LimitedAccount) int {
	first, second := cmp.Compare(b.Debt, a.Debt), cmp.Compare(b.Refused, a.Refused)
	if o == ByRefused {
		first, second = second, first
	}
	if c := cmp.Or(first, second, a.Since.Compare(b.Since)); c != 0 {
		return c
	}
	if c := a.Network.Addr().Compare(b.Network.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.LimitKind, b.LimitKind)
}

// accountTat looks the account key, of the given kind, up in the table,
// and returns its tat (read at now) and whether it is held and in a
// limiting episode. It allocates nothing, not even a page of the table.
func (r *RRL) accountTat(key uint64, kind LimitKind, now int64) (int64, bool) {
	ref, held := r.table.lookup(r.table.index(key), identOf(key, kind))
	if !held {
		return 0, false
	}
	v, ok := ref.load()
	if !ok || !v.limited() {
		return 0, false
	}
	return v.tat(now), true
}

// debtOf returns the debt at now, in nanoseconds, of an account of the
// given kind whose tat is tat: how long it takes to admit again if nothing
// more is charged (see LimitedAccount.Debt). A response account is in debt
// until its tat; a request account, never charged past now, refuses until
// it has earned a request's interval, which for a request prefix is that
// of the prefix of bits bits, all as qps-scale scales them now.
func (r *RRL) debtOf(tat int64, kind LimitKind, bits int, now int64) int64 {
	if !kind.Request() {
		return tat - now
	}
	return tat + r.requestInterval(kind, bits) - now
}

// requestInterval returns the interval of a request account of the given
// kind, of a request prefix of bits bits for the prefix kinds: 0 if no
// such limit is on.
func (r *RRL) requestInterval(kind LimitKind, bits int) int64 {
	fam := 0
	switch kind {
	case LimitIPv6RequestPrefixes:
		fam = 1
	case LimitIPv4RequestPrefixes:
	default:
		return r.limit(kind).interval
	}
	lv := &r.scaledProtection().levels[fam]
	for i := range lv.level[:lv.n] {
		if int(lv.level[i].bits) == bits {
			return lv.level[i].limit.interval
		}
	}
	return 0
}

// b2u is 1 for true, 0 for false.
func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// lookup returns the account with ident id in set i if the table holds it.
// In a table of one-bucket sets it is find, the search of every Debit;
// unlike find it searches a small table's set too, and unlike victim it
// allocates no page.
func (t *bucketTable) lookup(i uint64, id uint32) (accountRef, bool) {
	if t.setBuckets == 1 {
		return t.find(i, id)
	}
	first, last := i*t.setBuckets, (i+1)*t.setBuckets
	pg := t.pages[first/pageBuckets].Load() // a set lies in one page; noPage holds nothing
	for k := first; k < last; k++ {
		b := &pg[k%pageBuckets]
		for j := range t.capacity(k) {
			if b.ident[j].Load() == id {
				return accountRef{b, j, id}, true
			}
		}
	}
	return accountRef{}, false
}
