package replay

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dnsrrl/rrl"
)

// SuggestionCheck is the traffic replayed again under the suggestion: what
// it would cut of the named attacks and of the ordinary networks (nothing,
// when the suggestion holds), and how close the busiest ordinary networks
// come to each allowance.
type SuggestionCheck struct {
	Attacks  GroupCut `json:"attacks"`  // the networks named as attacks
	Ordinary GroupCut `json:"ordinary"` // the others
	// AttacksNotLimited are named networks that no limit touched.
	AttacksNotLimited []string `json:"attacks_not_limited"`
	// OrdinaryLimited are ordinary networks limited at least once (up to
	// maxListed of them; Ordinary.Limited counts them all).
	OrdinaryLimited []string    `json:"ordinary_limited"`
	Headroom        []*Headroom `json:"headroom"`
}

// GroupCut is what the suggestion would cut of a group of networks.
type GroupCut struct {
	Networks        int     `json:"networks"`
	Limited         int     `json:"limited"` // networks limited at least once
	Requests        int64   `json:"requests"`
	RequestsRefused int64   `json:"requests_refused"`
	Responses       int64   `json:"responses"`
	ResponsesCut    int64   `json:"responses_cut"` // slipped or dropped
	BytesCaptured   int64   `json:"bytes_captured"`
	BytesSent       int64   `json:"bytes_sent"`
	BytesCut        float64 `json:"bytes_cut_percent"`
}

// Headroom is how close the busiest ordinary network (or account) comes to
// an allowance: its peak per second as a share of it.
type Headroom struct {
	Keyword   string  `json:"keyword"`
	Allowance float64 `json:"allowance"`
	Peak      float64 `json:"peak"`
	Of        string  `json:"of"`
	Percent   float64 `json:"percent"`
}

// maxListed bounds the ordinary networks a check lists as limited.
const maxListed = 100

// CheckOptions are the options to replay the traffic under the
// suggestion: the options it was made with, and the settings it suggests
// after those given.
func (sg *Suggestion) CheckOptions() Options {
	opts := sg.opts
	opts.Settings = slices.Clone(opts.Settings)
	for _, s := range sg.Settings {
		if s.Given == "" && s.Value != "" {
			opts.Settings = append(opts.Settings, Setting{Keyword: s.Keyword, Value: s.Value, Origin: "-suggest"})
		}
	}
	return opts
}

// NewCheck returns the Replay that checks the suggestion: read the same
// traffic with it, then give it to Checked.
func (sg *Suggestion) NewCheck() (*Replay, error) {
	r, err := New(sg.CheckOptions())
	if err != nil {
		return nil, err
	}
	r.tap = &checker{sg: sg, lc: r.engines[0].lc, limited: map[netip.Prefix]bool{}}
	return r, nil
}

// Checked fills the suggestion's Check from the Replay of NewCheck, once
// the traffic has been read with it.
func (sg *Suggestion) Checked(r *Replay) {
	c, ok := r.tap.(*checker)
	if !ok {
		return
	}
	sg.checkRep = r.Reports()[0]
	ck := &SuggestionCheck{Attacks: c.attacks, Ordinary: c.ordinary, AttacksNotLimited: []string{}, OrdinaryLimited: []string{}}
	ck.Attacks.Networks = len(sg.attackSet)
	ck.Ordinary.Networks = sg.Networks - len(sg.attackSet)
	for _, g := range []*GroupCut{&ck.Attacks, &ck.Ordinary} {
		if g.BytesCaptured > 0 {
			g.BytesCut = round2(100 * float64(g.BytesCaptured-g.BytesSent) / float64(g.BytesCaptured))
		}
	}
	for n := range sg.attackSet {
		if c.limited[n] {
			ck.Attacks.Limited++
		} else {
			ck.AttacksNotLimited = append(ck.AttacksNotLimited, n.String())
		}
	}
	for n := range c.limited {
		if !sg.attackSet[n] {
			ck.Ordinary.Limited++
			ck.OrdinaryLimited = append(ck.OrdinaryLimited, n.String())
		}
	}
	ck.Ordinary.Limited += c.overflow
	slices.Sort(ck.AttacksNotLimited)
	slices.Sort(ck.OrdinaryLimited)
	if len(ck.OrdinaryLimited) > maxListed {
		ck.OrdinaryLimited = ck.OrdinaryLimited[:maxListed]
	}
	ck.Headroom = sg.headroom()
	sg.Check = ck
}

// headroom lists each allowance's busiest ordinary peak as a share of it.
func (sg *Suggestion) headroom() []*Headroom {
	var out []*Headroom
	for _, s := range sg.Settings {
		if s.Peak <= 0 {
			continue
		}
		v := s.Value
		if _, after, ok := strings.Cut(v, ":"); ok {
			v = after // a request prefix's LENGTH:ALLOWANCE
		}
		a, err := strconv.ParseFloat(v, 64)
		if err != nil || a <= 0 {
			continue
		}
		out = append(out, &Headroom{Keyword: s.Keyword, Allowance: a, Peak: s.Peak, Of: s.PeakOf, Percent: round2(100 * s.Peak / a)})
	}
	return out
}

// checker tallies the check's replay by group: named attacks, or not.
type checker struct {
	sg       *Suggestion
	lc       *limiterConfig
	attacks  GroupCut
	ordinary GroupCut
	limited  map[netip.Prefix]bool
	overflow int // ordinary networks limited beyond the map's cap
}

func (c *checker) group(client netip.Addr) (*GroupCut, netip.Prefix) {
	n := c.lc.network(client)
	if c.sg.attackSet[n] {
		return &c.attacks, n
	}
	return &c.ordinary, n
}

func (c *checker) limit(n netip.Prefix) {
	if c.limited[n] {
		return
	}
	if len(c.limited) >= maxProfileNetworks && !c.sg.attackSet[n] {
		c.overflow++
		return
	}
	c.limited[n] = true
}

func (c *checker) request(_ time.Time, client netip.Addr, _, _, refused bool) {
	g, n := c.group(client)
	g.Requests++
	if refused {
		g.RequestsRefused++
		c.limit(n)
	}
}

func (c *checker) response(_ time.Time, client netip.Addr, _ bool, t *rrl.ResponseTuple, act rrl.Action, sent int) {
	g, n := c.group(client)
	g.Responses++
	g.BytesCaptured += int64(t.Size)
	g.BytesSent += int64(sent)
	if act != rrl.Send {
		g.ResponsesCut++
		c.limit(n)
	}
}
