package rrl

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The rate arithmetic is tested without a table or concurrency: each test
// feeds balances to the pure functions of balance.go.

// TestBalanceWraps checks that a tat kept modulo 2^56 reads right on both
// sides of the points where internal time wraps, and that one from the far
// past never reads as recent.
func TestBalanceWraps(t *testing.T) {
	l := limit{interval: int64(time.Second) / 5, credit: int64(time.Second), debt: 15 * int64(time.Second)}
	for _, now := range []int64{0, 1 << 20, tatMask - int64(time.Second), tatMask, tatMask + 1, 3 * tatMask, maxClock - 1} {
		for _, d := range []int64{-l.credit, -1, 0, 1, l.debt, maxAhead} {
			v := balance(0).withTat(now + d)
			if got := v.tat(now); got != now+d {
				t.Errorf("now %#x: tat now%+d reads as now%+d", now, d, got-now)
			}
		}
		// A tat from further back than the range can tell reads as old.
		for _, age := range []int64{staleAge, 1 << 55, 1<<56 - maxAhead - 1} {
			if got := balance(0).withTat(now - age).tat(now); got > now-l.credit {
				t.Errorf("now %#x: a tat %#x ago reads as now%+d", now, age, got-now)
			}
		}
	}
}

func TestBalanceCharge(t *testing.T) {
	l := limit{interval: int64(time.Second) / 5, credit: int64(time.Second), debt: 2 * int64(time.Second)}
	now := int64(1000 * time.Second)
	v := fullCredit(now, l.credit) | balance(3*generationOne)
	var inDebt bool
	for i := range 5 {
		if v, inDebt = v.charge(now, l); inDebt {
			t.Fatalf("debit %d of a rate of 5 in debt", i+1)
		}
	}
	if v, inDebt = v.charge(now, l); !inDebt {
		t.Fatal("sixth debit in credit")
	}
	for range 100 {
		v, _ = v.charge(now, l)
	}
	if got := v.tat(now) - now; got != l.debt {
		t.Errorf("debt %d, want at most %d", got, l.debt)
	}
	if g := uint64(v) >> generationShift; g != 3 {
		t.Errorf("the table's generation bits changed from 3 to %d", g)
	}
	// Slip counter: the first limited response slips, then every second.
	var acts []Action
	for range 5 {
		var a Action
		a, v = v.slipOrDrop(2)
		acts = append(acts, a)
	}
	if acts[0] != Slip || acts[1] != Drop || acts[2] != Slip || acts[3] != Drop {
		t.Errorf("slips %v", acts)
	}
	// Full credit earned back starts the count afresh.
	v, _ = v.charge(now+10*int64(time.Second), l)
	if v.slip() != 0 {
		t.Errorf("slip %d after full credit", v.slip())
	}
}

// TestFirstDebitIsAChargeOfFullCredit: a new account moves in with
// firstDebit, which must be what settle makes of full credit, for every
// kind of limit (fast and slow rates, as qps-scale may make them, the
// longest window, and request limits, which sink into no debt): the
// response sent, nothing slipped, no episode begun.
func TestFirstDebitIsAChargeOfFullCredit(t *testing.T) {
	r := newTestRRL(t, newTestClock(), "window", "3600")
	now := int64(5 * time.Hour)
	for _, interval := range []int64{1, int64(time.Millisecond), int64(time.Second) / 3, int64(time.Second), 7 * int64(time.Second), 100 * int64(time.Second)} {
		for _, l := range []limit{limitOf(interval, r.cfg.window), requestLimitOf(interval)} {
			for _, kind := range []LimitKind{LimitResponses, LimitErrors, LimitRequests, LimitAll} {
				l := l.withSlip(kind, 2)
				v, d := settle(fullCredit(now, l.credit), now, l)
				if v != firstDebit(now, l) || d != (debited{act: Send}) {
					t.Errorf("interval %d, debt %d, %v: settle gives %#x %+v, firstDebit %#x", interval, l.debt, kind, v, d, firstDebit(now, l))
				}
			}
		}
	}
}

// fullCredit is the balance of an account with full credit at now.
func fullCredit(now, credit int64) balance { return balance(0).withTat(now - credit) }

// balance is load for an account: its balance.
func (e entry) balance() (balance, bool) {
	w, ok := e.load()
	return balance(w), ok
}

// TestRequestChargedIsChargeThenLimitedAfter: the request debit's charge,
// written in one, leaves every balance as charge and limitedAfter do, and
// refuses the same charges, over tats in debt, in credit, full and past
// full, in and out of an episode, with slip counts and generations.
func TestRequestChargedIsChargeThenLimitedAfter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, interval := range []int64{1, 1e3, 1e6, 25e6, 1e9, 7e9, 100e9} {
		l := requestLimitOf(interval)
		for range 20000 {
			now := rng.Int64N(1<<62) - 1<<61
			tat := now + rng.Int64N(4*(l.credit+l.interval)) - 3*(l.credit+l.interval)
			switch rng.IntN(4) {
			case 0:
				tat = now - rng.Int64N(1<<55) // long idle
			case 1: // at an edge: full credit and an interval, full credit, an interval
				edges := [...]int64{now - l.credit - l.interval, now - l.credit, now - l.interval, now}
				tat = edges[rng.IntN(len(edges))] + rng.Int64N(3) - 1
			}
			old := balance(rng.Uint64()).withTat(tat)
			v, inDebt := old.charge(now, l)
			want := v.withLimited(old.limitedAfter(now, l, inDebt))
			if got, refused := old.requestCharged(now, l); got != want || refused != inDebt {
				t.Fatalf("interval %d now %d balance %#x: got %#x refused %v, want %#x %v", interval, now, old, got, refused, want, inDebt)
			}
		}
	}
}

// TestBalanceKeepsTableBits: every function of the arithmetic leaves the
// word's generation bits, the table's, as it found them.
func TestBalanceKeepsTableBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		now := rng.Int64N(1<<62) - 1<<61
		l := limitOf(rng.Int64N(int64(time.Second))+1, 15*int64(time.Second)).withSlip(LimitResponses, rng.IntN(5))
		if rng.IntN(2) == 0 {
			l = requestLimitOf(l.interval)
		}
		old := balance(rng.Uint64()).withTat(now + rng.Int64N(4*l.credit) - 2*l.credit)
		v, _ := settle(old, now, l)
		_, slipped := old.slipOrDrop(3)
		for name, w := range map[string]balance{"settle": v, "slipOrDrop": slipped, "refunded": old.refunded(now, l),
			"quieted": old.quieted(now, now), "withTat": old.withTat(now), "withLimited": old.withLimited(rng.IntN(2) == 0)} {
			if uint64(w)&^callerMask != uint64(old)&^callerMask {
				t.Fatalf("%s of %#x changed the table's bits: %#x", name, old, w)
			}
		}
	}
}

// TestRefundedUndoesACharge: a request charge given back leaves the tat
// where it was, whatever the episode flag.
func TestRefundedUndoesACharge(t *testing.T) {
	l := requestLimitOf(int64(time.Second) / 4)
	now := int64(100 * time.Second)
	for _, tat := range []int64{now - l.credit, now - 2*l.interval, now - l.interval} {
		old := balance(0).withTat(tat)
		charged, refused := old.requestCharged(now, l)
		if refused {
			t.Fatalf("tat now%+d: refused", tat-now)
		}
		if got := charged.refunded(now, l).tat(now); got != tat {
			t.Errorf("tat now%+d: charged and refunded, now%+d", tat-now, got-now)
		}
	}
}

// TestQuieted: an episode ends once the account has been out of debt
// since before, not sooner; a tat older than staleAge moves forward to
// staleAge ago, and reads no more recent than it was.
func TestQuieted(t *testing.T) {
	now := int64(1000 * time.Hour)
	limited := balance(0).withLimited(true)
	if v := limited.withTat(now-10).quieted(now, now-20); !v.limited() {
		t.Error("an account out of debt for 10 ns ended its episode, asked for 20")
	}
	if v := limited.withTat(now-10).quieted(now, now-10); v.limited() {
		t.Error("an account out of debt since before kept its episode")
	}
	old := balance(0).withTat(now - staleAge - 1)
	if got := old.quieted(now, now).tat(now); got != now-staleAge {
		t.Errorf("a stale tat moved to now%+d, want now-staleAge", got-now)
	}
}

// TestRank: in credit before in debt, the most credit first; a request
// account ranks a second later than its tat.
func TestRank(t *testing.T) {
	now := int64(1000 * time.Second)
	credit, debt := balance(0).withTat(now-int64(time.Second)), balance(0).withTat(now+1)
	if credit.rank(false, now) >= debt.rank(false, now) {
		t.Error("an account in credit ranks after one in debt")
	}
	if got := credit.rank(true, now) - credit.rank(false, now); got != requestRankShift {
		t.Errorf("a request account ranks %d later, want %d", got, requestRankShift)
	}
	if credit.rank(true, now) < credit.withTat(now).rank(false, now) {
		t.Error("a request account with a second's credit ranks before a response account with none")
	}
}

// TestSettleRequestIsRequestCharged: settle takes requestCharged's one
// pass for a request limit, with what it did.
func TestSettleRequestIsRequestCharged(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	l := requestLimitOf(int64(time.Second) / 3)
	for range 10000 {
		now := rng.Int64N(1 << 60)
		old := balance(rng.Uint64() & callerMask).withTat(now + rng.Int64N(3*l.credit) - 2*l.credit)
		v, d := settle(old, now, l)
		want, refused := old.requestCharged(now, l)
		if v != want || d.inDebt != refused || d.edge != (want.limited() != old.limited()) || (d.act == Drop) != refused {
			t.Fatalf("%#x: settle %#x %+v, requestCharged %#x %v", old, v, d, want, refused)
		}
	}
}
