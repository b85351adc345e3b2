package replay

import (
	"net/netip"
	"time"

	"github.com/dnsrrl/rrl"
)

// Timeline counts, per step of time from Start, the responses sent,
// slipped and dropped by a response limit, the requests refused (by
// requests-per-second or a request prefix) and the bytes of responses cut
// (not sent, or sent as a slip's smaller reply), overall and for the most
// limited networks. Limited is Slipped plus Dropped. The responses of
// refused requests are in none of the response series, so that a refusal
// is charted once, as a request; their bytes are in BytesCut.
type Timeline struct {
	Start    time.Time       `json:"start"`
	Step     float64         `json:"step_seconds"`
	Sent     []int64         `json:"sent"`
	Limited  []int64         `json:"limited"`
	Slipped  []int64         `json:"slipped"`
	Dropped  []int64         `json:"dropped"`
	Refused  []int64         `json:"refused"`
	BytesCut []int64         `json:"bytes_cut"`
	Networks []NetworkSeries `json:"networks,omitempty"`
}

// NetworkSeries is the timeline of one network, counted from From, when
// it was first limited (or became one of the tracked networks): its
// buckets before From are zero for want of counting, not of traffic.
type NetworkSeries struct {
	Network string    `json:"network"`
	From    time.Time `json:"from"`
	Sent    []int64   `json:"sent"`
	Limited []int64   `json:"limited"`
	Slipped []int64   `json:"slipped"`
	Dropped []int64   `json:"dropped"`
	Refused []int64   `json:"refused"`
}

// Bounds of the timeline: buckets before they are merged in pairs, and
// networks followed at once.
const (
	maxBuckets      = 1200
	trackedNetworks = 16
)

// bucket is one step of a series.
type bucket struct {
	sent, slipped, dropped, refused, cut int64
}

func (b *bucket) merge(o bucket) {
	b.sent, b.slipped, b.dropped = b.sent+o.sent, b.slipped+o.slipped, b.dropped+o.dropped
	b.refused, b.cut = b.refused+o.refused, b.cut+o.cut
}

type series struct {
	buckets []bucket
	weight  int64     // limited responses and refused requests counted, for the choice of networks
	from    time.Time // when counting began
}

// at returns the bucket i, making the series that long.
func (s *series) at(i int) *bucket {
	for len(s.buckets) <= i {
		s.buckets = append(s.buckets, bucket{})
	}
	return &s.buckets[i]
}

// add counts a response's fate, and the bytes it cut, in bucket i.
func (s *series) add(i int, act rrl.Action, cut int64) {
	b := s.at(i)
	b.cut += cut
	switch act {
	case rrl.Send:
		b.sent++
		return
	case rrl.Slip:
		b.slipped++
	default:
		b.dropped++
	}
	s.weight++
}

// refuse counts a refused request in bucket i.
func (s *series) refuse(i int) {
	s.at(i).refused++
	s.weight++
}

// halve merges the buckets in pairs.
func (s *series) halve() {
	for i := range s.buckets {
		if i%2 == 0 {
			s.buckets[i/2] = s.buckets[i]
		} else {
			s.buckets[i/2].merge(s.buckets[i])
		}
	}
	s.buckets = s.buckets[:(len(s.buckets)+1)/2]
}

// column returns one count of each of the first n buckets.
func (s *series) column(n int, f func(*bucket) int64) []int64 {
	out := make([]int64, n)
	for i := range min(n, len(s.buckets)) {
		out[i] = f(&s.buckets[i])
	}
	return out
}

// timelineBuilder keeps the overall series and those of up to
// trackedNetworks networks, chosen as the space-saving algorithm chooses
// heavy hitters: a newly limited network takes the place of the tracked
// one with the least weight, inheriting that weight, so the networks
// limited most end up tracked.
type timelineBuilder struct {
	start    time.Time
	step     int64 // nanoseconds
	all      series
	networks map[netip.Prefix]*series
}

func newTimelineBuilder() timelineBuilder {
	return timelineBuilder{step: int64(time.Second), networks: make(map[netip.Prefix]*series)}
}

// add counts a response of network n at the time at, its fate and the
// bytes it cut.
func (t *timelineBuilder) add(at time.Time, n netip.Prefix, act rrl.Action, cut int64) {
	i := t.bucket(at)
	t.all.add(i, act, cut)
	s := t.networks[n]
	if s == nil && act != rrl.Send {
		s = t.track(n, at)
	}
	if s != nil {
		s.add(i, act, cut)
	}
}

// cut counts the bytes of a response that was never made, its request
// refused: counted as a request by refuse, it is none of the responses.
func (t *timelineBuilder) cut(at time.Time, bytes int64) {
	t.all.at(t.bucket(at)).cut += bytes
}

// refuse counts a request of network n refused at the time at.
func (t *timelineBuilder) refuse(at time.Time, n netip.Prefix) {
	i := t.bucket(at)
	t.all.refuse(i)
	s := t.networks[n]
	if s == nil {
		s = t.track(n, at)
	}
	s.refuse(i)
}

// bucket returns the bucket of the time at, the first time setting the
// start (on a whole second) and a later one growing the step as needed.
func (t *timelineBuilder) bucket(at time.Time) int {
	if t.start.IsZero() {
		t.start = at.Truncate(time.Second)
	}
	d := int64(at.Sub(t.start))
	if d < 0 {
		return 0
	}
	for d/t.step >= maxBuckets {
		t.step *= 2
		t.all.halve()
		for _, s := range t.networks {
			s.halve()
		}
	}
	return int(d / t.step)
}

func (t *timelineBuilder) track(n netip.Prefix, at time.Time) *series {
	s := &series{from: at}
	if len(t.networks) >= trackedNetworks {
		var least netip.Prefix
		var lw int64 = -1
		for p, o := range t.networks {
			if lw < 0 || o.weight < lw || (o.weight == lw && p.Addr().Less(least.Addr())) {
				least, lw = p, o.weight
			}
		}
		delete(t.networks, least)
		s.weight = lw
	}
	t.networks[n] = s
	return s
}

// build returns the Timeline with the series of up to k networks of top
// (most limited first) that were tracked.
func (t *timelineBuilder) build(top []*NetworkEntry, k int) *Timeline {
	if t.start.IsZero() {
		return nil
	}
	n := len(t.all.buckets)
	tl := &Timeline{Start: t.start, Step: time.Duration(t.step).Seconds(),
		Sent:     t.all.column(n, func(b *bucket) int64 { return b.sent }),
		Limited:  t.all.column(n, func(b *bucket) int64 { return b.slipped + b.dropped }),
		Slipped:  t.all.column(n, func(b *bucket) int64 { return b.slipped }),
		Dropped:  t.all.column(n, func(b *bucket) int64 { return b.dropped }),
		Refused:  t.all.column(n, func(b *bucket) int64 { return b.refused }),
		BytesCut: t.all.column(n, func(b *bucket) int64 { return b.cut }),
	}
	for _, e := range top {
		if len(tl.Networks) >= k {
			break
		}
		if s := t.networks[e.prefix]; s != nil {
			tl.Networks = append(tl.Networks, NetworkSeries{Network: e.Network, From: s.from,
				Sent:    s.column(n, func(b *bucket) int64 { return b.sent }),
				Limited: s.column(n, func(b *bucket) int64 { return b.slipped + b.dropped }),
				Slipped: s.column(n, func(b *bucket) int64 { return b.slipped }),
				Dropped: s.column(n, func(b *bucket) int64 { return b.dropped }),
				Refused: s.column(n, func(b *bucket) int64 { return b.refused }),
			})
		}
	}
	return tl
}
