package rrl

import "fmt"

// Stats counts the outcomes of Debit. An RRL keeps them per shard and
// GetStats sums them; a Stats value itself is not safe for concurrent use.
type Stats struct {
	RPS       [AllowanceLast]int64 // Debit calls by category, since the last zeroing
	Actions   [ActionLast]int64
	IPReasons [IPLast]int64
	RTReasons [RTLast]int64

	CacheLength int   // accounts held now
	Evictions   int64 // accounts recycled because the table was full, since the last zeroing
}

// Copy returns a copy of s and, if zeroAfter is true, zeroes s.
func (s *Stats) Copy(zeroAfter bool) Stats {
	c := *s
	if zeroAfter {
		*s = Stats{}
	}
	return c
}

// Add adds the counters of from to s. CacheLength is added too, so that the
// sum over several RRLs is the total number of accounts they hold.
func (s *Stats) Add(from *Stats) {
	for i, v := range from.RPS {
		s.RPS[i] += v
	}
	for i, v := range from.Actions {
		s.Actions[i] += v
	}
	for i, v := range from.IPReasons {
		s.IPReasons[i] += v
	}
	for i, v := range from.RTReasons {
		s.RTReasons[i] += v
	}
	s.CacheLength += from.CacheLength
	s.Evictions += from.Evictions
}

// count records one Debit outcome.
func (s *Stats) count(cat AllowanceCategory, act Action, ipr IPReason, rtr RTReason) {
	if cat < AllowanceLast {
		s.RPS[cat]++
	}
	s.Actions[act]++
	s.IPReasons[ipr]++
	s.RTReasons[rtr]++
}

// String returns the counters on one line, in the order of the fields.
func (s Stats) String() string {
	return fmt.Sprintf("RPS %v Actions %v IPReasons %v RTReasons %v CacheLength %d Evictions %d",
		s.RPS, s.Actions, s.IPReasons, s.RTReasons, s.CacheLength, s.Evictions)
}
