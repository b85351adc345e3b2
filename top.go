package rrl

import (
	"cmp"
	"net/netip"
	"slices"
	"time"
)

// MaxTop is the most accounts Top reports: the number the watch holds.
const MaxTop = watchPlaces

// TopAccount is an account as Top reports it: who it is, as Limited names
// accounts, and how hard it was charged over the last whole second.
type TopAccount struct {
	// Network, LimitKind and Tuple name the account as in LimitedAccount.
	Network   netip.Prefix
	LimitKind LimitKind
	Tuple     ResponseTuple

	// Share is what the account was charged over the last whole second
	// as a share of its allowance: 1 is at the allowance, 2 twice it. It
	// counts every response (or request, or byte) charged, those refused
	// too, so that it is the rate asked of the account.
	Share float64

	// Rate is the same as a rate per second in the allowance's unit:
	// responses (requests for a request limit, bytes for
	// all-bytes-per-second, seconds of handling for
	// stream-time-per-second), at the allowance as it is now (scaled by
	// qps-scale). It is 0 if the allowance has been turned off since.
	Rate float64

	// Debt is how long the account would take to admit again, as in
	// LimitedAccount; 0 for an account that is not being limited now.
	Debt time.Duration
}

// Top returns up to n of the accounts charged in the last whole second of
// the RRL's clock, nearest their allowance first (the highest Share),
// limited or not, so that an operator sees an account coming close to an
// allowance before it is over it. n is capped at MaxTop; it returns nil
// for n of 0 or less.
//
// Counting costs, so Top counts only while someone asks (see watch.go):
// the first call arms the watch, which counts every charge from then on
// and disarms itself a minute after the last call; until armed, a charge
// costs one load of a flag. The first call allocates the watch (426 KB).
// wait is how long until the watch has counted a whole second: the
// accounts are of that second only when wait is 0, and the first call,
// or one after the watch disarmed, returns none and a wait of one to two
// seconds. The watch holds at most MaxTop accounts, the busiest (see
// watch.go), so a spray of sources does not push out those near their
// allowance.
func (r *RRL) Top(n int) (accounts []TopAccount, wait time.Duration) {
	if r == nil || n <= 0 {
		return nil, 0
	}
	now := r.now()
	w := r.armWatch(now)
	whole := (w.from.Load()+int64(time.Second)-1)/int64(time.Second) + 1 // the end of the first whole second, in seconds
	if d := whole*int64(time.Second) - now; d > 0 {
		return nil, time.Duration(d)
	}
	sec := now/int64(time.Second) - 1
	al := r.allowances()
	var out []TopAccount
	for i := range w.keys {
		key := w.keys[i].Load()
		if key == 0 {
			continue
		}
		charged := w.chargedIn(i, sec)
		if charged == 0 {
			continue
		}
		e := &w.entries[i]
		e.mu.Lock()
		la, ok := e.account(), e.key == key
		e.mu.Unlock()
		if !ok {
			continue // a place changing hands
		}
		a := TopAccount{Network: la.Network, LimitKind: la.LimitKind, Tuple: la.Tuple, Share: float64(charged) / float64(time.Second)}
		if per := costOf(al, a.LimitKind, a.Network.Bits()); per > 0 {
			a.Rate = float64(charged) / per
		}
		if tat, limited, _ := r.accounts.limitedTat(key, a.LimitKind, now); limited {
			a.Debt = time.Duration(max(r.debtOf(tat, a.LimitKind, a.Network.Bits(), now), 0))
		}
		out = append(out, a)
	}
	slices.SortFunc(out, compareTop)
	return out[:min(n, len(out))], 0
}

// armWatch arms the watch of the busiest accounts until watchLinger after
// now, allocating it on the first call, and returns it.
func (r *RRL) armWatch(now int64) *topWatch {
	w := r.watch.Load()
	if w == nil {
		r.watch.CompareAndSwap(nil, new(topWatch))
		w = r.watch.Load()
	}
	// Armed anew when it had lingered past its time (or was never armed):
	// a charge since then found it expired and was not counted.
	if last := w.until.Swap(now + watchLinger); now > last {
		w.from.Store(now)
	}
	r.telling.Store(true)
	return w
}

// costOf returns the cost, in nanoseconds of the allowance, of one unit of
// an account of the given kind (one response or request, one byte, or one
// second of a stream request's handling), as
// the allowances al charge it now: 0 when the allowance is off.
func costOf(al *allowances, kind LimitKind, bits int) float64 {
	switch {
	case kind == LimitAllBytes:
		return al.prot.nsPerByte
	case kind == LimitStreamTime:
		return al.prot.streamScale * float64(time.Second)
	case kind.Request():
		return float64(al.requestInterval(kind, bits))
	}
	return float64(al.limits[kind].interval)
}

// compareTop orders accounts by share, highest first, then deepest in
// debt, then by network, kind and name, so that no two tie.
func compareTop(a, b TopAccount) int {
	return cmp.Or(cmp.Compare(b.Share, a.Share), cmp.Compare(b.Debt, a.Debt),
		a.Network.Addr().Compare(b.Network.Addr()), cmp.Compare(a.Network.Bits(), b.Network.Bits()),
		cmp.Compare(a.LimitKind, b.LimitKind), cmp.Compare(a.Tuple.SalientName, b.Tuple.SalientName),
		cmp.Compare(a.Tuple.Type, b.Tuple.Type), cmp.Compare(a.Tuple.Class, b.Tuple.Class))
}
