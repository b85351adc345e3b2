package rrl

import (
	"math"
	"sync/atomic"
	"time"
)

// qpsScaler implements qps-scale: when the server as a whole answers more
// than target requests per second, every response allowance (and
// all-per-second, all-bytes-per-second, stream-time-per-second, the
// request prefixes, and slip-ratio above 2) shrinks by target/qps, so that limiting tightens as
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

	// The allowances as configured, and as scaled by the current factor:
	// worked out once a second, not on every Debit.
	base   allowances
	scaled atomic.Pointer[allowances]
}

func newQPSScaler(target float64, base allowances) *qpsScaler {
	q := &qpsScaler{target: target, base: base}
	q.second.Store(math.MinInt64)
	q.setFactor(1)
	return q
}

// setFactor makes f the scale factor, and scales the allowances by it (see
// allowances.scaled).
func (q *qpsScaler) setFactor(f float64) {
	s := q.base.scaled(f)
	q.scaled.Store(&s)
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
