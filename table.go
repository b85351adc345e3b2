package rrl

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The table of accounts is an array of buckets, each one 64-byte cache
// line holding five accounts: 12 bytes an account and 4 spare. An
// account's key (see hashKey.account) picks its first bucket with its high
// half and tells it apart from the others in a bucket with a 27-bit tag
// from its low half, beside its 4-bit kind; a hash of that ident picks its
// second bucket (see alt). A bucket holds an account's two words: its
// ident (tag, kind) and its balance (see balance). A Debit of an account
// held in its first bucket reads and writes that bucket alone: it finds
// the account by its ident and debits it with one compare-and-swap of the
// balance, without a lock. One held in its second bucket costs a read of
// both, as does a new one while its first bucket has accounts in their
// second, or the table empty places.
//
// A new account takes an empty place in its first bucket, else in its
// second. While the table has places never filled, a new account whose
// two buckets are full makes room by moving an account of theirs to its
// other bucket, up to three moves in a chain (see relocate), as a cuckoo
// hash table does: so the table fills to about 99% before it recycles an
// account, where with one bucket per account a bucket recycled while the
// table had room, and max-table-size accounts left 82% held. In a full
// table a new account takes an empty place of its two buckets if the
// table has one, else the place of the account of lowest rank of its
// first bucket (see rank): an account in credit goes before one in debt,
// the one with the most credit first, and among accounts in debt the one
// least in debt goes first. So the account of a network under a flood,
// deep in debt, survives a spray of spoofed sources, even of sources that
// drive their own accounts into debt, unless every account of its bucket
// is deeper in debt still. Since accounts are recycled in their first
// bucket alone, those that went to their second bucket while the table
// filled leave it as the table turns over: a bucket counts the accounts
// whose first bucket it is that are in their second (see bucket.state),
// and a search reads the second bucket only while that count is not 0,
// or to find an empty place while the table has one. So a new account in
// a full table, like a held one, costs one line once the table has turned
// over. Where BIND recycles the least recently used of all accounts, this
// table recycles among five; it never refuses a new account and never
// scans.
//
// A table of at most one page (320 accounts) is one set: an account may
// take any place in it, searched in order, and the account of lowest rank
// in the whole table is recycled. A small table then behaves the same in
// every RRL, whatever the secrets of its hash, so that a replay of
// captured traffic decides as the server did; its Debits search up to 64
// buckets, which fit in the processor's first-level cache.
//
// The array is allocated in pages of 64 buckets (4 KB, 320 accounts), each
// on first use, so that a table holding few accounts costs little: an empty
// table is an array of page pointers, 8 bytes for every 320 accounts of
// max-table-size (2.5 KB for the default size), and each account added
// costs at most a page until the table is a page for every 320 accounts.

// slotsPerBucket is the number of accounts in a bucket.
const slotsPerBucket = 5

// bucket is one cache line of accounts. An account's ident says which
// account a place holds: 0 for none; its tag, its kind and a set low bit;
// the same with the low bit clear while it moves in. Its balance is valid
// while its ident is.
type bucket struct {
	balance [slotsPerBucket]atomic.Uint64
	ident   [slotsPerBucket]atomic.Uint32
	// state is the bucket's spare word (see the state bits below): which
	// of its places hold an account in its second bucket, how many
	// accounts whose first bucket this is are in their second (so that a
	// search that does not find an account here reads its second bucket
	// only while that count is not 0), and how many accounts have moved
	// in (see put), so that victim can tell when its look at an
	// account's two buckets, one after the other, may have missed the
	// account as it moved between them.
	state atomic.Uint32
}

// The bits of a bucket's state word: bit j (0 to 4) is set while place j
// holds an account in its second bucket (see inSecond); then come the
// spill count and the move count.
const (
	// The spill count: the accounts whose first bucket this is held in
	// their second, or on their way there. It saturates at its largest
	// value, which then stays: 2,047, where a bucket is the first of five
	// accounts on average, and the keyed hash leaves nobody to aim more
	// at one.
	spillShift = slotsPerBucket
	spillOne   = 1 << spillShift
	spillMax   = 1<<(moveShift-spillShift) - 1 // the bits up to the move count
	spillMask  = spillMax << spillShift
	// The move count, modulo 2^16: the accounts moved into this bucket.
	moveShift = 16
	moveOne   = 1 << moveShift
)

// hasSpilled reports whether an account whose first bucket is b may be in
// its second.
func (b *bucket) hasSpilled() bool { return b.state.Load()&spillMask != 0 }

// addSpill counts an account whose first bucket is b going to its second.
func (b *bucket) addSpill() {
	for {
		w := b.state.Load()
		if w&spillMask == spillMask || b.state.CompareAndSwap(w, w+spillOne) {
			return
		}
	}
}

// dropSpill counts an account whose first bucket is b leaving its second:
// recycled, or moved to b. With in true, the account moved into b, which
// the move count records too (see put).
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

// inSecond reports whether place j holds an account in its second bucket.
// Only the Debit holding the place (its ident moving in) may ask, or
// change it with setInSecond.
func (b *bucket) inSecond(j int) bool { return b.state.Load()&(1<<j) != 0 }

// setInSecond records whether place j holds an account in its second
// bucket.
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

// identOf returns the ident of the account whose key is key. Tag 0 is
// read as tag 1, so that no ident moving in is 0.
func identOf(key uint64, kind LimitKind) uint32 {
	return max(uint32(key)&^0x1f, 0x20) | uint32(kind)<<1 | 1
}

// kindOf returns the kind of the account whose ident is id.
func kindOf(id uint32) LimitKind { return LimitKind(id >> 1 & 0xf) }

// bucketTable is the table of accounts.
type bucketTable struct {
	buckets     uint64 // number of buckets
	base, extra uint64 // bucket i holds base accounts, one more if i < extra
	sets        uint64 // number of sets: buckets, or 1 in a small table
	setBuckets  uint64 // buckets in a set: 1, or all of a small table
	pages       []atomic.Pointer[page]

	// free counts the places never filled: while it is above keep, a new
	// account whose two buckets are full moves an account aside rather
	// than recycle one (see relocate). The last keep places, 1 in 128,
	// are left to new accounts that find them in their own buckets: the
	// fewer places are left, the further relocate must search for one,
	// and under a spray it would search on every Debit.
	free atomic.Int64
	keep int64

	sweepMu sync.Mutex
	sweepAt uint64 // the bucket where the next sweep starts
}

// page is the unit in which a table is allocated: 64 buckets, 4 KB.
type page [pageBuckets]bucket

const pageBuckets = 64

func newBucketTable(size int) *bucketTable {
	nb := (uint64(size) + slotsPerBucket - 1) / slotsPerBucket
	t := &bucketTable{buckets: nb, base: uint64(size) / nb, extra: uint64(size) % nb, sets: nb, setBuckets: 1}
	if nb <= smallBuckets {
		t.sets, t.setBuckets = 1, nb
	}
	t.free.Store(int64(size))
	t.keep = int64(size) / 128
	t.pages = make([]atomic.Pointer[page], (nb+pageBuckets-1)/pageBuckets)
	for i := range t.pages {
		t.pages[i].Store(&noPage)
	}
	return t
}

// smallBuckets is the size, in buckets, of the largest table that is one
// set: a page, 320 accounts.
const smallBuckets = pageBuckets

// index returns the number of the set of the account whose key is key: the
// key's high half scaled to the number of sets. In a table larger than a
// page, set i is bucket i, the account's first bucket.
func (t *bucketTable) index(key uint64) uint64 { return (key >> 32) * t.sets >> 32 }

// alt returns the other bucket of the account with ident id in bucket i
// of a table larger than a page: its second bucket if i is its first, its
// first if i is its second. The two add up to a number that the ident
// picks, modulo the buckets, so that either gives the other without the
// key: a hash of the ident, which comes from the key's low half, while its
// first bucket comes from the high half, so the two are independent. An
// account whose two buckets are one has one bucket.
func (t *bucketTable) alt(i uint64, id uint32) uint64 {
	h := uint64(uint32(id|1) * 0x9e3779b9) // the same whether moving in or not
	sum := h*t.buckets>>32 + t.buckets - i
	if sum >= t.buckets {
		sum -= t.buckets
	}
	return sum
}

// bucket returns bucket i, allocating its page if it has none yet.
func (t *bucketTable) bucket(i uint64) *bucket { return &t.page(i)[i%pageBuckets] }

// page returns the page of bucket i, allocating it if it has none yet.
func (t *bucketTable) page(i uint64) *page {
	at := &t.pages[i/pageBuckets]
	if p := at.Load(); p != &noPage {
		return p
	}
	return newPage(at)
}

// newPage allocates a page at at, unless another Debit did first, and
// returns it.
func newPage(at *atomic.Pointer[page]) *page {
	p := new(page)
	if !at.CompareAndSwap(&noPage, p) {
		p = at.Load() // another Debit allocated it first
	}
	return p
}

// noPage stands for every page not yet allocated, so that a search need
// not tell it apart: it is never written, and its idents, all 0, match no
// account.
var noPage page

// capacity returns how many accounts bucket i holds: five, except in a
// table whose size is not a multiple of five.
func (t *bucketTable) capacity(i uint64) int {
	if i < t.extra {
		return int(t.base) + 1
	}
	return int(t.base)
}

// accountRef refers to an account in its bucket: its place and its ident,
// by which load checks that the place still holds it.
type accountRef struct {
	b  *bucket
	i  int
	id uint32
}

// load returns the account's balance, and false if the account has lost
// its place since the reference was made.
func (a accountRef) load() (balance, bool) {
	v := balance(a.b.balance[a.i].Load())
	// A new account moving in changes the ident before the balance:
	// reading the ident after the balance proves that the balance is
	// this account's.
	return v, a.b.ident[a.i].Load() == a.id
}

// store replaces the balance old, as load returned it, by new, and
// reports whether it did: false if another Debit changed it, or a new
// account moved in, since.
func (a accountRef) store(old, new balance) bool {
	return a.b.balance[a.i].CompareAndSwap(uint64(old), uint64(new))
}

// gone describes an account whose limiting episode ended without a Debit
// of its own (its place taken, or found quiet), for Event; the zero gone
// is none.
type gone struct {
	account uint64 // Event.Account
	kind    LimitKind
}

// accountIDAt is Event.Account for the account with ident id in bucket k:
// its ident and the lower of its two buckets (0 in a small table), unique
// among the accounts held at one time and the same in either bucket.
func (t *bucketTable) accountIDAt(k uint64, id uint32) uint64 {
	if t.setBuckets != 1 {
		return uint64(id)
	}
	return min(k, t.alt(k, id))<<32 | uint64(id)
}

// accountID is Event.Account for the account whose key is key.
func (t *bucketTable) accountID(key uint64, kind LimitKind) uint64 {
	return t.accountIDAt(t.index(key), identOf(key, kind))
}

// maxWaits bounds how often findOrAdd looks again at a set where the
// account it seeks is moving in, yielding the processor in between, before
// it adds the account itself. The wait is for two stores of another Debit:
// of one adding the account, or of one moving it to its other bucket to
// make room (see moveAside: from claim to put); it ends early only if that
// Debit's goroutine is held up between them. Then the account is added
// twice: the copy in the later place lies unused until recycled, and the
// debits made to it are lost; and as the wait found the account moving,
// no account is moved aside for the copy, which may take the place of
// another account though the table has room. The same can happen,
// without a wait, when two Debits add the same account at once: each
// scans the set before the other's compare-and-swap of the ident, and
// they choose different places (in a full set whose balances changed
// between the two scans). Two that choose the same place cannot both
// take it: the loser sees the account moving in when it looks again.
// Tests that count every debit raise it, so that no wait runs out.
var maxWaits = 100

// find returns the account with ident id in set i if the table holds it
// and the set is one bucket (in a small table it returns false, leaving
// the search to findOrAdd). It looks in the account's first bucket, i,
// then in its second.
func (t *bucketTable) find(i uint64, id uint32) (accountRef, bool) {
	if ref, ok := t.findFirst(i, id); ok {
		return ref, true
	}
	if t.setBuckets != 1 {
		return accountRef{}, false
	}
	return t.findSecond(i, id)
}

// findFirst is find in the account's first bucket alone. It is small
// enough to be inlined into every Debit, which looks no further: an
// account held in its first bucket, as nine in ten are in a full table,
// costs one cache line; findOrAdd finds the others.
func (t *bucketTable) findFirst(i uint64, id uint32) (accountRef, bool) {
	if t.setBuckets != 1 {
		return accountRef{}, false
	}
	b := &t.pages[i/pageBuckets].Load()[i%pageBuckets]
	for j := range slotsPerBucket { // places past the capacity stay empty
		if b.ident[j].Load() == id {
			return accountRef{b, j, id}, true
		}
	}
	return accountRef{}, false
}

// findSecond is find's look in the second bucket of the account with
// ident id whose first is i.
func (t *bucketTable) findSecond(i uint64, id uint32) (accountRef, bool) {
	if !t.pages[i/pageBuckets].Load()[i%pageBuckets].hasSpilled() {
		return accountRef{}, false
	}
	k := t.alt(i, id)
	b := &t.pages[k/pageBuckets].Load()[k%pageBuckets]
	for j := range slotsPerBucket {
		if b.ident[j].Load() == id {
			return accountRef{b, j, id}, true
		}
	}
	return accountRef{}, false
}

// findOrAdd returns the account with ident id in set i and false if the
// table holds it; else it adds the account with the balance first (its
// generation aside), the place it took chosen by victim, and returns it,
// true, and the account whose place it took, if that one was being
// limited. A Debit passes as first a new account's balance with its first
// response already charged, so that adding and charging are one step.
func (t *bucketTable) findOrAdd(i uint64, id uint32, now int64, first balance, s *stripe) (accountRef, gone, bool) {
	for waits := 0; ; waits++ {
		p, moving := t.victim(i, id, now)
		switch {
		case p.old == id:
			return accountRef{p.b, p.j, id}, gone{}, false
		case moving && waits < maxWaits, p.b == nil:
			yieldProcessor() // let the accounts moving in settle
			continue
		}
		if ref, g, ok := t.add(i, p, id, first, s); ok {
			return ref, g, true
		}
	}
}

// yieldProcessor lets other goroutines run while findOrAdd waits; tests
// replace it to act during the wait.
var yieldProcessor = runtime.Gosched

// place is a place in a set, its bucket's number k, and the ident it
// held when victim chose it: 0 if empty, a moving-in ident if relocate
// emptied it for the caller.
type place struct {
	b   *bucket
	k   uint64
	j   int
	old uint32
}

// add moves the account with ident id into place p of set i with the
// balance first, in a generation of its own. It fails if another Debit
// changed the place since victim chose it.
func (t *bucketTable) add(i uint64, p place, id uint32, first balance, s *stripe) (accountRef, gone, bool) {
	b, j := p.b, p.j
	var from *bucket // the account's first bucket, if p is in its second
	if t.setBuckets == 1 && p.k != i {
		from = t.bucket(i)
		from.addSpill() // before the account can be seen in its second bucket
	}
	if !b.ident[j].CompareAndSwap(p.old, id&^1) {
		if from != nil {
			from.dropSpill(false)
		}
		return accountRef{}, gone{}, false
	}
	if p.old&1 == 1 && b.inSecond(j) { // the account recycled was in its second bucket
		t.bucket(t.alt(p.k, p.old)).dropSpill(false)
	}
	b.setInSecond(j, from != nil)
	// A Debit of the old account that read its ident before it changed may
	// still change its balance: swap in the new one with a new
	// generation, so that such a Debit fails rather than debit the new
	// account (unless eight new accounts moved in while it stood between
	// its read and its write), and so that the old account's last state
	// is known.
	var was balance
	for {
		was = balance(b.balance[j].Load())
		if b.balance[j].CompareAndSwap(uint64(was), uint64(first.withGeneration(was.generation()+1))) {
			break
		}
	}
	b.ident[j].Store(id)
	switch {
	case p.old == 0:
		t.free.Add(-1)
		fallthrough
	case p.old&1 == 0: // emptied by relocate, which took an empty place
		s.held.Add(1)
		return accountRef{b, j, id}, gone{}, true
	}
	s.evictions.Add(1)
	if !was.limited() {
		return accountRef{b, j, id}, gone{}, true
	}
	return accountRef{b, j, id}, gone{t.accountIDAt(p.k, p.old), kindOf(p.old)}, true
}

// victim looks in set i for the account with ident id, and for a place
// for it should it have none. It returns the account's own place if the
// set holds it; else an empty place; else that of the account to recycle
// (see rank); a nil bucket if new accounts are moving into every place.
// It also reports whether the account is moving in, added by another
// Debit that has not finished. It reads the two buckets again if an
// account moved into either while it read them (see put).
func (t *bucketTable) victim(i uint64, id uint32, now int64) (p place, moving bool) {
	if t.setBuckets != 1 {
		return t.victimSmall(id, now)
	}
	// One pass looks for the account, an empty place and the account of
	// lowest rank at once. The account is recycled from its first bucket
	// only, so that accounts leave their second buckets as the table
	// turns over and their first buckets' spill counts fall back to 0:
	// then the second bucket is read only to find an empty place while
	// the table has one.
	first := t.bucket(i)
	for {
		// The first empty place, and the place of lowest rank, by number.
		empty, low, lowID, earliest := -1, -1, uint32(0), int64(0)
		moving = false
		moves := first.moves() // before the idents: see put
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
				if r := t.rank(v, first.balance[j].Load(), now); low < 0 || r < earliest {
					low, lowID, earliest = j, v, r
				}
			}
		}
		p = place{first, i, low, lowID}
		if low < 0 {
			p = place{}
		}
		e := place{}
		if empty >= 0 {
			e = place{first, i, empty, 0}
		}
		if first.hasSpilled() || empty < 0 && t.free.Load() > 0 {
			if q, qMoving, ok := t.victimSecond(i, id, first, moves, p, e, moving); ok {
				return q, qMoving
			}
			continue
		}
		if first.moves() != moves {
			continue // the account may have moved in from its second bucket
		}
		if empty >= 0 {
			return e, moving
		}
		return p, moving
	}
}

// victimSecond is victim's look at the second bucket of the account with
// ident id, whose first bucket, number i, victim read with the move count
// moves and found in it p, empty and moving. It returns false if victim
// must look again.
func (t *bucketTable) victimSecond(i uint64, id uint32, first *bucket, moves uint32, p, empty place, moving bool) (place, bool, bool) {
	k2 := t.alt(i, id)
	var empty2 place
	if k2 != i { // else the account has one bucket, read already
		if betweenBuckets != nil {
			betweenBuckets()
		}
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
		// The account may have moved from the bucket read second to the
		// one read first in between, read in neither (see put): look
		// again rather than add a copy of it.
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

// lookIn looks in bucket b, number k, of n places, for the account with
// ident id, and returns its place if there, else the first empty place,
// and whether the account is moving in.
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

// betweenBuckets, if not nil, is called by victim between its reads of an
// account's two buckets: tests set it to move the account meanwhile.
var betweenBuckets func()

// rank orders the accounts of a full set for recycling: the one with the
// lowest goes first. It is the account's tat, so that an account in
// credit goes before one in debt, the one with the most credit first, and
// of accounts in debt the one least in debt; for a request account, which
// is refused rather than put in debt, it is the tat one second later, as
// if the account owed the second's credit that a new account in its place
// would give its network back. So a network asking faster than its
// request allowance, whose account's tat stays near now, ranks as a
// second in debt, behind every account in credit: recycling its account
// would serve it another second's allowance at once.
func (t *bucketTable) rank(id uint32, v uint64, now int64) int64 {
	r := balance(v).tat(now)
	if kindOf(id).Request() {
		r += requestRankShift
	}
	return r
}

// requestRankShift is what rank adds to the tat of a request account: a
// second, the credit a request account holds at any rate of one request a
// second or more.
const requestRankShift = int64(time.Second)

// victimSmall is victim for a table of one set, searched in order: the
// account's place, else the first empty place, else that of the account
// of lowest rank (the first such).
func (t *bucketTable) victimSmall(id uint32, now int64) (p place, moving bool) {
	pg := t.page(0) // a small table is one page
	for k := range t.buckets {
		b := &pg[k]
		for j := range t.capacity(k) {
			switch b.ident[j].Load() {
			case id:
				return place{b, k, j, id}, false
			case 0:
				return place{b, k, j, 0}, moving
			case id &^ 1:
				moving = true
			}
		}
	}
	earliest := int64(0)
	for k := range t.buckets {
		b := &pg[k]
		for j := range t.capacity(k) {
			switch v := b.ident[j].Load(); {
			case v == id: // added by another Debit since the first look
				return place{b, k, j, id}, false
			case v == id&^1:
				moving = true
			case v&1 == 1: // not moving in
				if r := t.rank(v, b.balance[j].Load(), now); p.b == nil || r < earliest {
					p, earliest = place{b, k, j, v}, r
				}
			}
		}
	}
	return p, moving
}

// relocate makes room in bucket a or b, both full, the two buckets of a
// new account, by moving one of their accounts to its other bucket, where
// it takes an empty place, or where room is made the same way first (up
// to maxMoves moves in a chain, the shortest found). It returns the place
// emptied, held by the caller (its ident is the moved account's, moving
// in), and false if no such move could be made. It runs only while more
// than 1 in 128 of the table's places were never filled (see free): so a
// table fills to about 99% of its places, as a cuckoo hash table does,
// before it recycles an account.
func (t *bucketTable) relocate(a, b uint64) (place, bool) {
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

// maxMoves bounds the accounts that relocate moves to make room for one:
// up to 10 + 50 + 250 buckets looked at, only while the table has room.
// Max-table-size distinct accounts are 97% held with one move at most,
// 98.5% with two, 99% with three (near the most that two choices of five
// places can hold).
const maxMoves = 3

// moveAside moves an account of bucket k (not one whose other bucket is
// not) to its other bucket, which has an empty place or, with depth over
// 1, is given one by moveAside, and returns the place it left, held by
// the caller.
func (t *bucketTable) moveAside(k uint64, depth int, not uint64) (place, bool) {
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
			v, ok := claim(b, j, y)
			if !ok { // y has gone meanwhile: leave the place in c empty
				to.b.ident[to.j].Store(0)
				t.free.Add(1)
				continue
			}
			t.put(to, y, v, b.inSecond(j), b)
			return place{b, k, j, y &^ 1}, true
		}
		bc := t.bucket(c)
		for e := range t.capacity(c) {
			if bc.ident[e].Load() != 0 {
				continue
			}
			v, ok := claim(b, j, y)
			if !ok {
				break
			}
			if !bc.ident[e].CompareAndSwap(0, y&^1) {
				b.ident[j].Store(y) // the place was taken meanwhile: y stays
				break
			}
			t.free.Add(-1)
			t.put(place{bc, c, e, 0}, y, v, b.inSecond(j), b)
			return place{b, k, j, y &^ 1}, true
		}
	}
	return place{}, false
}

// claim takes the account with ident y out of place j of bucket b for a
// move: its ident then reads as moving in, so that Debits seeking it wait,
// and its balance, which it returns, is swapped into a new generation, so
// that a Debit that read it before fails to change it.
func claim(b *bucket, j int, y uint32) (balance, bool) {
	if !b.ident[j].CompareAndSwap(y, y&^1) {
		return 0, false
	}
	for {
		v := balance(b.balance[j].Load())
		if b.balance[j].CompareAndSwap(uint64(v), uint64(v.withGeneration(v.generation()+1))) {
			return v, true
		}
	}
}

// put moves the account with ident y and balance v out of bucket from
// into place p, which the caller holds (its ident moving in), in y's
// other bucket: its first if wasSecond, else its second.
func (t *bucketTable) put(p place, y uint32, v balance, wasSecond bool, from *bucket) {
	if !wasSecond {
		from.addSpill() // before y can be seen in its second bucket
	}
	p.b.setInSecond(p.j, !wasSecond)
	g := balance(p.b.balance[p.j].Load()).generation() + 1
	p.b.balance[p.j].Store(uint64(v.withGeneration(g)))
	p.b.ident[p.j].Store(y)
	// A victim seeking y reads y's two buckets one after the other: it may
	// read this one before y came, and y's old place after a new account
	// took it, and see y in neither; in a chain of moves, p read as the
	// account that moved out of it, not as y moving in, so nothing said
	// to wait. Counted here, before y's old place is let go (its ident
	// reads as y moving in until moveAside's caller puts another account
	// there), the move changes the count that victim reads before and
	// after, and victim looks again. A move to y's first bucket lowers its
	// spill count in the same step, so that a victim that reads the count
	// lowered also finds the move counted.
	if wasSecond {
		p.b.dropSpill(true)
	} else {
		p.b.state.Add(moveOne)
	}
}

// sweepBuckets bounds the buckets that one sweep looks at: 2 MB of table,
// 163,840 accounts, so that a table of the default size is swept whole.
const sweepBuckets = 32768

// sweep ends the limiting episodes of accounts out of debt since before
// (by kind), looking at up to sweepBuckets buckets from where the last
// sweep stopped, and returns them. It also moves the tat of an account
// idle for longer than staleAge forward (see balance), so that wrapping
// time never reads it as recent.
func (t *bucketTable) sweep(now int64, before *[LimitKindLast]int64) (ended []gone) {
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
			ref := accountRef{b, j, b.ident[j].Load()}
			if ref.id&1 == 0 {
				continue // empty or moving in
			}
			if ref.quiet(now, before[kindOf(ref.id)]) {
				ended = append(ended, gone{t.accountIDAt(i, ref.id), kindOf(ref.id)})
			}
		}
	}
	return ended
}

// quiet ends the account's episode if it is limited and has been out of
// debt since before, and reports whether it ended one. It also moves the
// tat of an account idle for longer than staleAge forward.
func (a accountRef) quiet(now, before int64) bool {
	for {
		v, ok := a.load()
		if !ok {
			return false
		}
		w := v
		if v.limited() && v.tat(now) <= before {
			w = w.withLimited(false)
		}
		if v.tat(now) < now-staleAge {
			w = w.withTat(now - staleAge)
		}
		if w == v {
			return false
		}
		if a.store(v, w) {
			return v.limited() && !w.limited()
		}
	}
}

// balance is an account's state in one word, so that one compare-and-swap
// changes it:
//
//	bits 0-55   tat, the time at which the balance is zero, in nanoseconds
//	            of internal time, modulo 2^56 (834 days)
//	bits 56-59  BIND's slip counter: the next limited response slips at 0
//	bits 60     in a limiting episode (for Event)
//	bits 61-63  generation, advanced when a new account takes the place
//
// The account is in debt while tat > now. Its balance, now - tat, holds at
// most a second's worth of credit (at most 100 s, for the slowest rates)
// and sinks at most window seconds (at most 3,600) into debt, so a live
// tat lies within an hour of now and 56 bits tell it apart from now
// unambiguously for 417 days either side. A tat further ahead than any
// debt can be is one from over 417 days ago, wrapped: it reads as that
// old. Only an account idle for a multiple of 834 days, give or take the
// hour, could read as recent; the sweep of EndQuietEpisodes moves the tat
// of every account idle for over 208 days forward (still ancient), so a
// server that calls it now and then never meets that case.
type balance uint64

const (
	tatBits       = 56
	tatMask       = 1<<tatBits - 1
	slipShift     = 56
	slipMask      = 0xf << slipShift
	limitedBit    = 1 << 60
	generationOne = 1 << 61

	// maxAhead is further ahead of now than any tat can be: the longest
	// window plus the longest interval, and a margin.
	maxAhead = 3800 * int64(1e9)
	// staleAge is how long an account may be idle before a sweep moves
	// its tat forward: a quarter of the 56-bit range.
	staleAge = int64(1) << (tatBits - 2)
)

// tat returns the account's tat as internal time, read relative to now.
func (v balance) tat(now int64) int64 {
	d := int64((uint64(v)-uint64(now))<<(64-tatBits)) >> (64 - tatBits)
	if d > maxAhead {
		d = -1 << (tatBits - 1) // wrapped from the far past
	}
	return now + d
}

func (v balance) slip() uint8         { return uint8(v >> slipShift & 0xf) }
func (v balance) limited() bool       { return v&limitedBit != 0 }
func (v balance) generation() balance { return v / generationOne }

// withGeneration returns v in generation g, modulo 8.
func (v balance) withGeneration(g balance) balance {
	return v%generationOne | g*generationOne
}

func (v balance) withTat(tat int64) balance { return v&^tatMask | balance(uint64(tat)&tatMask) }
func (v balance) withSlip(n uint8) balance  { return v&^slipMask | balance(n)<<slipShift }
func (v balance) withLimited(on bool) balance {
	if on {
		return v | limitedBit
	}
	return v &^ limitedBit
}

// fullCredit is the balance of a new account of generation g: full
// credit at now, slip counter 0, not limited.
func fullCredit(now, credit int64, g balance) balance {
	return balance(0).withGeneration(g).withTat(now - credit)
}

// charge debits the account by l.interval at now and returns its new
// balance and whether it is in debt. The balance earns credit
// continuously, holds at most l.credit nanoseconds of it, and sinks at
// most l.debt nanoseconds deep; with l.debt 0 it never sinks: a charge
// that would put it in debt is refused and leaves it as it was. An account
// that has earned back full credit starts its slip count afresh, as BIND's
// does.
func (v balance) charge(now int64, l limit) (balance, bool) {
	tat := v.tat(now)
	if full := now - l.credit; tat <= full {
		tat, v = full, v&^slipMask
	}
	next := tat + l.interval
	if l.debt == 0 && next > now {
		return v.withTat(tat), true // refused: a request account never sinks
	}
	tat = min(next, now+l.debt)
	return v.withTat(tat), tat > now
}

// limitedAfter reports whether the account is in a limiting episode after
// a charge at now by l that left it in debt or not (inDebt). An episode
// starts when the account goes into debt, and for most accounts ends when
// it is out of debt. An account that sinks into no debt (a request
// account) is refused only while its network asks too fast, and served in
// between: its episode ends once it has held full credit for an interval,
// a request's worth left unspent, so that a flood is one episode rather
// than a start and a stop for every request served. (Full credit alone
// would not do: below one request a second, full credit is one request,
// which a network asking twice too fast reaches before each it is served.)
func (v balance) limitedAfter(now int64, l limit, inDebt bool) bool {
	if inDebt || l.debt != 0 || !v.limited() {
		return inDebt
	}
	return v.tat(now) > now-l.episodeSlack()
}

// slipOrDrop applies BIND's slip counter to a limited response: the first
// limited response slips, then every ratio-th; with ratio 0 (errors, and
// the per-network limits) none does.
func (v balance) slipOrDrop(ratio int) (Action, balance) {
	if ratio == 0 {
		return Drop, v
	}
	act, n := Drop, v.slip()
	if n == 0 {
		act = Slip
	}
	if n++; int(n) >= ratio {
		n = 0
	}
	return act, v.withSlip(n)
}
