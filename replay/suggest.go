package replay

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// A Suggester reads traffic, as a Replay does, and suggests the settings
// that limit none of its ordinary networks: see Suggestion.
type Suggester struct {
	opts    Options
	lc      *limiterConfig
	r       *Replay
	profile *profile
}

// NewSuggester returns a Suggester for traffic replayed with opts: its
// zones, zone data and cookie secrets are the servers', and its Settings
// are kept as given, not suggested (the network prefix lengths and window
// among them shape the accounts that are counted). A Sweep is refused.
func NewSuggester(opts Options) (*Suggester, error) {
	if opts.Sweep != nil {
		return nil, errors.New("a suggestion is of one configuration: no sweep")
	}
	r, err := New(opts)
	if err != nil {
		return nil, err
	}
	lc := r.engines[0].lc
	s := &Suggester{opts: opts, lc: lc, r: r, profile: newProfile(lc)}
	r.tap = s.profile
	return s, nil
}

// Replay returns the Replay to read the traffic with (ReadFile, Read).
func (s *Suggester) Replay() *Replay { return s.r }

// Rule factors: see SuggestionRule.
const (
	// marginFactor is the allowance over the ordinary peak. A count per
	// whole second can double over a second's boundary (the end of one,
	// the start of the next); an account that holds a second of credit and
	// earns rate a second admits rate × (1 + d) in any d seconds, and
	// twice the peak per second covers the peak × (d + 2) that can come.
	marginFactor = 2
	// outlierFactor and outlierPercentile: a network is far above the
	// rest when its peak is more than outlierFactor times the peak of the
	// network at the outlierPercentile of all.
	outlierFactor     = 4
	outlierPercentile = 0.90
	// minRanked is the fewest networks (or prefixes) with a measure for
	// its percentile to mean anything; with fewer, none is named.
	minRanked = 10
	// minSpread is the fewest networks of a wider prefix for a flood
	// spread over them to be named as one.
	minSpread = 4
	// largeFactor: a network's answers are large when their mean size is
	// this many times the median of the networks' mean sizes.
	largeFactor = 2
)

// minOutlier is the least peak of a measure that can be named an attack,
// whatever the rest do: a few responses a second are not a flood.
var minOutlier = [measureCount]int64{5, 5, 5, 5, 5, 5, 4096, 5}

// SuggestionRule states how attacks are told from ordinary traffic, and
// how the allowances are set, as the output prints it.
const SuggestionRule = "A network is named a likely attack when, for some allowance, its busiest second is more than " +
	"4 times the busiest second of the network at the 90th percentile of all (ranked by that allowance's measure, " +
	"at least 10 networks ranked, and at least 5 a second, or 4,096 bytes), it never asked over TCP nor with a valid server cookie, " +
	"and its responses are concentrated (one account had at least half of them) or large (their mean size at least twice " +
	"the median of the networks' means). A /20 (IPv4) or /48 (IPv6) is named a spread flood by the same test on its unproven " +
	"requests, when at least 4 of its networks asked, none proven, and one response (category and name) was at least " +
	"half of its responses; its networks are named with it. Named networks are left out of the peaks. Each allowance is " +
	"twice the busiest second of any ordinary account it limits, rounded up (a count per second can double across a " +
	"second's boundary; twice it is never limited)."

// Suggestion is the settings suggested for a capture, each with its
// reason, the networks left out as likely attacks, and the check: the
// same traffic replayed under the suggestion.
type Suggestion struct {
	Settings []*SuggestedSetting `json:"settings"`
	Zones    []string            `json:"zones,omitempty"`
	Attacks  []*NamedAttack      `json:"attacks"`
	// AttacksNotListed are named networks beyond the list's cap.
	AttacksNotListed int              `json:"attacks_not_listed,omitempty"`
	Rule             string           `json:"rule"`
	Networks         int              `json:"networks"`           // client networks seen
	Untracked        int64            `json:"untracked,omitzero"` // charges beyond the profile's caps, not in the peaks
	Messages         int64            `json:"messages"`
	Seconds          float64          `json:"seconds"`
	Check            *SuggestionCheck `json:"check,omitempty"`

	opts      Options
	lc        *limiterConfig
	attackSet map[netip.Prefix]bool
	dists     [measureCount][]peakPoint
	checkRep  *Report
}

// SuggestedSetting is one line of the suggested rrl block.
type SuggestedSetting struct {
	Keyword string `json:"keyword"`
	Value   string `json:"value"`
	// Given is where a setting kept as given came from ("-set",
	// "Corefile:4"); empty for a suggested one.
	Given  string `json:"given,omitempty"`
	Reason string `json:"reason"`
	// Peak is the busiest second of the ordinary traffic it limits, per
	// second (bytes for all-bytes-per-second), of PeakOf; Margin is the
	// value over the peak. Both are absent for a setting without a peak.
	Peak    float64 `json:"ordinary_peak,omitempty"`
	PeakOf  string  `json:"peak_of,omitempty"`
	Margin  float64 `json:"margin,omitempty"`
	measure int
}

// NamedAttack is a network (or a wider prefix's networks) left out of the
// peaks as a likely attack.
type NamedAttack struct {
	Network  string   `json:"network"`
	Networks int      `json:"networks,omitempty"` // for a spread flood: its networks named
	Reason   string   `json:"reason"`
	Peaks    []string `json:"peaks"` // the measures it is far above the rest in
}

// peakPoint is a network's peak of one measure, for the HTML charts.
type peakPoint struct {
	peak   int64
	attack bool
}

// maxNamed bounds the attacks listed; all named networks are left out of
// the peaks all the same.
const maxNamed = 256

// Suggest works out the suggestion from the traffic read. It fails when
// nothing was read that the limiter would charge.
func (s *Suggester) Suggest() (*Suggestion, error) {
	p := s.profile
	if len(p.networks) == 0 {
		packets, _ := s.r.Stats()
		return nil, fmt.Errorf("no DNS queries or responses to suggest settings from (%d packets read%s)", packets, skippedText(s.r.skipped))
	}
	sg := &Suggestion{Rule: SuggestionRule, opts: s.opts, lc: s.lc, attackSet: map[netip.Prefix]bool{},
		Networks: len(p.networks), Untracked: p.overflow, Messages: p.messages, Seconds: p.last.Sub(p.first).Seconds(), Zones: s.r.zones}
	nets := make([]*netStats, 0, len(p.networks))
	for _, n := range p.networks {
		nets = append(nets, n)
	}
	// A fixed order, so that ties name the same network every time.
	slices.SortFunc(nets, func(a, b *netStats) int { return a.prefix.Addr().Compare(b.prefix.Addr()) })
	sg.nameNetworks(nets)
	sg.nameSpreadFloods(p, nets)
	sg.suggest(p, nets)
	return sg, nil
}

// skippedText lists why packets were skipped, for the message of a replay
// that found nothing.
func skippedText(skipped map[string]int64) string {
	keys := make([]string, 0, len(skipped))
	for k := range skipped {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, ", %d %s", skipped[k], k)
	}
	return b.String()
}

// percentile returns the value at quantile q of vals (nearest rank); vals
// are sorted in place.
func percentile(vals []int64, q float64) int64 {
	if len(vals) == 0 {
		return 0
	}
	slices.Sort(vals)
	i := int(math.Ceil(q*float64(len(vals)))) - 1
	return vals[min(max(i, 0), len(vals)-1)]
}

// outliers returns, for each measure, the least peak that is far above
// the rest (math.MaxInt64 when none can be: too few ranked).
func outliers(nets []*netStats) [measureCount]int64 {
	var bar [measureCount]int64
	for m := range measureCount {
		var vals []int64
		for _, n := range nets {
			if v := n.peak(m); v > 0 {
				vals = append(vals, v)
			}
		}
		bar[m] = outlierBar(vals, minOutlier[m])
	}
	return bar
}

// outlierBar is the least value far above the rest of vals: more than
// outlierFactor times their outlierPercentile, and at least least.
func outlierBar(vals []int64, least int64) int64 {
	if len(vals) < minRanked {
		return math.MaxInt64
	}
	return max(least, outlierFactor*percentile(vals, outlierPercentile)+1)
}

// nameNetworks names the networks far above the rest in some measure that
// have an attack's shape.
func (sg *Suggestion) nameNetworks(nets []*netStats) {
	bar := outliers(nets)
	median := medianMeanSize(nets)
	for _, n := range nets {
		var peaks []string
		for m := range measureCount {
			if v := n.peak(m); v >= bar[m] {
				peaks = append(peaks, fmt.Sprintf("%s: %s, over %s", measureName(m), perSecond(m, float64(v)), perSecond(m, float64(bar[m]-1))))
			}
		}
		if peaks == nil || n.proven {
			continue
		}
		var signs []string
		if n.responses > 0 && 2*n.top >= n.responses {
			signs = append(signs, fmt.Sprintf("one account had %d%% of its responses", 100*n.top/n.responses))
		}
		if mean := n.meanSize(); median > 0 && mean >= largeFactor*median {
			signs = append(signs, fmt.Sprintf("its responses average %.0f bytes, %.1f times the networks' median", mean, mean/median))
		}
		if signs == nil {
			continue // busy, but shaped like a resolver: many names, ordinary sizes
		}
		sg.name(&NamedAttack{Network: n.prefix.String(), Peaks: peaks,
			Reason: "far above the rest; " + strings.Join(signs, "; ") + "; no query over TCP or with a valid server cookie"}, n.prefix)
	}
}

// name adds a named attack, listing it while the list has room.
func (sg *Suggestion) name(a *NamedAttack, nets ...netip.Prefix) {
	for _, n := range nets {
		sg.attackSet[n] = true
	}
	if len(sg.Attacks) < maxNamed {
		sg.Attacks = append(sg.Attacks, a)
	} else {
		sg.AttacksNotListed++
	}
}

func (n *netStats) meanSize() float64 {
	if n.responses == 0 {
		return 0
	}
	return float64(n.respBytes) / float64(n.responses)
}

// medianMeanSize is the median over networks of their responses' mean
// size.
func medianMeanSize(nets []*netStats) float64 {
	var means []float64
	for _, n := range nets {
		if n.responses > 0 {
			means = append(means, n.meanSize())
		}
	}
	if len(means) == 0 {
		return 0
	}
	slices.Sort(means)
	return means[len(means)/2]
}

// nameSpreadFloods names the wider prefixes far above the rest in
// unproven requests whose networks, several and none proven, mostly drew
// one response: a flood spread over the prefix, each network under the
// per-network bars.
func (sg *Suggestion) nameSpreadFloods(p *profile, nets []*netStats) {
	members := map[netip.Prefix][]*netStats{}
	for _, n := range nets {
		if n.prefix.Bits() > aggBitsFor(n.prefix.Addr()) {
			a := aggregateOf(n.prefix.Addr())
			members[a] = append(members[a], n)
		}
	}
	var vals []int64
	for _, a := range p.aggs {
		vals = append(vals, a.requests.peak)
	}
	bar := outlierBar(vals, minOutlier[measureRequests])
	aggs := make([]*aggStats, 0, len(p.aggs))
	for _, a := range p.aggs {
		aggs = append(aggs, a)
	}
	slices.SortFunc(aggs, func(a, b *aggStats) int { return a.prefix.Addr().Compare(b.prefix.Addr()) })
	for _, a := range aggs {
		ms := members[a.prefix]
		if a.requests.peak < bar || len(ms) < minSpread || anyProven(ms) {
			continue
		}
		share, what := topShare(p, a.prefix)
		if 2*share < 1 {
			continue
		}
		prefixes := make([]netip.Prefix, len(ms))
		for i, n := range ms {
			prefixes[i] = n.prefix
		}
		sg.name(&NamedAttack{Network: a.prefix.String(), Networks: len(ms),
			Peaks: []string{fmt.Sprintf("unproven requests of the /%d: %d/s, over %d/s", a.prefix.Bits(), a.requests.peak, bar-1)},
			Reason: fmt.Sprintf("a flood spread over %d networks of it, none asking over TCP or with a valid server cookie; %.0f%% of their responses were %s",
				len(ms), 100*share, what)}, prefixes...)
	}
}

// aggBitsFor is the aggregate length of a's family.
func aggBitsFor(a netip.Addr) int {
	if a.Is4() {
		return aggBits4
	}
	return aggBits6
}

func anyProven(ns []*netStats) bool {
	return slices.ContainsFunc(ns, func(n *netStats) bool { return n.proven })
}

// topShare returns the share of the responses to the networks of agg that
// went to its most common response (category and name, over all its
// networks), and that response.
func topShare(p *profile, agg netip.Prefix) (float64, string) {
	type resp struct {
		cat          uint8
		class, qtype uint16
		name         string
	}
	counts := map[resp]int64{}
	var total int64
	for k, a := range p.accounts {
		if !agg.Contains(k.network.Addr()) {
			continue
		}
		counts[resp{uint8(k.cat), k.class, k.qtype, k.name}] += a.total
		total += a.total
	}
	var best resp
	var most int64
	for r, c := range counts {
		if c > most || c == most && r.name < best.name {
			best, most = r, c
		}
	}
	if total == 0 {
		return 0, ""
	}
	what := categoryNames[best.cat]
	if best.name != "" {
		what += " " + best.name
	}
	return float64(most) / float64(total), what
}

// suggest sets each setting: as given, or above the ordinary peak.
func (sg *Suggestion) suggest(p *profile, nets []*netStats) {
	given := map[string]Setting{}
	var order []string
	for _, s := range sg.opts.Settings {
		if _, ok := given[s.Keyword]; !ok {
			order = append(order, s.Keyword)
		}
		given[s.Keyword] = s
	}
	for m := range measureCount {
		sg.dists[m] = sg.distribution(nets, m)
	}
	for _, m := range []int{0, 3, 4, 1, 2, measureAll, measureBytes, measureRequests} {
		sg.add(given, sg.allowance(nets, m))
	}
	for _, s := range sg.requestPrefixes(p) {
		sg.add(given, s)
	}
	sg.add(given, sg.noCookieUDPSize(nets))
	sg.add(given, sg.tableSize(p))
	sg.add(given, &SuggestedSetting{Keyword: "window", Value: "15", Reason: "the default (BIND's): a limited account stays limited up to 15 seconds after its flood stops; the traffic gives no reason to differ", measure: -1})
	sg.add(given, &SuggestedSetting{Keyword: "slip-ratio", Value: "2", Reason: "the default (BIND's): every other limited response goes as a truncated reply, so that a real client behind a limited network retries over TCP", measure: -1})
	// Settings given that are not suggested (exempt-clients, qps-scale,
	// a prefix length) stay, in the order given.
	for _, k := range order {
		if !slices.ContainsFunc(sg.Settings, func(s *SuggestedSetting) bool { return s.Keyword == k }) {
			g := given[k]
			sg.Settings = append(sg.Settings, &SuggestedSetting{Keyword: k, Value: g.Value, Given: origin(g), Reason: "kept as given", measure: -1})
		}
	}
}

func origin(s Setting) string {
	if s.Origin == "" {
		return "-set"
	}
	return s.Origin
}

// add appends a suggested setting, or in its place the one given, whose
// reason then says how it compares with the ordinary peak.
func (sg *Suggestion) add(given map[string]Setting, s *SuggestedSetting) {
	if s == nil {
		return
	}
	g, ok := given[s.Keyword]
	if !ok {
		sg.Settings = append(sg.Settings, s)
		return
	}
	kept := &SuggestedSetting{Keyword: s.Keyword, Value: g.Value, Given: origin(g), Peak: s.Peak, PeakOf: s.PeakOf, measure: s.measure}
	kept.Reason = "kept as given"
	if v, err := strconv.ParseFloat(strings.Fields(g.Value + " x")[0], 64); err == nil && s.Peak > 0 {
		kept.Margin = round2(v / s.Peak)
		switch {
		case v == 0:
			kept.Reason += "; off"
		case v < s.Peak:
			kept.Reason += fmt.Sprintf("; BELOW the ordinary peak (%s): ordinary traffic would be limited", perSecond(s.measure, s.Peak))
		case v < marginFactor*s.Peak:
			kept.Reason += fmt.Sprintf("; under twice the ordinary peak (%s): ordinary traffic may be limited", perSecond(s.measure, s.Peak))
		default:
			kept.Reason += fmt.Sprintf("; %.1f times the ordinary peak (%s)", v/s.Peak, perSecond(s.measure, s.Peak))
		}
	}
	sg.Settings = append(sg.Settings, kept)
}

// distribution returns every network's peak of measure m, busiest first,
// attacks marked.
func (sg *Suggestion) distribution(nets []*netStats, m int) []peakPoint {
	var pts []peakPoint
	for _, n := range nets {
		if v := n.peak(m); v > 0 {
			pts = append(pts, peakPoint{peak: v, attack: sg.attackSet[n.prefix]})
		}
	}
	slices.SortStableFunc(pts, func(a, b peakPoint) int { return cmp.Compare(b.peak, a.peak) })
	return pts
}

// busiestOrdinary returns the ordinary network with the highest peak of
// measure m, or nil.
func (sg *Suggestion) busiestOrdinary(nets []*netStats, m int) *netStats {
	var best *netStats
	for _, n := range nets {
		if !sg.attackSet[n.prefix] && n.peak(m) > 0 && (best == nil || n.peak(m) > best.peak(m)) {
			best = n
		}
	}
	return best
}

// allowance suggests the setting of measure m: twice the busiest ordinary
// second, rounded up.
func (sg *Suggestion) allowance(nets []*netStats, m int) *SuggestedSetting {
	kw := measureKeywords[m]
	n := sg.busiestOrdinary(nets, m)
	if n == nil {
		if v := sg.value("responses-per-second"); m < measureAll && m != 0 && v != "" {
			return &SuggestedSetting{Keyword: kw, Value: v, Reason: "no such responses to ordinary networks: as responses-per-second", measure: m}
		}
		return &SuggestedSetting{Keyword: kw, Value: "0", Reason: "off: no ordinary traffic to set it by", measure: m}
	}
	peak := float64(n.peak(m))
	v := math.Ceil(marginFactor * peak)
	if m == measureBytes {
		v = max(v, 512) // the least all-bytes-per-second
	}
	of := n.prefix.String()
	if m < measureAll {
		of = accountName(n.catTop[m])
	}
	return &SuggestedSetting{Keyword: kw, Value: strconv.FormatFloat(v, 'f', -1, 64), Peak: peak, PeakOf: of, Margin: round2(v / peak),
		Reason: fmt.Sprintf("above the busiest ordinary %s, %s (%s), by %.1f times", measureWhat(m), perSecond(m, peak), of, v/peak), measure: m}
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// accountName names a response account as the limiter keys it.
func accountName(a *account) string {
	if a == nil {
		return ""
	}
	s := a.key.network.String() + " " + categoryNames[a.key.cat]
	if a.key.name != "" {
		s += " " + a.key.name
	}
	if a.key.qtype != 0 {
		s += " " + dns.Type(a.key.qtype).String()
	}
	return s
}

// measureName and measureWhat name a measure in the output.
func measureName(m int) string {
	if m < measureAll {
		return categoryNames[m] + " account"
	}
	return [...]string{"responses", "response bytes", "requests"}[m-measureAll]
}

func measureWhat(m int) string {
	if m < measureAll {
		return categoryNames[m] + " account"
	}
	return "network's " + [...]string{"responses", "response bytes", "requests"}[m-measureAll]
}

// perSecond writes a rate of measure m.
func perSecond(m int, v float64) string {
	if m == measureBytes {
		return strconv.FormatFloat(v, 'f', -1, 64) + " bytes/s"
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + "/s"
}

// requestPrefixes suggests a request prefix at the aggregate length of a
// family in which a spread flood was named: twice the busiest ordinary
// prefix's unproven requests. Without a spread flood none is needed:
// requests-per-second holds each network.
func (sg *Suggestion) requestPrefixes(p *profile) []*SuggestedSetting {
	var out []*SuggestedSetting
	for _, v4 := range []bool{true, false} {
		kw, bits := "ipv6-request-prefixes", aggBits6
		if v4 {
			kw, bits = "ipv4-request-prefixes", aggBits4
		}
		flood := slices.ContainsFunc(sg.Attacks, func(a *NamedAttack) bool {
			pf, err := netip.ParsePrefix(a.Network)
			return err == nil && a.Networks > 0 && pf.Addr().Is4() == v4
		})
		if !flood {
			continue
		}
		// A prefix holding a named network is left out as well: its peak
		// is the attack's too, and cannot be told from its networks'.
		mixed := map[netip.Prefix]bool{}
		for n := range sg.attackSet {
			mixed[aggregateOf(n.Addr())] = true
		}
		var best *aggStats
		for _, a := range p.aggs {
			if a.prefix.Addr().Is4() == v4 && !mixed[a.prefix] && (best == nil || a.requests.peak > best.requests.peak) {
				best = a
			}
		}
		if best == nil {
			continue
		}
		peak := float64(best.requests.peak)
		v := math.Ceil(marginFactor * peak)
		out = append(out, &SuggestedSetting{Keyword: kw, Value: fmt.Sprintf("%d:%g", bits, v), Peak: peak, PeakOf: best.prefix.String(), Margin: round2(v / peak), measure: measureRequests,
			Reason: fmt.Sprintf("a flood spread over a /%d was named; above the busiest /%d's unproven requests, %g/s (%s), by %.1f times (prefixes holding a named network left out)", bits, bits, peak, best.prefix, v/peak)})
	}
	return out
}

// noCookieUDPSize suggests nocookie-udp-size when the zone has large
// answers (over 512 bytes) that ordinary networks were not sent: the
// larger of 512 and their longest, rounded up to 64 bytes.
func (sg *Suggestion) noCookieUDPSize(nets []*netStats) *SuggestedSetting {
	longest, ordinary := 0, 0
	for _, n := range nets {
		longest = max(longest, n.maxSize)
		if !sg.attackSet[n.prefix] {
			ordinary = max(ordinary, n.maxSize)
		}
	}
	s := &SuggestedSetting{Keyword: "nocookie-udp-size", Value: "0", measure: -1}
	v := max(512, (ordinary+63)/64*64)
	switch {
	case longest <= 512:
		s.Reason = fmt.Sprintf("off: no UDP response is longer than 512 bytes (the longest is %d)", longest)
	case v >= longest:
		s.Reason = fmt.Sprintf("off: ordinary networks were sent UDP responses of up to %d bytes, as long as any; a size would truncate theirs", ordinary)
	default:
		s.Value = strconv.Itoa(v)
		s.Reason = fmt.Sprintf("the zone has UDP answers of up to %d bytes, ordinary networks were sent at most %d: longer ones go truncated to clients without a valid server cookie", longest, ordinary)
	}
	return s
}

// tableSize suggests max-table-size: room for twice the accounts used in
// the busiest window, and not below Knot's rule (1.4 times the busiest
// second's queries over the rate) nor the default.
func (sg *Suggestion) tableSize(p *profile) *SuggestedSetting {
	const def = 100000
	need := 2 * p.inWindow.peak
	rate, _ := strconv.ParseFloat(sg.value("responses-per-second"), 64)
	knot := int64(0)
	if rate > 0 {
		knot = int64(math.Ceil(1.4 * float64(p.server.peak) / rate))
	}
	v := max(def, need, knot)
	why := "the default"
	switch v {
	case need:
		why = "twice the accounts used in the busiest window"
	case knot:
		why = "Knot's rule"
	}
	return &SuggestedSetting{Keyword: "max-table-size", Value: strconv.FormatInt(v, 10), measure: -1,
		Reason: fmt.Sprintf("%s: at most %d accounts (responses, networks' own and prefixes') were used in one window of %d s, twice that is %d; Knot's rule, 1.4 × %d q/s (the busiest second) ÷ %g, gives %d; the default is %d",
			why, p.inWindow.peak, p.window, need, p.server.peak, rate, knot, def)}
}

// value returns the value of a setting of the suggestion so far, or "".
func (sg *Suggestion) value(keyword string) string {
	for _, s := range sg.Settings {
		if s.Keyword == keyword {
			return s.Value
		}
	}
	return ""
}
