package rrl

import (
	"sync"
	"sync/atomic"
)

// The table of accounts is split into shards, each with its own lock, so
// that Debit calls for different accounts rarely wait for each other. A
// shard holds at most its share of max-table-size accounts in one slice,
// finds them through a chained hash index, and keeps two LRU lists: accounts
// in credit at their last debit, and accounts in debt. When a shard is full,
// a new account takes the place of the least recently used account in
// credit or, if every account is in debt, of the least recently used one
// (BIND's choice: the victim of a flood stays limited while spoofed sources
// churn). Every step is O(1): nothing scans the table.

// account is one rate-limiting account: 32 bytes.
type account struct {
	key          uint64
	tat          int64  // time at which the balance is zero: in debt while tat > now
	next         uint32 // next account in the same hash bucket
	older, newer uint32 // neighbours in the shard's LRU list
	slip         uint8  // BIND's slip counter: slip when it is 0
	list         uint8  // listCredit or listDebt
	limited      bool   // in a limiting episode (for Event)
	kind         byte   // category or kindRequests/kindAll (for Event)
}

// Account indexes are 1-based so that 0 means none.
const none = 0

const (
	listCredit = iota
	listDebt
)

// lru is a doubly-linked list threaded through account.older/newer.
type lru struct{ newest, oldest uint32 }

type shard struct {
	mu       sync.Mutex
	accounts []account // accounts[0] is unused, so that index 0 means none
	buckets  []uint32  // heads of hash chains; len is a power of two
	limit    int       // most accounts this shard may hold
	lists    [2]lru
	stats    Stats        // under mu; CacheLength unused
	qps      atomic.Int64 // responses counted for qps-scale
	_        [64]byte     // keep neighbouring shards' locks off one cache line
}

type table struct {
	shards []shard
	shift  uint // the top bits of a key choose its shard
}

// minShardSize keeps shards large enough that per-shard LRU order stays a
// good stand-in for the global order; maxShards is enough for the cores
// that one RRL is likely to be called from.
const (
	minShardSize = 256
	maxShards    = 64
)

func newTable(size int) *table {
	n := 1
	for n < maxShards && size/(n*2) >= minShardSize {
		n *= 2
	}
	t := &table{shards: make([]shard, n), shift: 64}
	for m := n; m > 1; m /= 2 {
		t.shift--
	}
	for i := range t.shards {
		s := &t.shards[i]
		s.limit = size / n
		if i < size%n {
			s.limit++
		}
		s.accounts = make([]account, 1, min(s.limit, 16)+1)
		s.buckets = make([]uint32, 16)
	}
	return t
}

func (t *table) shard(key uint64) *shard {
	if t.shift == 64 {
		return &t.shards[0]
	}
	return &t.shards[key>>t.shift]
}

// get returns the index of the account for key, creating it if need be with
// tat set so that it holds full credit at now. evicted is the account whose
// place it took, if any, for Event reporting. The caller holds s.mu.
func (s *shard) get(key uint64, now, credit int64, kind byte) (i uint32, evicted account) {
	b := &s.buckets[key&uint64(len(s.buckets)-1)]
	for i = *b; i != none; i = s.accounts[i].next {
		if s.accounts[i].key == key {
			return i, account{}
		}
	}
	if len(s.accounts)-1 < s.limit {
		i = s.grow()
		b = &s.buckets[key&uint64(len(s.buckets)-1)] // grow may rehash
	} else {
		i = s.victim()
		evicted = s.accounts[i]
		s.unlink(i)
		s.stats.Evictions++
	}
	s.accounts[i] = account{key: key, tat: now - credit, next: *b, kind: kind}
	*b = i
	s.push(i, listCredit)
	return i, evicted
}

// charge debits account i by interval at now and reports whether it is in
// debt afterwards. The balance (now - tat) earns credit continuously, holds
// at most credit nanoseconds of it, and sinks at most debt nanoseconds deep.
//
// An account that has earned back full credit starts its slip count afresh,
// as BIND's does.
func (s *shard) charge(i uint32, now, interval, credit, debt int64) bool {
	a := &s.accounts[i]
	if full := now - credit; a.tat <= full {
		a.tat, a.slip = full, 0
	}
	a.tat = min(a.tat+interval, now+debt)
	inDebt := a.tat > now
	l := uint8(listCredit)
	if inDebt {
		l = listDebt
	}
	s.touch(i, l)
	return inDebt
}

// grow appends an account slot and returns its index, doubling the hash
// index when accounts outnumber buckets.
func (s *shard) grow() uint32 {
	if len(s.accounts) == cap(s.accounts) {
		bigger := make([]account, len(s.accounts), min(2*cap(s.accounts), s.limit+1))
		copy(bigger, s.accounts)
		s.accounts = bigger
	}
	s.accounts = s.accounts[:len(s.accounts)+1]
	i := uint32(len(s.accounts) - 1)
	if int(i) > len(s.buckets) {
		s.rehash(2 * len(s.buckets))
	}
	return i
}

func (s *shard) rehash(n int) {
	s.buckets = make([]uint32, n)
	mask := uint64(n - 1)
	for i := 1; i < len(s.accounts)-1; i++ { // the newest slot is not linked yet
		a := &s.accounts[i]
		b := &s.buckets[a.key&mask]
		a.next, *b = *b, uint32(i)
	}
}

// victim chooses the account to recycle in a full shard.
func (s *shard) victim() uint32 {
	if i := s.lists[listCredit].oldest; i != none {
		return i
	}
	return s.lists[listDebt].oldest
}

// unlink removes account i from its hash chain and its LRU list.
func (s *shard) unlink(i uint32) {
	a := &s.accounts[i]
	p := &s.buckets[a.key&uint64(len(s.buckets)-1)]
	for *p != i {
		p = &s.accounts[*p].next
	}
	*p = a.next
	s.remove(i)
}

// touch makes account i the newest of list l.
func (s *shard) touch(i uint32, l uint8) {
	a := &s.accounts[i]
	if a.list == l && s.lists[l].newest == i {
		return
	}
	s.remove(i)
	s.push(i, l)
}

func (s *shard) push(i uint32, l uint8) {
	a := &s.accounts[i]
	list := &s.lists[l]
	a.list, a.older, a.newer = l, list.newest, none
	if list.newest != none {
		s.accounts[list.newest].newer = i
	} else {
		list.oldest = i
	}
	list.newest = i
}

func (s *shard) remove(i uint32) {
	a := &s.accounts[i]
	list := &s.lists[a.list]
	if a.older != none {
		s.accounts[a.older].newer = a.newer
	} else {
		list.oldest = a.newer
	}
	if a.newer != none {
		s.accounts[a.newer].older = a.older
	} else {
		list.newest = a.older
	}
	a.older, a.newer = none, none
}
