package rrl

import "time"

// The rate arithmetic, as pure functions on an account's balance: what a
// charge does to it, whether it leaves the account in debt or in a
// limiting episode, what BIND's slip counter says, how a request is
// charged and refunded, and how a full table ranks an account for
// recycling. Nothing here reads a clock or touches shared memory; the
// accounts (accounts.go) apply these to the words the table (table.go)
// holds.

// balance is an account's state in one word of the table, so that one
// compare-and-swap changes it:
//
//	bits 0-55   tat, the time at which the balance is zero, in nanoseconds
//	            of internal time, modulo 2^56 (834 days)
//	bits 56-59  BIND's slip counter: the next limited response slips at 0
//	bits 60     in a limiting episode (for Event)
//	bits 61-63  the table's (its generation, see table.go), kept as found
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
	tatBits    = 56
	tatMask    = 1<<tatBits - 1
	slipShift  = 56
	slipMask   = 0xf << slipShift
	limitedBit = 1 << 60

	// maxAhead is further ahead of now than any tat can be: the longest
	// window plus the longest interval, and a margin.
	maxAhead = 3800 * int64(1e9)
	// staleAge is how long an account may be idle before a sweep moves
	// its tat forward: a quarter of the 56-bit range.
	staleAge = int64(1) << (tatBits - 2)
)

// The balance's bits stay clear of the table's.
var _ = [1]struct{}{}[limitedBit>>generationShift]

// tat returns the account's tat as internal time, read relative to now.
func (v balance) tat(now int64) int64 {
	d := int64((uint64(v)-uint64(now))<<(64-tatBits)) >> (64 - tatBits)
	if d > maxAhead {
		d = -1 << (tatBits - 1) // wrapped from the far past
	}
	return now + d
}

func (v balance) slip() uint8   { return uint8(v >> slipShift & 0xf) }
func (v balance) limited() bool { return v&limitedBit != 0 }

func (v balance) withTat(tat int64) balance { return v&^tatMask | balance(uint64(tat)&tatMask) }
func (v balance) withSlip(n uint8) balance  { return v&^slipMask | balance(n)<<slipShift }
func (v balance) withLimited(on bool) balance {
	if on {
		return v | limitedBit
	}
	return v &^ limitedBit
}

// limit is an allowance in the units of an account's balance, nanoseconds:
// what one response costs, the most credit an account can hold (one
// second's worth of responses, but at least one response, so that rates
// below 1/s work), and how deep it can sink into debt (window seconds, or
// one response).
//
// The request limits sink into no debt (debt 0): a refused request is not
// charged, so a network that asks faster than its allowance is still
// served its allowance every second (the generic cell rate algorithm). A
// response account sinks into debt, as BIND's do, because its limit is
// the penalty box that keeps a reflection's victim quiet for as long as a
// flood lasts; the request limits are about the server's load, and a
// client that asks too fast should get its share, not be locked out.
//
// slip is slip-ratio for the allowances whose limited responses may slip
// (answers, referrals, NODATA and NXDOMAIN), scaled by qps-scale, and 0
// for the others (errors, which never slip, and the per-network limits):
// an account of such a limit in debt is dropped.
type limit struct {
	interval, credit, debt int64
	slip                   int
}

// limitOf is the limit of a response allowance of one response per
// interval, in an RRL whose window is window.
func limitOf(interval, window int64) limit {
	return limit{interval, max(int64(time.Second), interval), max(window, interval), 0}
}

// withSlip returns l with the slip ratio ratio if k's responses may slip.
func (l limit) withSlip(k LimitKind, ratio int) limit {
	if k < LimitErrors {
		l.slip = ratio
	}
	return l
}

// requestLimitOf is the limit of a request allowance of one request per
// interval: it sinks into no debt.
func requestLimitOf(interval int64) limit {
	return limit{interval, max(int64(time.Second), interval), 0, 0}
}

func (l limit) on() bool { return l.interval > 0 }

// episodeSlack is how long before now an account's tat lies once it is out
// of its limiting episode: 0 for an account that goes into debt (out of
// debt), and for one that never does (a request account, refused rather
// than charged) a whole interval more than full credit, so that a network
// asking too fast is one episode (see balance.limitedAfter).
func (l limit) episodeSlack() int64 {
	if l.debt != 0 || !l.on() {
		return 0
	}
	return l.credit + l.interval
}

// debited is what a charge did: whether the account is in debt (for a
// request account: whether the request is refused), what its slip counter
// says to do with a limited response (tuple accounts only), and whether
// the account began or ended a limiting episode.
type debited struct {
	inDebt bool
	act    Action
	edge   bool
}

// settle returns the balance old charged by l at now, with the slip
// counter advanced for an account in debt whose responses may slip and
// the episode flag set, and what the charge did. A request limit (debt 0)
// takes requestCharged, the same arithmetic in one pass.
func settle(old balance, now int64, l limit) (balance, debited) {
	if l.debt == 0 {
		v, refused := old.requestCharged(now, l)
		act := Send
		if refused {
			act = Drop
		}
		return v, debited{refused, act, v.limited() != old.limited()}
	}
	v, inDebt := old.charge(now, l)
	act := Send
	if inDebt {
		act, v = v.slipOrDrop(l.slip)
	}
	limited := old.limitedAfter(now, l, inDebt)
	return v.withLimited(limited), debited{inDebt, act, old.limited() != limited}
}

// firstDebit is the balance of a new account after its first debit by l
// at now: full credit less one interval, which never puts it in debt
// (credit is at least one interval), so the response is sent, no slip is
// counted and no episode starts.
func firstDebit(now int64, l limit) balance {
	return balance(0).withTat(now - l.credit + l.interval)
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

// requestCharged is charge followed by limitedAfter for a request account
// (l.debt 0), in one pass that reads the tat once and tests no debt: it
// returns v charged by l at now, its episode flag set, and whether the
// charge was refused. A refused charge leaves the tat where it was; either
// way an account that had earned full credit holds just that, its slip
// count afresh. The account is in an episode after a refusal, or if it was
// in one and its tat was within full credit and an interval of now.
// TestRequestChargedIsChargeThenLimitedAfter holds it to the two.
func (v balance) requestCharged(now int64, l limit) (balance, bool) {
	tat, full, w := v.tat(now), now-l.credit, v&^(tatMask|limitedBit)
	if v&limitedBit != 0 && tat > full-l.interval {
		w |= limitedBit
	}
	if tat <= full {
		tat, w = full, w&^slipMask
	}
	if tat += l.interval; tat > now {
		return w | limitedBit | balance(uint64(tat-l.interval)&tatMask), true
	}
	return w | balance(uint64(tat)&tatMask), false
}

// refunded returns v with one charge by l given back: its tat an interval
// earlier, its episode flag as the charge left it. A request prefix that
// refuses a request refunds the accounts charged before it, so that a
// refused request is charged to none.
func (v balance) refunded(now int64, l limit) balance {
	return v.withTat(v.tat(now) - l.interval)
}

// quieted returns v with its episode ended if it is in one and has been out
// of debt since before, and its tat moved forward to staleAge ago if it
// lies further back (see balance), so that wrapping time never reads it as
// recent.
func (v balance) quieted(now, before int64) balance {
	w := v
	if v.limited() && v.tat(now) <= before {
		w = w.withLimited(false)
	}
	if v.tat(now) < now-staleAge {
		w = w.withTat(now - staleAge)
	}
	return w
}

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
func (v balance) rank(request bool, now int64) int64 {
	r := v.tat(now)
	if request {
		r += requestRankShift
	}
	return r
}

// requestRankShift is what rank adds to the tat of a request account: a
// second, the credit a request account holds at any rate of one request a
// second or more.
const requestRankShift = int64(time.Second)
