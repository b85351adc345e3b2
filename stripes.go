package rrl

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// An RRL counts the outcomes of its Debits in stripes, many more than the
// processors, rather than in one Stats: two processors counting at once
// then rarely write the same cache line. A Debit counts in the stripe that
// the address of its goroutine's stack picks, so that the Debits one
// goroutine makes from one place in its code count in one stripe, which
// stays in its processor's cache (a Debit from deeper in the stack, or
// after the stack has grown, may pick another: counting stays exact).
// GetStats adds the stripes up.
//
// A stripe counts the common outcomes, an action with its two reasons, per
// category with one atomic addition each; any other outcome costs four.

// stripe holds one share of an RRL's statistics.
type stripe struct {
	common [AllowanceLast + 1][commonOutcomes]atomic.Int64 // by category (AllowanceLast: none) and outcome
	// The outcomes that are not common, counted apart.
	rps       [AllowanceLast]atomic.Int64
	actions   [ActionLast]atomic.Int64
	ipReasons [IPLast]atomic.Int64
	rtReasons [RTLast]atomic.Int64

	evictions atomic.Int64
	qps       atomic.Int64 // requests counted for qps-scale
	prot      protectCounts

	_ [80]byte // a whole number of cache lines, so that stripes share none
}

// outcome is what a Debit decides, with its reasons.
type outcome struct {
	act Action
	ipr IPReason
	rtr RTReason
}

// commonOutcome numbers the common outcomes from 1 (0: not common), and
// commonOutcomeOf lists them.
var (
	commonOutcome   [ActionLast][IPLast][RTLast]uint8
	commonOutcomeOf []outcome
	udpOutcome      [ActionLast][RTLast]uint8 // commonOutcome[act][IPNotConfigured][rtr]
)

const commonOutcomes = 14

func init() {
	for _, ipr := range []IPReason{IPOk, IPNotConfigured} {
		commonOutcomeOf = append(commonOutcomeOf, outcome{Send, ipr, RTOk}, outcome{Drop, ipr, RTRateLimit},
			outcome{Slip, ipr, RTRateLimit}, outcome{Send, ipr, RTNotConfigured}, outcome{Send, ipr, RTNotUDP},
			outcome{Drop, ipr, RTAllLimit})
	}
	commonOutcomeOf = append(commonOutcomeOf, outcome{Send, IPExempt, RTNotReached}, outcome{Drop, IPRateLimit, RTNotReached})
	for i, o := range commonOutcomeOf {
		commonOutcome[o.act][o.ipr][o.rtr] = uint8(i + 1)
		if o.ipr == IPNotConfigured {
			udpOutcome[o.act][o.rtr] = uint8(i + 1)
		}
	}
}

// countUDP is count for an outcome of debitUDP, where no request limit
// applies (IPNotConfigured): one table of two indices to read rather than
// three.
func (s *stripe) countUDP(cat AllowanceCategory, act Action, rtr RTReason) {
	if c := udpOutcome[act][rtr]; c != 0 {
		s.common[min(cat, AllowanceLast)][c-1].Add(1)
		return
	}
	s.countRare(cat, act, IPNotConfigured, rtr)
}

// count records one outcome; a category out of range counts in none.
func (s *stripe) count(cat AllowanceCategory, act Action, ipr IPReason, rtr RTReason) {
	if c := commonOutcome[act][ipr][rtr]; c != 0 {
		s.common[min(cat, AllowanceLast)][c-1].Add(1)
		return
	}
	s.countRare(cat, act, ipr, rtr)
}

func (s *stripe) countRare(cat AllowanceCategory, act Action, ipr IPReason, rtr RTReason) {
	if cat < AllowanceLast {
		s.rps[cat].Add(1)
	}
	s.actions[act].Add(1)
	s.ipReasons[ipr].Add(1)
	s.rtReasons[rtr].Add(1)
}

// addTo adds the stripe's counters to sum, and zeroes them if zero is set.
func (s *stripe) addTo(sum *Stats, zero bool) {
	read := func(c *atomic.Int64) int64 {
		if zero {
			return c.Swap(0)
		}
		return c.Load()
	}
	for cat := range s.common {
		for i, o := range commonOutcomeOf {
			sum.countN(AllowanceCategory(cat), o.act, o.ipr, o.rtr, read(&s.common[cat][i]))
		}
	}
	for i := range s.rps {
		sum.RPS[i] += read(&s.rps[i])
	}
	for i := range s.actions {
		sum.Actions[i] += read(&s.actions[i])
	}
	for i := range s.ipReasons {
		sum.IPReasons[i] += read(&s.ipReasons[i])
	}
	for i := range s.rtReasons {
		sum.RTReasons[i] += read(&s.rtReasons[i])
	}
	sum.Evictions += read(&s.evictions)
	s.prot.addTo(sum, read)
}

// stripes is an RRL's statistics.
type stripes []stripe

// newStripes returns a power of two of stripes, four for each processor
// and at least 16, at most 128.
func newStripes() stripes {
	n := 16
	for n < 4*runtime.GOMAXPROCS(0) && n < 128 {
		n *= 2
	}
	return make(stripes, n)
}

// pick returns the stripe that the caller's place on its goroutine's stack
// picks (stacks are at least 2 KB apart, so goroutines spread).
func (s stripes) pick() *stripe {
	var onStack byte
	p := uint64(uintptr(unsafe.Pointer(&onStack))) >> 11
	return &s[p*0x9e3779b97f4a7c15>>40&uint64(len(s)-1)]
}
