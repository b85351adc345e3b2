package rrl

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// The table is a concurrent map from an entry's ident to a 64-bit word,
// and nothing else: it does not know what the word means. Its caller
// (accounts.go) keeps an account's balance in the word and its kind in
// the ident's label, and supplies the rank by which a full table chooses
// the entry to recycle.
//
// It is an array of buckets, each one 64-byte cache line holding five
// entries: 12 bytes an entry and 4 for the bucket's state. An entry's key
// picks its first bucket with its high half and tells it apart from the
// others in a bucket with a 27-bit tag from its low half, beside its
// 4-bit label; a hash of that ident picks its second bucket (see alt). An
// update of an entry held in its first bucket reads and writes that
// bucket alone: findFirst finds the entry by its ident and entry.cas
// changes its word with one compare-and-swap, without a lock. One held in
// its second bucket costs a read of both, as does a new one while its
// first bucket has entries in their second, or the table empty places.
//
// A new entry takes an empty place in its first bucket, else in its
// second. While the table has places never filled, a new entry whose two
// buckets are full makes room by moving an entry of theirs to its other
// bucket, up to three moves in a chain (see relocate), as a cuckoo hash
// table does: so the table fills to about 99% before it recycles an entry,
// where with one bucket per entry a bucket recycled while the table had
// room, and max-table-size entries left 82% held. In a full table a new
// entry takes an empty place of its two buckets if the table has one, else
// the place of the entry of lowest rank of its first bucket. Since entries
// are recycled in their first bucket alone, those that went to their
// second bucket while the table filled leave it as the table turns over:
// a bucket counts the entries whose first bucket it is that are in their
// second (see bucket.state), and a search reads the second bucket only
// while that count is not 0, or to find an empty place while the table
// has one. So a new entry in a full table, like a held one, costs one line
// once the table has turned over. The table never refuses a new entry and
// never scans.
//
// A table of at most one page (320 entries) is one set: an entry may take
// any place in it, searched in order, and the entry of lowest rank in the
// whole table is recycled. A small table then behaves the same in every
// RRL, whatever the secrets of the hash that made its keys, so that a
// replay of captured traffic decides as the server did; its searches read
// up to 64 buckets, which fit in the processor's first-level cache.
//
// The array is allocated in pages of 64 buckets (4 KB, 320 entries), each
// on first use, so that a table holding few entries costs little: an
// empty table is an array of page pointers, 8 bytes for every 320 entries
// of its size, and each entry added costs at most a page until the table
// is a page for every 320 entries.
//
// # Moves, and the rules that make them safe
//
// An entry moved to its other bucket (to make room, see moveAside) goes
// through three steps: claim marks its ident moving in and puts its word
// in a new generation; put writes the word and the ident in the new place
// and counts the move; the caller of relocate then takes the old place
// for the new entry. A search that reads the entry's two buckets one after
// the other could see it in neither, so these rules hold, each with a
// test that replays its interleaving (table_rules_test.go):
//
//  1. A search counts the moves into a bucket before it reads the
//     bucket's idents, and reads the count again after: a changed count
//     means that an entry may have come in behind it, and it looks again
//     (victim, lookup; the hook stepFirstRead).
//  2. put raises the spill count of an entry's first bucket before the
//     entry can be seen in its second (the hook stepVisible), so that a
//     search that misses it in its first bucket knows to read its second.
//  3. A move into an entry's first bucket lowers the spill count and
//     counts the move in one step (bucket.dropSpill with in true), so that
//     a search that reads the count lowered also reads the move counted.
//  4. Every entry that takes a place, added or moved in, takes a new
//     generation of the place's word (the word's top generationBits), and
//     so does an entry claimed for a move, so that an update that read the
//     word before fails its compare-and-swap.
//  5. An update that lands its compare-and-swap anyway checks the ident
//     after the swap (entry.cas): a place whose generation went round
//     (eight entries through one place while the update stood between its
//     read and its write) holds another entry, and the update is taken
//     back. So a word written for one entry is never left on another.
//
// A search that finds the entry it seeks moving in (added or moved by
// another goroutine that has not finished) waits for it, yielding the
// processor, up to maxWaits times (see findOrAdd and lookup).

// slotsPerBucket is the number of entries in a bucket.
const slotsPerBucket = 5

// The word's top generationBits bits are the table's: the generation of
// the place, advanced whenever a new entry, or a moving one, takes it (rule
// 4). The caller keeps them as it found them: its arithmetic works on the
// word's other bits alone.
const (
	generationBits  = 3
	generationShift = 64 - generationBits
	generationOne   = uint64(1) << generationShift
	callerMask      = generationOne - 1
)

// bucket is one cache line of entries. An entry's ident says which entry a
// place holds: 0 for none; its tag, its label and a set low bit; the same
// with the low bit clear while it moves in. Its word is valid while its
// ident is.
type bucket struct {
	word  [slotsPerBucket]atomic.Uint64
	ident [slotsPerBucket]atomic.Uint32
	// state is the bucket's spare word (see the state bits below): which
	// of its places hold an entry in its second bucket, how many entries
	// whose first bucket this is are in their second (so that a search
	// that does not find an entry here reads its second bucket only while
	// that count is not 0), and how many entries have moved in, so that a
	// search can tell when its look at an entry's two buckets, one after
	// the other, may have missed the entry as it moved between them.
	state atomic.Uint32
}

// The bits of a bucket's state word: bit j (0 to 4) is set while place j
// holds an entry in its second bucket (see inSecond); then come the spill
// count and the move count.
const (
	// The spill count: the entries whose first bucket this is held in
	// their second, or on their way there. It saturates at its largest
	// value, which then stays: 2,047, where a bucket is the first of five
	// entries on average, and a keyed hash leaves nobody to aim more at
	// one.
	spillShift = slotsPerBucket
	spillOne   = 1 << spillShift
	spillMax   = 1<<(moveShift-spillShift) - 1 // the bits up to the move count
	spillMask  = spillMax << spillShift
	// The move count, modulo 2^16: the entries moved into this bucket.
	moveShift = 16
	moveOne   = 1 << moveShift
)

// hasSpilled reports whether an entry whose first bucket is b may be in
// its second.
func (b *bucket) hasSpilled() bool { return b.state.Load()&spillMask != 0 }

// addSpill counts an entry whose first bucket is b going to its second.
func (b *bucket) addSpill() {
	for {
		w := b.state.Load()
		if w&spillMask == spillMask || b.state.CompareAndSwap(w, w+spillOne) {
			return
		}
	}
}

// dropSpill counts an entry whose first bucket is b leaving its second:
// recycled, or moved to b. With in true, the entry moved into b, which the
// move count records in the same step (rule 3).
func (b *bucket) dropSpill(in bool) {
	for {
		w, v := b.state.Load(), uint32(0)
		if in {
			v = moveOne
		}
		if c := w & spillMask; c != spillMask && c != 0 { // a saturated count stays
			v -= spillOne
		}
		if b.state.CompareAndSwap(w, w+v) {
			return
		}
	}
}

// inSecond reports whether place j holds an entry in its second bucket.
// Only the goroutine holding the place (its ident moving in) may ask, or
// change it with setInSecond.
func (b *bucket) inSecond(j int) bool { return b.state.Load()&(1<<j) != 0 }

// setInSecond records whether place j holds an entry in its second bucket.
func (b *bucket) setInSecond(j int, on bool) {
	switch {
	case on == b.inSecond(j):
	case on:
		b.state.Or(1 << j)
	default:
		b.state.And(^uint32(1 << j))
	}
}

// moves returns the bucket's move count.
func (b *bucket) moves() uint32 { return b.state.Load() >> moveShift }

// identOf returns the ident of the entry whose key is key, with the 4-bit
// label label. Tag 0 is read as tag 1, so that no ident moving in is 0.
func identOf(key uint64, label uint8) uint32 {
	return max(uint32(key)&^0x1f, 0x20) | uint32(label&0xf)<<1 | 1
}

// labelOf returns the label of the entry whose ident is id.
func labelOf(id uint32) uint8 { return uint8(id >> 1 & 0xf) }

// rankFunc orders the entries of a full set for recycling: of the
// entries of bucket b that mask picks (bit j for place j, each held and
// not moving in), whose labels are the 4-bit fields of labels (place j's
// at bit 4j), it returns the place of the one of lowest rank at now (the
// first such), which goes first, and its rank. It reads their words with
// b.wordAt. The table calls it once for a bucket, so that a new entry
// costs one call.
type rankFunc func(b *bucket, mask, labels uint32, now int64) (j int, rank int64)

// wordAt returns the word of place j, for a rankFunc.
func (b *bucket) wordAt(j int) uint64 { return b.word[j].Load() }

// table is the map of entries.
type table struct {
	buckets     uint64 // number of buckets
	base, extra uint64 // bucket i holds base entries, one more if i < extra
	sets        uint64 // 1 in a table of at most a page, one set of every bucket; else one set a bucket
	pages       []atomic.Pointer[page]
	rank        rankFunc

	// free counts the places never filled: while it is above keep, a new
	// entry whose two buckets are full moves an entry aside rather than
	// recycle one (see relocate). The last keep places, 1 in 128, are
	// left to new entries that find them in their own buckets: the fewer
	// places are left, the further relocate must search for one, and
	// under a spray it would search on every add. The places filled, the
	// size less free, are the entries held.
	free atomic.Int64
	keep int64
	size int64

	hooks tableHooks

	sweepMu sync.Mutex
	sweepAt uint64 // the bucket where the next sweep starts
}

// tableHooks let a test act between the steps of the table's protocol, and
// set how long a search waits. A table made by newTable has a step hook of
// nil, a wait that yields the processor, maxWaits 100 and lookupWaits
// 65,536.
type tableHooks struct {
	step        func(tableStep) // called at each step named below, when not nil
	wait        func()          // called while a search waits for an entry moving in
	maxWaits    int             // the most waits of findOrAdd, which then adds the entry itself
	lookupWaits int             // the most waits of lookup, which then says it is not sure
}

// tableStep names a point in the table's protocol where a hook runs.
type tableStep uint8

const (
	stepFirstRead      tableStep = iota // a search has read an entry's first bucket, not yet its spill count (rules 1-3)
	stepBetweenBuckets                  // a search is about to read an entry's second bucket
	stepVisible                         // an entry added or moved is visible in its place, its move not yet counted (rule 2)
	stepMovedIn                         // a move has lowered the spill count of the entry's first bucket, if it was one (rule 3)
)

// step runs the step hook, if any.
func (t *table) step(s tableStep) {
	if t.hooks.step != nil {
		t.hooks.step(s)
	}
}

// page is the unit in which a table is allocated: 64 buckets, 4 KB.
type page [pageBuckets]bucket

const pageBuckets = 64

// newTable returns a table of size places, whose full sets recycle by
// rank.
func newTable(size int, rank rankFunc) *table {
	nb := (uint64(size) + slotsPerBucket - 1) / slotsPerBucket
	t := &table{buckets: nb, base: uint64(size) / nb, extra: uint64(size) % nb, sets: nb, rank: rank}
	if nb <= smallBuckets {
		t.sets = 1
	}
	t.size, t.keep = int64(size), int64(size)/128
	t.free.Store(t.size)
	t.hooks = tableHooks{wait: runtime.Gosched, maxWaits: 100, lookupWaits: 1 << 16}
	t.pages = make([]atomic.Pointer[page], (nb+pageBuckets-1)/pageBuckets)
	for i := range t.pages {
		t.pages[i].Store(&noPage)
	}
	return t
}

// smallBuckets is the size, in buckets, of the largest table that is one
// set: a page, 320 entries.
const smallBuckets = pageBuckets

// held returns the number of entries the table holds: its places filled.
func (t *table) held() int64 { return t.size - t.free.Load() }

// index returns the number of the set of the entry whose key is key: the
// key's high half scaled to the number of sets. In a table larger than a
// page, set i is bucket i, the entry's first bucket.
func (t *table) index(key uint64) uint64 { return (key >> 32) * t.sets >> 32 }

// small reports whether the table is one set: at most a page.
func (t *table) small() bool { return t.sets == 1 }

// alt returns the other bucket of the entry with ident id in bucket i of a
// table larger than a page: its second bucket if i is its first, its first
// if i is its second. The two add up to a number that the ident picks,
// modulo the buckets, so that either gives the other without the key: a
// hash of the ident, which comes from the key's low half, while its first
// bucket comes from the high half, so the two are independent. An entry
// whose two buckets are one has one bucket.
func (t *table) alt(i uint64, id uint32) uint64 {
	h := uint64(uint32(id|1) * 0x9e3779b9) // the same whether moving in or not
	sum := h*t.buckets>>32 + t.buckets - i
	if sum >= t.buckets {
		sum -= t.buckets
	}
	return sum
}

// bucket returns bucket i, allocating its page if it has none yet.
func (t *table) bucket(i uint64) *bucket { return &t.page(i)[i%pageBuckets] }

// peek returns bucket i without allocating: a bucket of noPage, which
// holds nothing, if its page has none yet.
func (t *table) peek(i uint64) *bucket { return &t.pages[i/pageBuckets].Load()[i%pageBuckets] }

// page returns the page of bucket i, allocating it if it has none yet.
func (t *table) page(i uint64) *page {
	at := &t.pages[i/pageBuckets]
	if p := at.Load(); p != &noPage {
		return p
	}
	return newPage(at)
}

// newPage allocates a page at at, unless another goroutine did first, and
// returns it.
func newPage(at *atomic.Pointer[page]) *page {
	p := new(page)
	if !at.CompareAndSwap(&noPage, p) {
		p = at.Load() // another goroutine allocated it first
	}
	return p
}

// noPage stands for every page not yet allocated, so that a search need
// not tell it apart: it is never written, and its idents, all 0, match no
// entry.
var noPage page

// capacity returns how many entries bucket i holds: five, except in a
// table whose size is not a multiple of five.
func (t *table) capacity(i uint64) int {
	if i < t.extra {
		return int(t.base) + 1
	}
	return int(t.base)
}

// entry refers to an entry in its place: its bucket, its place there, and
// its ident, by which load and cas check that the place still holds it.
type entry struct {
	b  *bucket
	j  int
	id uint32
}

// load returns the entry's word, and false if the entry has lost its place
// since the reference was made.
func (e entry) load() (uint64, bool) {
	v := e.b.word[e.j].Load()
	// A new entry moving in changes the ident before the word: reading the
	// ident after the word proves that the word is this entry's.
	return v, e.b.ident[e.j].Load() == e.id
}

// cas replaces the word old, as load returned it, by new, whose generation
// bits are old's, and reports whether it did: false if another goroutine
// changed it, or another entry took the place, since. A swap that lands
// although the place now holds another entry (rule 5) is taken back, and
// reported as failed. The entry itself moving out (its ident moving in)
// is still the entry: its move carries the word it finds.
func (e entry) cas(old, new uint64) bool {
	return e.b.word[e.j].CompareAndSwap(old, new) && (e.b.ident[e.j].Load()|1 == e.id || e.takeBack(old, new))
}

// takeBack undoes a swap of old for new that landed on another entry than
// e (rule 5), and returns false. The undo fails only if that entry's own
// update came between the two swaps, in the nanoseconds apart; the other
// entry then keeps this update with its own.
func (e entry) takeBack(old, new uint64) bool {
	e.b.word[e.j].CompareAndSwap(new, old)
	return false
}

// findFirst returns the entry with ident id if its first bucket, set i,
// holds it, in a table larger than a page. It is small enough to be
// inlined into every update, which looks no further: an entry held in its
// first bucket, as nine in ten are in a full table, costs one cache line;
// findOrAdd finds the others.
func (t *table) findFirst(i uint64, id uint32) (entry, bool) {
	if t.small() {
		return entry{}, false
	}
	b := &t.pages[i/pageBuckets].Load()[i%pageBuckets]
	for j := range slotsPerBucket { // places past the capacity stay empty
		if b.ident[j].Load() == id {
			return entry{b, j, id}, true
		}
	}
	return entry{}, false
}

// lookup returns the entry with ident id in set i, and true, if the table
// holds it, without adding it or allocating a page. Unlike findFirst it is
// safe while entries move: it reads the entry's second bucket when its
// first has spilled, looks again when a move came in behind it (rule 1),
// and waits for the entry while it is moving in: a move is a few stores
// of a goroutine that is running, so the wait is short unless that
// goroutine is descheduled. Its third result says whether the answer is
// sure: false only when the entry was still moving in after lookupWaits
// waits.
func (t *table) lookup(i uint64, id uint32) (e entry, found, sure bool) {
	for waits := 0; ; {
		e, found, moving, settled := t.look(i, id)
		switch {
		case found:
			return e, true, true
		case settled && !moving:
			return entry{}, false, true
		case moving:
			if waits++; waits > t.hooks.lookupWaits {
				return entry{}, false, false
			}
			t.hooks.wait()
		}
	}
}

// look is one attempt of lookup: the entry if found, whether it was seen
// moving in, and whether the search was settled (no move came in behind
// it).
func (t *table) look(i uint64, id uint32) (e entry, found, moving, settled bool) {
	if t.small() {
		e, found, moving = t.lookSmall(id)
		return e, found, moving, true
	}
	first := t.peek(i)
	moves := first.moves() // before the idents (rule 1)
	own, _, moving := lookIn(first, i, t.capacity(i), id)
	if own.b != nil {
		return entry{own.b, own.j, id}, true, false, true
	}
	t.step(stepFirstRead)
	if first.hasSpilled() {
		if k2 := t.alt(i, id); k2 != i {
			t.step(stepBetweenBuckets)
			second := t.peek(k2)
			moves2 := second.moves()
			own, _, m := lookIn(second, k2, t.capacity(k2), id)
			if own.b != nil {
				return entry{own.b, own.j, id}, true, false, true
			}
			if second.moves() != moves2 {
				return entry{}, false, moving || m, false
			}
			moving = moving || m
		}
	}
	return entry{}, false, moving, first.moves() == moves
}

// lookSmall is look in a small table, whose one set is searched whole.
func (t *table) lookSmall(id uint32) (e entry, found, moving bool) {
	pg := t.pages[0].Load() // noPage holds nothing
	for k := range t.buckets {
		own, _, m := lookIn(&pg[k], k, t.capacity(k), id)
		if own.b != nil {
			return entry{own.b, own.j, id}, true, false
		}
		moving = moving || m
	}
	return entry{}, false, moving
}

// recycled is an entry whose place an added one took: its id for events
// (see entryID), its label and its last word. The zero value is none.
type recycled struct {
	id    uint64
	label uint8
	word  uint64
	ok    bool
}

// findOrAdd returns the entry with ident id in set i and false if the
// table holds it; else it adds the entry with the word first (its
// generation bits aside), in the place victim chooses, and returns it,
// true, and the entry whose place it took, if any. An update passes as
// first the word the new entry has once updated, so that adding and
// updating are one step.
//
// Where victim finds the entry moving in, findOrAdd waits, up to maxWaits
// times, for another goroutine adding it or moving it (see moveAside: from
// claim to put); it stops waiting only if that goroutine is held up
// between the two. Then the entry is added twice: the copy in the later
// place lies unused until recycled, and the updates made to it are lost;
// and as the wait found the entry moving, no entry is moved aside for the
// copy, which may take the place of another though the table has room.
// The same can happen, without a wait, when two goroutines add the same
// entry at once: each scans the set before the other's compare-and-swap
// of the ident, and they choose different places (in a full set whose
// words changed between the two scans). Two that choose the same place
// cannot both take it: the loser sees the entry moving in when it looks
// again.
func (t *table) findOrAdd(i uint64, id uint32, now int64, first uint64) (entry, bool, recycled) {
	for waits := 0; ; waits++ {
		p, moving := t.victim(i, id, now)
		switch {
		case p.old == id:
			return entry{p.b, p.j, id}, false, recycled{}
		case moving && waits < t.hooks.maxWaits, p.b == nil:
			t.hooks.wait() // let the entries moving in settle
			continue
		}
		if e, r, ok := t.add(i, p, id, first); ok {
			return e, true, r
		}
	}
}

// place is a place in a set, its bucket's number k, and the ident it held
// when victim chose it: 0 if empty, a moving-in ident if relocate emptied
// it for the caller.
type place struct {
	b   *bucket
	k   uint64
	j   int
	old uint32
}

// add moves the entry with ident id into place p of set i with the word
// first, in a generation of its own (rule 4). It fails if another
// goroutine changed the place since victim chose it.
func (t *table) add(i uint64, p place, id uint32, first uint64) (entry, recycled, bool) {
	b, j := p.b, p.j
	var from *bucket // the entry's first bucket, if p is in its second
	if !t.small() && p.k != i {
		from = t.bucket(i)
		from.addSpill() // before the entry can be seen in its second bucket (rule 2)
	}
	if !b.ident[j].CompareAndSwap(p.old, id&^1) {
		if from != nil {
			from.dropSpill(false)
		}
		return entry{}, recycled{}, false
	}
	if p.old&1 == 1 && b.inSecond(j) { // the entry recycled was in its second bucket
		t.bucket(t.alt(p.k, p.old)).dropSpill(false)
	}
	b.setInSecond(j, from != nil)
	was := renew(&b.word[j], first)
	b.ident[j].Store(id)
	t.step(stepVisible)
	switch {
	case p.old == 0:
		t.free.Add(-1)
		return entry{b, j, id}, recycled{}, true
	case p.old&1 == 0: // emptied by relocate, which took an empty place
		return entry{b, j, id}, recycled{}, true
	}
	return entry{b, j, id}, recycled{t.entryIDAt(p.k, p.old), labelOf(p.old), was, true}, true
}

// renew swaps the word at w for v in the next generation of the place
// (rule 4), and returns the word it replaced, so that the entry that held
// the place leaves its last state known.
func renew(w *atomic.Uint64, v uint64) uint64 {
	for {
		was := w.Load()
		if w.CompareAndSwap(was, v&callerMask|(was+generationOne)&^callerMask) {
			return was
		}
	}
}

// victim looks in set i for the entry with ident id, and for a place for
// it should it have none. It returns the entry's own place if the set
// holds it; else an empty place; else that of the entry to recycle (the
// lowest rank); a nil bucket if new entries are moving into every place.
// It also reports whether the entry is moving in, added by another
// goroutine that has not finished. It reads the two buckets again if an
// entry moved into either while it read them (rule 1).
func (t *table) victim(i uint64, id uint32, now int64) (p place, moving bool) {
	if t.small() {
		return t.victimSmall(id, now)
	}
	// One pass looks for the entry, an empty place and the entry of lowest
	// rank at once. An entry is recycled from its first bucket only, so
	// that entries leave their second buckets as the table turns over and
	// their first buckets' spill counts fall back to 0: then the second
	// bucket is read only to find an empty place while the table has one.
	first := t.bucket(i)
	for {
		moves := first.moves() // before the idents (rule 1)
		empty, moving := -1, false
		var c candidates // those that may be recycled
		for j := range t.capacity(i) {
			switch v := first.ident[j].Load(); {
			case v == id:
				return place{first, i, j, id}, false
			case v == 0:
				if empty < 0 {
					empty = j
				}
			case v == id&^1:
				moving = true
			case v&1 == 1: // not moving in
				c.add(j, v)
			}
		}
		t.step(stepFirstRead)
		var e, low place
		if empty >= 0 {
			e = place{first, i, empty, 0}
		} else {
			low, _ = t.lowest(&c, first, i, now)
		}
		if first.hasSpilled() || empty < 0 && t.free.Load() > 0 {
			if q, qMoving, ok := t.victimSecond(i, id, first, moves, low, e, moving); ok {
				return q, qMoving
			}
			continue
		}
		if first.moves() != moves {
			continue // the entry may have moved in from its second bucket
		}
		if empty >= 0 {
			return e, moving
		}
		return low, moving
	}
}

// candidates are the entries of a bucket that may be recycled (held, not
// moving in): a mask of their places, their labels for the rank, and
// their idents.
type candidates struct {
	mask, labels uint32
	idents       [slotsPerBucket]uint32
}

// add adds the entry with ident v, in place j.
func (c *candidates) add(j int, v uint32) {
	c.mask |= 1 << j
	c.labels |= uint32(labelOf(v)) << (4 * j)
	c.idents[j] = v
}

// lowest returns the place of lowest rank of the candidates of bucket b,
// number k, and its rank; a place of nil bucket if there are none.
func (t *table) lowest(c *candidates, b *bucket, k uint64, now int64) (place, int64) {
	if c.mask == 0 {
		return place{}, 0
	}
	j, r := t.rank(b, c.mask, c.labels, now)
	return place{b, k, j, c.idents[j]}, r
}

// victimSecond is victim's look at the second bucket of the entry with
// ident id, whose first bucket, number i, victim read with the move count
// moves and found in it p, empty and moving. It returns false if victim
// must look again.
func (t *table) victimSecond(i uint64, id uint32, first *bucket, moves uint32, p, empty place, moving bool) (place, bool, bool) {
	k2 := t.alt(i, id)
	var empty2 place
	if k2 != i { // else the entry has one bucket, read already
		t.step(stepBetweenBuckets)
		second := t.bucket(k2)
		moves2 := second.moves()
		own, e, m := lookIn(second, k2, t.capacity(k2), id)
		if own.b != nil {
			return own, false, true
		}
		if second.moves() != moves2 {
			return place{}, false, false // see below
		}
		empty2, moving = e, moving || m
	}
	if first.moves() != moves {
		// The entry may have moved from the bucket read second to the one
		// read first in between, read in neither (rule 1): look again
		// rather than add a copy of it.
		return place{}, false, false
	}
	switch {
	case empty.b != nil:
		return empty, moving, true
	case empty2.b != nil:
		return empty2, moving, true
	case !moving && t.free.Load() > t.keep:
		if q, ok := t.relocate(i, k2); ok {
			return q, false, true
		}
	}
	return p, moving, true
}

// lookIn looks in bucket b, number k, of n places, for the entry with
// ident id, and returns its place if there, else the first empty place,
// and whether the entry is moving in.
func lookIn(b *bucket, k uint64, n int, id uint32) (own, empty place, moving bool) {
	for j := range n {
		switch b.ident[j].Load() {
		case id:
			return place{b, k, j, id}, place{}, false
		case 0:
			if empty.b == nil {
				empty = place{b, k, j, 0}
			}
		case id &^ 1:
			moving = true
		}
	}
	return place{}, empty, moving
}

// victimSmall is victim for a table of one set, searched in order: the
// entry's place, else the first empty place, else that of the entry of
// lowest rank (the first such).
func (t *table) victimSmall(id uint32, now int64) (p place, moving bool) {
	pg := t.page(0) // a small table is one page
	for k := range t.buckets {
		own, empty, m := lookIn(&pg[k], k, t.capacity(k), id)
		switch {
		case own.b != nil:
			return own, false
		case empty.b != nil:
			return empty, moving || m
		}
		moving = moving || m
	}
	lowest := int64(0)
	for k := range t.buckets {
		b := &pg[k]
		var c candidates
		for j := range t.capacity(k) {
			switch v := b.ident[j].Load(); {
			case v == id: // added by another goroutine since the first look
				return place{b, k, j, id}, false
			case v == id&^1:
				moving = true
			case v&1 == 1: // not moving in
				c.add(j, v)
			}
		}
		if q, r := t.lowest(&c, b, k, now); q.b != nil && (p.b == nil || r < lowest) {
			p, lowest = q, r
		}
	}
	return p, moving
}

// relocate makes room in bucket a or b, both full, the two buckets of a
// new entry, by moving one of their entries to its other bucket, where it
// takes an empty place, or where room is made the same way first (up to
// maxMoves moves in a chain, the shortest found). It returns the place
// emptied, held by the caller (its ident is the moved entry's, moving in),
// and false if no such move could be made. It runs only while more than 1
// in 128 of the table's places were never filled (see free): so a table
// fills to about 99% of its places, as a cuckoo hash table does, before it
// recycles an entry.
func (t *table) relocate(a, b uint64) (place, bool) {
	for depth := 1; depth <= maxMoves; depth++ {
		for _, k := range [2]uint64{a, b} {
			if p, ok := t.moveAside(k, depth, ^uint64(0)); ok {
				return p, true
			}
			if a == b {
				break
			}
		}
	}
	return place{}, false
}

// maxMoves bounds the entries that relocate moves to make room for one: up
// to 10 + 50 + 250 buckets looked at, only while the table has room.
// Max-table-size distinct entries are 97% held with one move at most,
// 98.5% with two, 99% with three (near the most that two choices of five
// places can hold).
const maxMoves = 3

// moveAside moves an entry of bucket k (not one whose other bucket is not)
// to its other bucket, which has an empty place or, with depth over 1, is
// given one by moveAside, and returns the place it left, held by the
// caller.
func (t *table) moveAside(k uint64, depth int, not uint64) (place, bool) {
	b := t.bucket(k)
	for j := range t.capacity(k) {
		y := b.ident[j].Load()
		if y&1 == 0 {
			continue // empty, or moving in
		}
		c := t.alt(k, y)
		if c == k || c == not {
			continue
		}
		if depth > 1 {
			to, ok := t.moveAside(c, depth-1, k)
			if !ok {
				continue
			}
			v, ok := t.claim(b, j, y)
			if !ok { // y has gone meanwhile: leave the place in c empty
				to.b.ident[to.j].Store(0)
				t.free.Add(1)
				continue
			}
			t.put(to, y, v, b.inSecond(j), b)
			return place{b, k, j, y &^ 1}, true
		}
		if to, ok := t.takeEmpty(c); ok {
			v, ok := t.claim(b, j, y)
			if !ok {
				to.b.ident[to.j].Store(0) // y has gone meanwhile
				t.free.Add(1)
				break
			}
			t.put(to, y, v, b.inSecond(j), b)
			return place{b, k, j, y &^ 1}, true
		}
	}
	return place{}, false
}

// takeEmpty takes an empty place of bucket c for an entry about to move
// in: its ident then reads as moving in (as a place emptied by moveAside
// does), so that no new entry takes it meanwhile.
func (t *table) takeEmpty(c uint64) (place, bool) {
	bc := t.bucket(c)
	for e := range t.capacity(c) {
		if bc.ident[e].Load() == 0 && bc.ident[e].CompareAndSwap(0, 0x1e) { // any ident moving in
			t.free.Add(-1)
			return place{bc, c, e, 0x1e}, true
		}
	}
	return place{}, false
}

// claim takes the entry with ident y out of place j of bucket b for a
// move: its ident then reads as moving in, so that searches for it wait,
// and its word, which it returns, is swapped into a new generation, so
// that an update that read it before fails (rule 4).
func (t *table) claim(b *bucket, j int, y uint32) (uint64, bool) {
	if !b.ident[j].CompareAndSwap(y, y&^1) {
		return 0, false
	}
	for {
		v := b.word[j].Load()
		if b.word[j].CompareAndSwap(v, v+generationOne) { // the generation, in the top bits, wraps
			return v, true
		}
	}
}

// put moves the entry with ident y and word v out of bucket from into
// place p, which the caller holds (its ident moving in), in y's other
// bucket: its first if wasSecond, else its second.
func (t *table) put(p place, y uint32, v uint64, wasSecond bool, from *bucket) {
	if !wasSecond {
		from.addSpill() // before y can be seen in its second bucket (rule 2)
	}
	p.b.setInSecond(p.j, !wasSecond)
	renew(&p.b.word[p.j], v)
	p.b.ident[p.j].Store(y)
	t.step(stepVisible)
	// A search for y reads y's two buckets one after the other: it may read
	// this one before y came, and y's old place after a new entry took it,
	// and see y in neither; in a chain of moves, p read as the entry that
	// moved out of it, not as y moving in, so nothing said to wait.
	// Counted here, before y's old place is let go (its ident reads as y
	// moving in until moveAside's caller puts another entry there), the
	// move changes the count that the search reads before and after, and
	// it looks again (rule 1). A move to y's first bucket lowers its spill
	// count in the same step (rule 3).
	if wasSecond {
		p.b.dropSpill(true)
	} else {
		p.b.state.Add(moveOne)
	}
	t.step(stepMovedIn)
}

// sweepBuckets bounds the buckets that one sweep looks at: 2 MB of table,
// 163,840 entries, so that a table of the default size is swept whole.
const sweepBuckets = 32768

// sweep calls visit for each entry held in up to sweepBuckets buckets,
// from where the last sweep stopped, with its id for events (entryID). A
// visit may change the entry's word with cas; sweeps run one at a time.
func (t *table) sweep(visit func(e entry, id uint64)) {
	t.sweepMu.Lock()
	defer t.sweepMu.Unlock()
	for range min(sweepBuckets, t.buckets) {
		i := t.sweepAt
		if t.sweepAt++; t.sweepAt == t.buckets {
			t.sweepAt = 0
		}
		p := t.pages[i/pageBuckets].Load()
		if p == &noPage {
			continue
		}
		b := &p[i%pageBuckets]
		for j := range t.capacity(i) {
			if id := b.ident[j].Load(); id&1 == 1 { // not empty, not moving in
				visit(entry{b, j, id}, t.entryIDAt(i, id))
			}
		}
	}
}

// entryIDAt identifies the entry with ident id in bucket k for events: its
// ident and the lower of its two buckets (0 in a small table), unique
// among the entries held at one time and the same in either bucket.
func (t *table) entryIDAt(k uint64, id uint32) uint64 {
	if t.small() {
		return uint64(id)
	}
	return min(k, t.alt(k, id))<<32 | uint64(id)
}

// entryID is entryIDAt for the entry whose key is key.
func (t *table) entryID(key uint64, label uint8) uint64 {
	return t.entryIDAt(t.index(key), identOf(key, label))
}
