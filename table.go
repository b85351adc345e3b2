package rrl

import (
	"sync"
	"sync/atomic"
)

// The table of accounts is split into shards, each with its own lock, so
// that Debit calls for different accounts rarely wait for each other. Each
// shard holds at most its share of max-table-size accounts, finds them
// through an open-addressing index (linear probing over 8-byte slots, so a
// miss reads one cache line and no account), and keeps two LRU lists:
// accounts in credit at their last debit, and accounts in debt.
//
// A shard's accounts and index grow with it, doubling, up to the size its
// share of max-table-size needs, so that a table holding few accounts is
// small and stays in the processor's caches. Growing copies one shard's
// accounts or index, and a shard holds at most 16,384 accounts (large
// tables have more shards), so no step copies much; once a shard is full
// nothing grows again.
//
// When a shard is full, a new account takes the place of, in this order:
// the least recently used account in debt if it has since paid its debt
// off; the least recently used account in credit; if every account went
// into debt, the first of the 16 least recently used that has since paid
// it off; the least recently used account. So the victim of a flood, whose
// account stays in debt, keeps it while spoofed sources churn through the
// rest (BIND's choice). Every step is O(1): nothing scans the table.

// account is one rate-limiting account. Its fields are at most 4-byte
// aligned, so that it takes 28 bytes rather than 32.
type account struct {
	key          pair   // the account's key
	tat          pair   // time at which the balance is zero: in debt while tat > now
	older, newer uint32 // neighbours in the shard's LRU list
	slip         uint8  // BIND's slip counter: slip when it is 0
	list         uint8  // listCredit or listDebt
	limited      bool   // in a limiting episode (for Event)
	kind         byte   // category or kindRequests/kindAll (for Event)
}

// pair holds an int64 as two uint32 halves.
type pair struct{ lo, hi uint32 }

func split(v uint64) pair   { return pair{uint32(v), uint32(v >> 32)} }
func (p pair) join() uint64 { return uint64(p.hi)<<32 | uint64(p.lo) }

// Account indexes are 1-based so that 0 means none.
const none = 0

const (
	listCredit = iota
	listDebt
)

// slot is an entry of a shard's index: the low half of an account's key
// (which also places the slot) and the account's index; 0 marks it empty.
type slot struct{ lo, i uint32 }

// maxLoad bounds the share of index slots in use, which keeps probe
// sequences short.
const maxLoad = 0.75

// lru is a doubly-linked list threaded through account.older/newer.
type lru struct{ newest, oldest uint32 }

type shard struct {
	mu    sync.Mutex
	accts []account // accounts 1..n; account 0 is unused
	n     uint32    // accounts in use
	limit uint32    // most accounts this shard may hold
	slots []slot    // the index; never more than maxLoad full
	room  uint32    // accounts the index has room for
	lists [2]lru
	stats Stats        // under mu; CacheLength unused
	qps   atomic.Int64 // responses counted for qps-scale
	_     [64]byte     // keep neighbouring shards' locks off one cache line
}

type table struct {
	shards []shard
	shift  uint // the top bits of a key choose its shard
}

// minShardSize keeps shards large enough that per-shard LRU order stays a
// good stand-in for the global order; fewShards is enough for the cores
// that one RRL is likely to be called from. Tables larger than fewShards
// times maxShardSize have more shards, so that growing a shard never
// copies much.
const (
	minShardSize = 256
	fewShards    = 64
	maxShardSize = 1 << 14
)

// minRoom is how many accounts a shard has room for at first, in its index
// and in its array of accounts.
const minRoom = 16

func newTable(size int) *table {
	n := 1
	for n < fewShards && size/(n*2) >= minShardSize || (size+n-1)/n > maxShardSize {
		n *= 2
	}
	t := &table{shards: make([]shard, n), shift: 64}
	for m := n; m > 1; m /= 2 {
		t.shift--
	}
	for i := range t.shards {
		s := &t.shards[i]
		s.limit = uint32(size / n)
		if i < size%n {
			s.limit++
		}
		s.resize(min(minRoom, s.limit))
	}
	return t
}

// indexLen is the length of an index with room for n accounts.
func indexLen(n uint32) int { return int(float64(n)/maxLoad) + 1 }

// resize gives the index room for n accounts, moving the slots in use to
// their places in the new index. It reads the index alone: a slot holds
// the part of the key that places it.
func (s *shard) resize(n uint32) {
	old := s.slots
	s.slots, s.room = make([]slot, indexLen(n)), n
	for _, sl := range old {
		if sl.i == none {
			continue
		}
		p := s.home(sl.lo)
		for s.slots[p].i != none {
			p = s.next(p)
		}
		s.slots[p] = sl
	}
}

func (t *table) shard(key uint64) *shard {
	if t.shift == 64 {
		return &t.shards[0]
	}
	return &t.shards[key>>t.shift]
}

func (s *shard) at(i uint32) *account { return &s.accts[i] }

// recycled describes an account whose place a new one took, for Event.
type recycled struct {
	key     uint64
	kind    byte
	limited bool
}

// debit finds or creates (see add) the account for key and debits it
// against l at now (see account.charge), and makes it the most recently
// used of the list its balance puts it on. It returns the account, whether
// it is in debt, and the account whose place it took, if any. The caller
// holds s.mu.
func (s *shard) debit(key uint64, kind byte, now int64, l limit) (a *account, inDebt bool, gone recycled) {
	p, i := s.find(key)
	if i == none {
		i, gone = s.add(p, key, now, l.credit, kind)
	}
	a = s.at(i)
	inDebt = a.charge(now, l)
	list := uint8(listCredit)
	if inDebt {
		list = listDebt
	}
	if a.list != list || s.lists[list].newest != i {
		s.remove(i)
		s.push(i, list)
	}
	return a, inDebt, gone
}

// add creates the account for key at slot p, where find did not find it,
// with tat set so that it holds full credit at now, and returns its index.
// gone describes the account whose place it took, if any.
func (s *shard) add(p int, key uint64, now, credit int64, kind byte) (i uint32, gone recycled) {
	if s.n < s.limit {
		if s.n == s.room {
			s.resize(min(2*s.room, s.limit))
			p, _ = s.find(key)
		}
		i = s.grow()
	} else {
		i = s.victim(now)
		a := s.at(i)
		gone = recycled{a.key.join(), a.kind, a.limited}
		s.unindex(s.position(a.key.join(), i))
		s.remove(i)
		s.stats.Evictions++
		p, _ = s.find(key) // closing the hole may have moved slots
	}
	s.slots[p] = slot{lo: uint32(key), i: i}
	*s.at(i) = account{key: split(key), tat: split(uint64(now - credit)), kind: kind}
	s.push(i, listCredit)
	return i, gone
}

// grow takes a new account index. When the accounts are all in use, their
// array doubles, up to as many as the shard may hold; the copy keeps every
// account at its index.
func (s *shard) grow() uint32 {
	s.n++
	if int(s.n) >= len(s.accts) {
		n := min(max(2*len(s.accts), minRoom), int(s.limit)+1)
		s.accts = append(make([]account, 0, n), s.accts...)[:n]
	}
	return s.n
}

// victim chooses the account to recycle in a full shard (see the top of
// this file).
func (s *shard) victim(now int64) uint32 {
	credit := s.lists[listCredit].oldest
	search := 1
	if credit == none {
		search = repaidSearch
	}
	if i := s.repaid(now, search); i != none {
		return i
	}
	if credit != none {
		return credit
	}
	return s.lists[listDebt].oldest
}

// repaidSearch bounds how far victim looks along the debt list for an
// account that has paid off its debt when no account is in credit.
// Accounts move to the credit list only when debited, so a shard whose
// accounts all went into debt may hold some that have since paid it off;
// recycling one of them spares an account still in debt.
const repaidSearch = 16

// repaid returns the least recently used account on the debt list that has
// paid off its debt, looking at the n least recently used only, or none.
func (s *shard) repaid(now int64, n int) uint32 {
	for i := s.lists[listDebt].oldest; i != none && n > 0; i, n = s.at(i).newer, n-1 {
		if int64(s.at(i).tat.join()) <= now {
			return i
		}
	}
	return none
}

// home is where key's probe sequence starts: the low half of the key
// reduced to the index's length by multiplication, so the index need not be
// a power of two.
func (s *shard) home(lo uint32) int { return int(uint64(lo) * uint64(len(s.slots)) >> 32) }

func (s *shard) next(p int) int {
	if p++; p == len(s.slots) {
		return 0
	}
	return p
}

// find returns the slot and index of the account for key, or the empty
// slot where it belongs and none. It is kept small enough for the compiler
// to inline it into every Debit.
func (s *shard) find(key uint64) (int, uint32) {
	lo, hi := uint32(key), uint32(key>>32)
	p := s.home(lo)
	for {
		if sl := s.slots[p]; sl.i == none || sl.lo == lo && s.accts[sl.i].key.hi == hi {
			return p, sl.i
		}
		if p++; p == len(s.slots) {
			p = 0
		}
	}
}

// position returns the slot of account i, whose key is key.
func (s *shard) position(key uint64, i uint32) int {
	p := s.home(uint32(key))
	for s.slots[p].i != i {
		p = s.next(p)
	}
	return p
}

// unindex empties slot p and shifts back later slots of the same run that
// may move closer to their home, so that no probe sequence is broken.
func (s *shard) unindex(p int) {
	for q := s.next(p); s.slots[q].i != none; q = s.next(q) {
		h := s.home(s.slots[q].lo)
		// The slot at q may fill the hole at p unless its home lies
		// cyclically after p and at or before q.
		if (p <= q && (h <= p || h > q)) || (p > q && h <= p && h > q) {
			s.slots[p] = s.slots[q]
			p = q
		}
	}
	s.slots[p] = slot{}
}

// charge debits the account by l.interval at now and reports whether it
// is in debt afterwards. The balance (now - tat) earns credit
// continuously, holds at most l.credit nanoseconds of it, and sinks at most
// l.debt nanoseconds deep.
//
// An account that has earned back full credit starts its slip count afresh,
// as BIND's does.
func (a *account) charge(now int64, l limit) bool {
	tat := int64(a.tat.join())
	if full := now - l.credit; tat <= full {
		tat, a.slip = full, 0
	}
	tat = min(tat+l.interval, now+l.debt)
	a.tat = split(uint64(tat))
	return tat > now
}

// quiet moves up to max accounts that went into debt but have been out of
// it since before the given time from the debt list to the oldest end of
// the credit list, and returns those that were in a limiting episode,
// which it ends. It walks the debt list from its least recently used end
// and stops at the first account still too recent, so its work is paid
// for by the episodes it ends (BIND's log_stops stops the same way).
func (s *shard) quiet(before int64, max int, ended []recycled) []recycled {
	for n := 0; n < max; n++ {
		i := s.lists[listDebt].oldest
		if i == none {
			break
		}
		a := s.at(i)
		if int64(a.tat.join()) > before {
			break
		}
		if a.limited {
			a.limited = false
			ended = append(ended, recycled{a.key.join(), a.kind, true})
		}
		s.remove(i)
		s.pushOldest(i, listCredit)
	}
	return ended
}

// pushOldest makes account i the oldest of list l.
func (s *shard) pushOldest(i uint32, l uint8) {
	a := s.at(i)
	list := &s.lists[l]
	a.list, a.older, a.newer = l, none, list.oldest
	if list.oldest != none {
		s.at(list.oldest).older = i
	} else {
		list.newest = i
	}
	list.oldest = i
}

// push makes account i the newest of list l.
func (s *shard) push(i uint32, l uint8) {
	a := s.at(i)
	list := &s.lists[l]
	a.list, a.older, a.newer = l, list.newest, none
	if list.newest != none {
		s.at(list.newest).newer = i
	} else {
		list.oldest = i
	}
	list.newest = i
}

// remove takes account i out of its list.
func (s *shard) remove(i uint32) {
	a := s.at(i)
	list := &s.lists[a.list]
	if a.older != none {
		s.at(a.older).newer = a.newer
	} else {
		list.oldest = a.newer
	}
	if a.newer != none {
		s.at(a.newer).older = a.older
	} else {
		list.newest = a.older
	}
	a.older, a.newer = none, none
}
