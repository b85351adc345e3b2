package rrl

import "math"

// The accounts join the table (table.go) and the arithmetic (balance.go):
// an account is an entry of the table whose label is its LimitKind and
// whose word is its balance. A debit finds the account, works out its new
// balance and writes it with one compare-and-swap; the rest of the RRL
// calls these and never reads a word or a bucket itself.

// accounts is an RRL's table of accounts.
type accounts struct {
	t *table

	// evicted, when not nil, hears of an account in a limiting episode
	// whose place a new account took, for the observer.
	evicted func(gone)
}

// newAccounts returns a table of size accounts, recycled by their rank
// (see balance.rank).
func newAccounts(size int) accounts {
	return accounts{t: newTable(size, accountRank)}
}

// accountRank is the table's rank of accounts: see balance.rank.
func accountRank(b *bucket, mask, labels uint32, now int64) (int, int64) {
	low, lowest := -1, int64(math.MaxInt64)
	for j := range slotsPerBucket {
		if mask>>j&1 == 0 {
			continue
		}
		request := LimitKind(labels >> (4 * j) & 0xf).Request()
		if r := balance(b.wordAt(j)).rank(request, now); r < lowest {
			low, lowest = j, r
		}
	}
	return low, lowest
}

// gone describes an account whose limiting episode ended without a debit
// of its own (its place taken, or found quiet), for Event; the zero gone
// is none.
type gone struct {
	account uint64 // Event.Account
	kind    LimitKind
}

// debit debits the account for key, of the given kind, by l at now: it
// reads the account's balance, works out the new one (settle) and writes
// it with one compare-and-swap. That is all a debit does when the table
// holds the account in its first bucket and nothing changes it meanwhile;
// debitAgain handles the rest.
func (a *accounts) debit(key uint64, kind LimitKind, now int64, l limit, s *stripe) debited {
	i, id := a.t.index(key), identOf(key, uint8(kind))
	if e, held := a.t.findFirst(i, id); held {
		if old, ok := e.load(); ok {
			if v, d := settle(balance(old), now, l); e.cas(old, uint64(v)) {
				return d
			}
		}
	}
	return a.debitAgain(i, id, now, l, s)
}

// debitAgain is debit for an account that the table does not hold or
// holds in its second bucket, or that lost its place, or whose balance
// changed between its read and its write: it looks for the account in its
// set, adding it if need be already debited (firstDebit), and otherwise
// debits it again until its compare-and-swap succeeds. An account recycled
// to make room counts as an eviction.
func (a *accounts) debitAgain(i uint64, id uint32, now int64, l limit, s *stripe) debited {
	for {
		e, added, r := a.t.findOrAdd(i, id, now, uint64(firstDebit(now, l)))
		if r.ok {
			s.evictions.Add(1)
			if a.evicted != nil {
				a.recycled(r)
			}
		}
		if added {
			return debited{act: Send}
		}
		for {
			old, ok := e.load()
			if !ok {
				break // another account took its place: look again
			}
			if v, d := settle(balance(old), now, l); e.cas(old, uint64(v)) {
				return d
			}
		}
	}
}

// recycled tells evicted of an account whose place a new one took, if it
// was in a limiting episode.
func (a *accounts) recycled(r recycled) {
	if balance(r.word).limited() {
		a.evicted(gone{r.id, LimitKind(r.label)})
	}
}

// limitedTat returns the tat (read at now) of the account for key, of the
// given kind, if the table holds it and it is in a limiting episode, and
// true. Its third result says whether the answer is sure: false only for
// an account still moving between its buckets after the table's waits,
// which may well be there. It allocates nothing, not even a page of the
// table.
func (a *accounts) limitedTat(key uint64, kind LimitKind, now int64) (tat int64, limited, sure bool) {
	i, id := a.t.index(key), identOf(key, uint8(kind))
	for {
		e, found, sure := a.t.lookup(i, id)
		if !found {
			return 0, false, sure
		}
		if w, ok := e.load(); ok {
			v := balance(w)
			return v.tat(now), v.limited(), true
		}
		// It moved, or lost its place, since the lookup: look again.
	}
}

// refund gives back to the account for key, of the given kind, a charge by
// l (see balance.refunded). An account no longer held needs none: it
// would come back with full credit.
func (a *accounts) refund(key uint64, kind LimitKind, l limit, now int64) {
	i, id := a.t.index(key), identOf(key, uint8(kind))
	for {
		e, found, sure := a.t.lookup(i, id)
		if !found {
			if sure {
				return
			}
			continue
		}
		old, ok := e.load()
		if !ok {
			continue // it moved or lost its place since the lookup: look again
		}
		if e.cas(old, uint64(balance(old).refunded(now, l))) {
			return
		}
	}
}

// sweep ends the limiting episodes of accounts out of debt since before
// (by kind), in the part of the table the table's sweep looks at, and
// returns them. It also moves the tat of an account idle for longer than
// staleAge forward (see balance.quieted).
func (a *accounts) sweep(now int64, before *[LimitKindLast]int64) (ended []gone) {
	a.t.sweep(func(e entry, id uint64) {
		kind := LimitKind(labelOf(e.id))
		for {
			old, ok := e.load()
			if !ok {
				return
			}
			v := balance(old).quieted(now, before[kind])
			if v == balance(old) {
				return
			}
			if e.cas(old, uint64(v)) {
				if !v.limited() && balance(old).limited() {
					ended = append(ended, gone{id, kind})
				}
				return
			}
		}
	})
	return ended
}

// id is Event.Account for the account for key, of the given kind.
func (a *accounts) id(key uint64, kind LimitKind) uint64 {
	return a.t.entryID(key, uint8(kind))
}

// held returns the number of accounts held.
func (a *accounts) held() int { return int(a.t.held()) }
