package replay

import (
	"net/netip"
	"time"
)

// Timeline counts responses sent and limited (slipped or dropped) per step
// of time from Start, overall and for the most limited networks.
type Timeline struct {
	Start    time.Time       `json:"start"`
	Step     float64         `json:"step_seconds"`
	Sent     []int64         `json:"sent"`
	Limited  []int64         `json:"limited"`
	Networks []NetworkSeries `json:"networks,omitempty"`
}

// NetworkSeries is the timeline of one network, counted from when it was
// first limited (or became one of the tracked networks).
type NetworkSeries struct {
	Network string  `json:"network"`
	Sent    []int64 `json:"sent"`
	Limited []int64 `json:"limited"`
}

// Bounds of the timeline: buckets before they are merged in pairs, and
// networks followed at once.
const (
	maxBuckets      = 1200
	trackedNetworks = 16
)

type series struct {
	sent, limited []int64
	weight        int64 // limited responses counted, for the choice of networks
}

func (s *series) add(i int, limited bool) {
	for len(s.sent) <= i {
		s.sent, s.limited = append(s.sent, 0), append(s.limited, 0)
	}
	if limited {
		s.limited[i]++
		s.weight++
	} else {
		s.sent[i]++
	}
}

// halve merges the buckets in pairs.
func (s *series) halve() {
	for i := 0; i < len(s.sent); i++ {
		j := i / 2
		if i%2 == 0 {
			s.sent[j], s.limited[j] = s.sent[i], s.limited[i]
		} else {
			s.sent[j] += s.sent[i]
			s.limited[j] += s.limited[i]
		}
	}
	n := (len(s.sent) + 1) / 2
	s.sent, s.limited = s.sent[:n], s.limited[:n]
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

func (t *timelineBuilder) add(at time.Time, n netip.Prefix, limited bool) {
	if t.start.IsZero() {
		t.start = at.Truncate(time.Second)
	}
	i := t.bucket(at)
	t.all.add(i, limited)
	s := t.networks[n]
	if s == nil && limited {
		s = t.track(n)
	}
	if s != nil {
		s.add(i, limited)
	}
}

func (t *timelineBuilder) bucket(at time.Time) int {
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

func (t *timelineBuilder) track(n netip.Prefix) *series {
	s := &series{}
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
	tl := &Timeline{Start: t.start, Step: time.Duration(t.step).Seconds(), Sent: t.all.sent, Limited: t.all.limited}
	for _, e := range top {
		if len(tl.Networks) >= k {
			break
		}
		if s := t.networks[e.prefix]; s != nil {
			tl.Networks = append(tl.Networks, NetworkSeries{Network: e.Network, Sent: pad(s.sent, len(tl.Sent)), Limited: pad(s.limited, len(tl.Sent))})
		}
	}
	return tl
}

func pad(v []int64, n int) []int64 {
	for len(v) < n {
		v = append(v, 0)
	}
	return v
}
