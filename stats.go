package rrl

import (
	"fmt"
	"strings"
	"sync/atomic"
)

// Stats counts the outcomes of Debit, DebitResponse and DebitRequest, one
// for each response (or for each request that Debit or DebitRequest refused),
// since the last zeroing: a request that DebitRequest lets through is
// counted with its response, a request DebitRequest refuses counts as a
// Drop with IPRateLimit and RTNotReached in no category (RPS), and a
// response the caller exempts without DebitResponse (a valid server
// cookie) is not counted. An RRL keeps the counts in stripes (so that
// processors counting at once do not write the same memory) and GetStats
// sums them; a Stats value itself is not safe for concurrent use.
type Stats struct {
	RPS       [AllowanceLast]int64 // responses counted, by category
	Actions   [ActionLast]int64
	IPReasons [IPLast]int64
	RTReasons [RTLast]int64

	CacheLength int   // accounts held now
	Evictions   int64 // accounts recycled because their bucket of the table was full, since the last zeroing

	// RequestPrefixDrops counts the requests refused by each request
	// prefix, by family (0 IPv4, 1 IPv6) and the pair's place in
	// ipv4-request-prefixes or ipv6-request-prefixes. They are among the
	// drops with IPRateLimit.
	RequestPrefixDrops [2][MaxRequestPrefixes]int64
	// RequestPrefixLengths is the length of the pair whose refusals each
	// place of RequestPrefixDrops counts, from the Config (0: no pair
	// there), so that String can name them. GetStats fills it in.
	RequestPrefixLengths [2][MaxRequestPrefixes]int
	// AllBytesDrops counts the responses dropped for all-bytes-per-second
	// (RTAllBytesLimit), TooLarge those longer than nocookie-udp-size that
	// went as truncated replies (RTTooLarge).
	AllBytesDrops int64
	TooLarge      int64
	// StreamTimeDrops counts the stream requests refused because their
	// network had spent its stream-time-per-second budget (among the
	// drops with IPRateLimit).
	StreamTimeDrops int64
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
// sum over several RRLs is the total number of accounts they hold. A place
// of RequestPrefixLengths that s has not set takes from's length; one
// where the two differ is set to -1, a length unknown, since its count
// then sums the refusals of different prefixes.
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
	for f := range s.RequestPrefixDrops {
		for i, v := range from.RequestPrefixDrops[f] {
			s.RequestPrefixDrops[f][i] += v
		}
		for i, bits := range from.RequestPrefixLengths[f] {
			if mine := &s.RequestPrefixLengths[f][i]; *mine == 0 {
				*mine = bits
			} else if bits != 0 && bits != *mine {
				*mine = -1
			}
		}
	}
	s.AllBytesDrops += from.AllBytesDrops
	s.TooLarge += from.TooLarge
	s.StreamTimeDrops += from.StreamTimeDrops
}

// protectCounts is a stripe's share of the counters of the protections
// beyond BIND (prefixes.go).
type protectCounts struct {
	prefixDrops [2][MaxRequestPrefixes]atomic.Int64
	streamDrops atomic.Int64 // stream-time-per-second
}

// addTo adds the counters to sum, reading each with read.
func (p *protectCounts) addTo(sum *Stats, read func(*atomic.Int64) int64) {
	for f := range p.prefixDrops {
		for i := range p.prefixDrops[f] {
			sum.RequestPrefixDrops[f][i] += read(&p.prefixDrops[f][i])
		}
	}
	sum.StreamTimeDrops += read(&p.streamDrops)
}

// countN records n Debit outcomes alike; a category out of range counts
// in none.
func (s *Stats) countN(cat AllowanceCategory, act Action, ipr IPReason, rtr RTReason, n int64) {
	if cat < AllowanceLast {
		s.RPS[cat] += n
	}
	s.Actions[act] += n
	s.IPReasons[ipr] += n
	s.RTReasons[rtr] += n
}

// String returns the counters on one line, each with its label (the
// identifier without its type's prefix), in the order of the fields:
//
//	RPS Answer 3 Referral 0 NoData 1 NXDomain 0 Error 0; Actions Send 2 Drop 1 Slip 1; IPReasons Ok 0 NotConfigured 4 ...; RTReasons Ok 2 ...; CacheLength 2; Evictions 0; RequestPrefixDrops IPv4 [/24 0 /18 3] IPv6 []; AllBytesDrops 0; TooLarge 0; StreamTimeDrops 0
//
// The request prefixes' drops are named by length (RequestPrefixLengths),
// in the order of the pairs configured; a place with refusals and no
// length known shows "/?".
func (s Stats) String() string {
	var b strings.Builder
	group := func(label string, counts []int64, name func(int) string, prefix string) {
		b.WriteString(label)
		for i, n := range counts {
			fmt.Fprintf(&b, " %s %d", strings.TrimPrefix(name(i), prefix), n)
		}
		b.WriteString("; ")
	}
	group("RPS", s.RPS[:], func(i int) string { return AllowanceCategory(i).String() }, "Allowance")
	group("Actions", s.Actions[:], func(i int) string { return Action(i).String() }, "")
	group("IPReasons", s.IPReasons[:], func(i int) string { return IPReason(i).String() }, "IP")
	group("RTReasons", s.RTReasons[:], func(i int) string { return RTReason(i).String() }, "RT")
	fmt.Fprintf(&b, "CacheLength %d; Evictions %d; RequestPrefixDrops IPv4 %s IPv6 %s; AllBytesDrops %d; TooLarge %d; StreamTimeDrops %d",
		s.CacheLength, s.Evictions, s.prefixDrops(0), s.prefixDrops(1), s.AllBytesDrops, s.TooLarge, s.StreamTimeDrops)
	return b.String()
}

// prefixDrops writes the drops of family fam's request prefixes, each
// after its length: "[/24 0 /18 3]", "[]" for none.
func (s *Stats) prefixDrops(fam int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, n := range s.RequestPrefixDrops[fam] {
		bits := s.RequestPrefixLengths[fam][i]
		if bits == 0 && n == 0 {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(' ')
		}
		if bits > 0 {
			fmt.Fprintf(&b, "/%d %d", bits, n)
		} else {
			fmt.Fprintf(&b, "/? %d", n)
		}
	}
	b.WriteByte(']')
	return b.String()
}

// prefixLengths returns the lengths of the request prefixes configured, by
// family and place, for Stats.RequestPrefixLengths.
func (c *Config) prefixLengths() (lengths [2][MaxRequestPrefixes]int) {
	for fam := range c.prefixes {
		for i, p := range c.prefixes[fam][:c.prefixCount[fam]] {
			lengths[fam][i] = p.Bits
		}
	}
	return lengths
}
