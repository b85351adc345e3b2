package rrl

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// The tests of the table's rules (see table.go): each replays, with the
// table's step hook, the interleaving its rule is for, and fails when the
// rule is taken out.

// rulesTable returns a table of 1000 places and the ident y of an entry
// whose two buckets, i and k2, differ.
func rulesTable(seed uint64) (tb *table, i, k2 uint64, y uint32, rng *rand.Rand) {
	tb = newTable(1000, accountRank)
	rng = rand.New(rand.NewPCG(seed, seed+1))
	for k2 == i {
		key := rng.Uint64()
		i, y = tb.index(key), identOf(key, uint8(LimitResponses))
		k2 = tb.alt(i, y)
	}
	return tb, i, k2, y, rng
}

// filler returns the ident of an entry whose two buckets are k and one of
// neither i nor k2.
func filler(tb *table, rng *rand.Rand, k, i, k2 uint64) uint32 {
	for {
		id := identOf(rng.Uint64(), uint8(LimitResponses))
		if c := tb.alt(k, id); c != i && c != k2 && c != k {
			return id
		}
	}
}

// setEntry writes entry id with word w into place j of bucket k, counted
// as filled; second says that k is its second bucket, whose first is
// first.
func setEntry(tb *table, k uint64, j int, id uint32, w uint64, second bool, first uint64) {
	b := tb.bucket(k)
	b.word[j].Store(w)
	b.ident[j].Store(id)
	tb.free.Add(-1)
	if second {
		b.setInSecond(j, true)
		tb.bucket(first).addSpill()
	}
}

// pausing runs a step hook on tb that stops the first goroutine to reach
// each step in at, until the test lets it go.
type pausing struct {
	at map[tableStep]*pause
}

type pause struct {
	armed   atomic.Bool
	reached chan struct{}
	resume  chan struct{}
}

func pauseAt(tb *table, steps ...tableStep) *pausing {
	p := &pausing{at: map[tableStep]*pause{}}
	for _, s := range steps {
		q := &pause{reached: make(chan struct{}), resume: make(chan struct{})}
		q.armed.Store(true)
		p.at[s] = q
	}
	tb.hooks.step = func(s tableStep) {
		if q := p.at[s]; q != nil && q.armed.CompareAndSwap(true, false) {
			close(q.reached)
			<-q.resume
		}
	}
	return p
}

// wait waits for a goroutine to reach step s, and let lets it go on.
func (p *pausing) wait(s tableStep) { <-p.at[s].reached }
func (p *pausing) let(s tableStep)  { close(p.at[s].resume) }

// secondBucketSetup puts y in its second bucket k2, alone there, and fills
// its first bucket i but for empty places.
func secondBucketSetup(tb *table, rng *rand.Rand, i, k2 uint64, y uint32, empty int) {
	setEntry(tb, k2, 0, y, uint64(balance(0).withTat(42)), true, i)
	for j := range slotsPerBucket - empty {
		setEntry(tb, i, j, filler(tb, rng, i, i, k2), 0, false, 0)
	}
}

// moveToFirst moves y, alone in its second bucket k2, to place j of its
// first bucket i, as moveAside does, and lets its old place go.
func moveToFirst(tb *table, i, k2 uint64, j int, y uint32) {
	from, to := tb.bucket(k2), tb.bucket(i)
	if !to.ident[j].CompareAndSwap(0, 0x1e) {
		panic("place taken")
	}
	tb.free.Add(-1)
	v, ok := tb.claim(from, 0, y)
	if !ok {
		panic("claim failed")
	}
	tb.put(place{to, i, j, 0x1e}, y, v, from.inSecond(0), from)
	from.ident[0].Store(0)
	from.setInSecond(0, false)
	tb.free.Add(1)
}

// TestRuleSearchRereadsMoves (rule 1): a search reads the entry's first
// bucket, then the entry moves there from its second, lowering the spill
// count; the search, which would now read only the first bucket and find
// nothing, sees the move count changed and looks again. Taking out the
// second read of the move count (look's first.moves() == moves, victim's
// first.moves() != moves) fails it: lookup says the entry is gone for
// sure, and findOrAdd adds a copy.
func TestRuleSearchRereadsMoves(t *testing.T) {
	t.Run("lookup", func(t *testing.T) {
		tb, i, k2, y, rng := rulesTable(1)
		secondBucketSetup(tb, rng, i, k2, y, 1)
		p := pauseAt(tb, stepFirstRead)
		var e entry
		var found, sure bool
		done := make(chan struct{})
		go func() { e, found, sure = tb.lookup(i, y); close(done) }()
		p.wait(stepFirstRead)
		moveToFirst(tb, i, k2, slotsPerBucket-1, y)
		p.let(stepFirstRead)
		<-done
		if !found || e.b != tb.bucket(i) {
			t.Errorf("lookup: found %v (sure %v) in bucket %p; want y in its first bucket %p", found, sure, e.b, tb.bucket(i))
		}
	})
	t.Run("findOrAdd", func(t *testing.T) {
		tb, i, k2, y, rng := rulesTable(2)
		secondBucketSetup(tb, rng, i, k2, y, 2)
		p := pauseAt(tb, stepFirstRead)
		var e entry
		var added bool
		done := make(chan struct{})
		go func() { e, added, _ = tb.findOrAdd(i, y, 0, 7); close(done) }()
		p.wait(stepFirstRead)
		moveToFirst(tb, i, k2, slotsPerBucket-1, y) // the last empty place: the search would take the other
		p.let(stepFirstRead)
		<-done
		if added || e.b != tb.bucket(i) || e.j != slotsPerBucket-1 {
			t.Errorf("findOrAdd: added %v, place %d of %p; want y found in place %d of its first bucket %p",
				added, e.j, e.b, slotsPerBucket-1, tb.bucket(i))
		}
	})
}

// TestRuleAddSpillsFirst (rule 2): a search reads a new entry's first
// bucket, full, while the entry is added to its second; with the spill
// count raised before the entry is visible there, the search reads the
// second bucket and finds it. Raising the count after the entry is
// visible (after add's hook stepVisible) fails it: the search says the
// entry is gone for sure, and a Debit would add it again.
func TestRuleAddSpillsFirst(t *testing.T) {
	tb, i, k2, y, rng := rulesTable(3)
	for j := range slotsPerBucket {
		setEntry(tb, i, j, filler(tb, rng, i, i, k2), 0, false, 0)
	}
	p := pauseAt(tb, stepFirstRead, stepVisible)
	var found, sure bool
	searched := make(chan struct{})
	go func() { _, found, sure = tb.lookup(i, y); close(searched) }()
	p.wait(stepFirstRead) // the search has read the first bucket: no y
	var added bool
	addedDone := make(chan struct{})
	go func() { _, added, _ = tb.findOrAdd(i, y, 0, 7); close(addedDone) }()
	p.wait(stepVisible) // y is visible in its second bucket
	p.let(stepFirstRead)
	<-searched
	p.let(stepVisible)
	<-addedDone
	if !added {
		t.Fatal("the entry was not added")
	}
	if !found {
		t.Errorf("a search during the add found the entry %v (sure %v); want it found in its second bucket", found, sure)
	}
}

// TestRuleMoveCountedWithSpill (rule 3): a search reads an entry's first
// bucket before the entry moves there from its second; the move lowers
// the spill count, and the search reads the count lowered before the move
// is done. Lowering the spill count and counting the move in one step
// lets the search see the move and look again. Counting the move apart,
// after the spill count (after put's hook stepMovedIn), fails it.
func TestRuleMoveCountedWithSpill(t *testing.T) {
	tb, i, k2, y, rng := rulesTable(4)
	secondBucketSetup(tb, rng, i, k2, y, 1)
	p := pauseAt(tb, stepFirstRead, stepMovedIn)
	var e entry
	var found, sure bool
	searched := make(chan struct{})
	go func() { e, found, sure = tb.lookup(i, y); close(searched) }()
	p.wait(stepFirstRead)
	moved := make(chan struct{})
	go func() { moveToFirst(tb, i, k2, slotsPerBucket-1, y); close(moved) }()
	p.wait(stepMovedIn) // the mover has lowered the spill count, and is held
	p.let(stepFirstRead)
	<-searched
	p.let(stepMovedIn)
	<-moved
	if !found || e.b != tb.bucket(i) {
		t.Errorf("lookup: found %v (sure %v); want y found in its first bucket", found, sure)
	}
}

// TestRuleClaimRenews (rule 4): an update that read an entry's word before
// the entry moved aside to make room fails its compare-and-swap, and the
// entry keeps, in its new place, the word it moved with. Without claim's
// new generation the swap lands on the old place, which the entry has
// left (rule 5 lets it: the place still reads as the entry moving), and
// the update is lost.
func TestRuleClaimRenews(t *testing.T) {
	tb, i, k2, y, _ := rulesTable(5)
	setEntry(tb, i, 0, y, uint64(balance(0).withTat(42)), false, 0)
	e, ok := tb.findFirst(i, y)
	if !ok {
		t.Fatal("y not found")
	}
	old, _ := e.load()
	p, ok := tb.moveAside(i, 1, ^uint64(0))
	if !ok || p.b != e.b || p.j != e.j {
		t.Fatalf("moveAside: %v, place %d; want y's place %d emptied", ok, p.j, e.j)
	}
	if e.cas(old, uint64(balance(old).withTat(43))) {
		t.Error("an update read before the move landed on the place the entry left")
	}
	moved, found, _ := tb.lookup(i, y)
	if w, _ := moved.balance(); !found || moved.b != tb.bucket(k2) || w.tat(0) != 42 {
		t.Errorf("after the move: found %v in %p (second %p), tat %d; want tat 42 in the second bucket", found, moved.b, tb.bucket(k2), w.tat(0))
	}
}

// TestRuleNewGeneration (rule 4): every entry that takes a place, added or
// moved in, and every entry claimed for a move, leaves the place's word in
// a new generation, its caller's bits as given.
func TestRuleNewGeneration(t *testing.T) {
	var w atomic.Uint64
	w.Store(5<<generationShift | 123)
	if was := renew(&w, 7<<generationShift|456); was != 5<<generationShift|123 {
		t.Errorf("renew returned %#x", was)
	}
	if got := w.Load(); got != 6<<generationShift|456 {
		t.Errorf("renew left %#x, want generation 6 and the new caller bits", got)
	}
	w.Store(7<<generationShift | 1)
	renew(&w, 0)
	if got := w.Load(); got != 0 {
		t.Errorf("renew of generation 7 left %#x, want generation 0 (modulo 8)", got)
	}

	tb, i, _, y, _ := rulesTable(6)
	setEntry(tb, i, 0, y, 3<<generationShift|99, false, 0)
	b := tb.bucket(i)
	if _, ok := tb.claim(b, 0, y); !ok || b.word[0].Load() != 4<<generationShift|99 {
		t.Errorf("claim left %#x, want generation 4, the entry's own bits", b.word[0].Load())
	}
}

// TestRuleTakeBack (rule 5): an update that read an entry's word, then
// stood while eight entries went through its place, so that the place's
// generation came round to the one it read, with the same caller bits,
// finds another entry there after its swap, and takes the swap back.
// Without the ident's check after the swap, the update lands on the
// eighth entry.
func TestRuleTakeBack(t *testing.T) {
	tb, i, k2, y, rng := rulesTable(7)
	first := uint64(balance(0).withTat(1000))
	setEntry(tb, i, 0, y, first, false, 0)
	for j := 1; j < slotsPerBucket; j++ { // the others more in debt: recycled last
		setEntry(tb, i, j, filler(tb, rng, i, i, k2), uint64(balance(0).withTat(1<<40)), false, 0)
	}
	tb.free.Store(0) // full: a new entry recycles
	e, _ := tb.findFirst(i, y)
	old, _ := e.load()
	var last uint32
	for range 1 << generationBits {
		last = filler(tb, rng, i, i, k2)
		_, added, r := tb.findOrAdd(i, last, 0, first) // each new one as the one before
		if !added || !r.ok {
			t.Fatal("a new entry did not recycle")
		}
	}
	b := tb.bucket(i)
	if b.ident[0].Load() != last || b.word[0].Load() != old {
		t.Fatalf("place 0 holds %#x with word %#x; want the eighth entry with the word y had, %#x", b.ident[0].Load(), b.word[0].Load(), old)
	}
	if e.cas(old, old+1) {
		t.Error("the stale update reported success")
	}
	if got := b.word[0].Load(); got != old {
		t.Errorf("the eighth entry's word is %#x, want %#x as it was", got, old)
	}
}

// TestLookupWaitsForMovingEntry: a lookup that finds the entry it seeks
// moving (claimed for a move, not yet in its new place) waits for the move
// and finds the entry where it went; one whose move never ends is
// reported as not found, and not sure, after lookupWaits waits.
func TestLookupWaitsForMovingEntry(t *testing.T) {
	tb, i, k2, y, _ := rulesTable(8)
	setEntry(tb, i, 0, y, uint64(balance(0).withTat(42)), false, 0)
	from := tb.bucket(i)
	v, ok := tb.claim(from, 0, y)
	if !ok {
		t.Fatal("claim failed")
	}
	to, ok := tb.takeEmpty(k2)
	if !ok {
		t.Fatal("no room in the second bucket")
	}
	waits := 0
	tb.hooks.wait = func() {
		if waits++; waits == 3 { // the mover goes on
			tb.put(to, y, v, false, from)
		}
	}
	e, found, sure := tb.lookup(i, y)
	if w, _ := e.balance(); !found || !sure || e.b != tb.bucket(k2) || w.tat(0) != 42 || waits != 3 {
		t.Errorf("after %d waits: found %v, sure %v, in %p; want y found in its second bucket %p after 3", waits, found, sure, e.b, tb.bucket(k2))
	}

	tb, i, _, y, _ = rulesTable(9)
	setEntry(tb, i, 0, y, 0, false, 0)
	tb.claim(tb.bucket(i), 0, y) // a move that stays half done
	tb.hooks.wait, tb.hooks.lookupWaits = func() {}, 10
	if _, found, sure := tb.lookup(i, y); found || sure {
		t.Errorf("an entry moving for good: found %v, sure %v; want neither", found, sure)
	}
}
