package rrl

import (
	"cmp"
	"net/netip"
	"slices"
	"time"
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

// Limited returns up to n of the accounts being limited now, those in
// debt, in the given order: the heaviest of those the record holds (see
// above). An account drops out once back in credit, though its episode
// (and the observer's stop event) may last until EndQuietEpisodes ends it
// (see the comment at the top of record.go). It reads the
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
		place := rec.place(i)
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
		tat, limited, sure := r.accounts.limitedTat(key, kind, now)
		if !limited {
			if sure {
				place.key.CompareAndSwap(key, 0) // ended by a sweep, or its place lost
			}
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
	return tat + r.allowances().requestInterval(kind, bits) - now
}
