package rrl

import (
	"math"
	"sync/atomic"
	"time"
)

// qpsScaler implements qps-scale: when the server as a whole answers more
// than target requests per second, every response allowance (and
// all-per-second, all-bytes-per-second, the request prefixes, and
// slip-ratio above 2) shrinks by target/qps, so that limiting tightens as
// the load grows. requests-per-second and proven-requests-per-second are
// not scaled, as in BIND, which has no request limit. Every request charged (by Debit or
// DebitRequest) that is not exempt counts, TCP and valid cookies included,
// as in BIND, where each query is counted once. The rate is measured over
// each whole second (BIND measures over the window): the stripes of the
// statistics count requests, and the first of a new second adds them up
// and sets the factor for that second.
type qpsScaler struct {
	target float64
	second atomic.Int64

	// The allowances as configured (with slip-ratio, see limit), and as
	// scaled by the current factor: worked out once a second, not on
	// every Debit.
	base   [LimitKindLast]limit
	prot   protection // as configured (see RRL.initProtection)
	window int64
	scaled atomic.Pointer[scaledLimits]
}

// scaledLimits are an RRL's allowances for one second of qps-scale, and
// the factor (at most 1) they were scaled by.
type scaledLimits struct {
	limits [LimitKindLast]limit
	factor float64
	prot   protection
}

func newQPSScaler(target float64, base [LimitKindLast]limit, window int64) *qpsScaler {
	q := &qpsScaler{target: target, base: base, window: window}
	q.second.Store(math.MinInt64)
	q.setFactor(1)
	return q
}

// setFactor makes f the scale factor, and scales the allowances by it: the
// response allowances, all-per-second, all-bytes-per-second and the
// request prefixes (not the network's request limits), and
// slip-ratio when it is above 2, never below 2, as BIND does.
func (q *qpsScaler) setFactor(f float64) {
	s := &scaledLimits{limits: q.base, factor: f, prot: scaleProtection(q.prot, f)}
	for k, l := range q.base {
		if !LimitKind(k).Request() && l.on() {
			s.limits[k] = limitOf(scale(l.interval, f), q.window)
			s.limits[k].slip = scaleSlip(l.slip, f)
		}
	}
	q.scaled.Store(s)
}

// scaleSlip scales a slip ratio by f when it is above 2, never below 2,
// as BIND does; 0 (no slip) stays 0.
func scaleSlip(ratio int, f float64) int {
	if ratio > 2 {
		return max(2, int(float64(ratio)*f))
	}
	return ratio
}

// observe counts one request and, on the first request of a new second,
// sets the scale factor from the rate over the seconds since the last one.
func (q *qpsScaler) observe(all stripes, s *stripe, now int64) {
	s.qps.Add(1)
	sec := now / int64(time.Second)
	old := q.second.Load()
	if sec <= old || !q.second.CompareAndSwap(old, sec) {
		return // a reading from before the second turned must not turn it back
	}
	var total int64
	for i := range all {
		total += all[i].qps.Swap(0)
	}
	elapsed := float64(1)
	if old != math.MinInt64 {
		elapsed = float64(max(sec-old, 1))
	}
	f := 1.0
	if qps := float64(total) / elapsed; qps > q.target {
		f = q.target / qps
	}
	q.setFactor(f)
}

// scale stretches an interval by factor f, as BIND scales a rate down, but
// never to less than one response per second (BIND's floor) unless the
// configured rate was already lower.
func scale(interval int64, f float64) int64 {
	if f >= 1 {
		return interval
	}
	return max(interval, int64(min(float64(interval)/f, float64(time.Second))))
}
