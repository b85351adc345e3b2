package replay

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/miekg/dns"
)

// Report is what one configuration would have done to the replayed traffic.
// Every response of the input has one fate: sent, slipped (a truncated or
// BADCOOKIE reply in its place) or dropped (by a response limit, or with
// its request by a request limit): Responses = Sent + Slipped + Dropped.
// Cuts tell which limit cut what.
type Report struct {
	Setting  string   `json:"setting,omitempty"` // the swept keyword=value
	Settings []string `json:"settings"`          // every setting applied, in order
	Cookies  string   `json:"cookies"`           // how server cookies were judged
	Zones    []string `json:"zones,omitempty"`   // limited zones; empty: all

	First time.Time `json:"first,omitzero"` // time of the first and last message replayed; absent without any
	Last  time.Time `json:"last,omitzero"`

	Packets         int64 `json:"packets"` // packets (or dnstap frames) read, replayed or skipped
	Queries         int64 `json:"queries"`
	RequestsDropped int64 `json:"requests_dropped"` // queries refused by a request limit (requests-per-second, a request prefix)
	// ResponsesRefused are the responses of those queries, which the
	// server would never have made: they are among Dropped, the fates of
	// all responses adding up, and apart from it in the tables of
	// networks and tuples and in the timeline.
	ResponsesRefused int64 `json:"responses_refused"`
	Responses        int64 `json:"responses"`
	Sent             int64 `json:"sent"`
	Slipped          int64 `json:"slipped"`
	Dropped          int64 `json:"dropped"`
	CookieExempt     int64 `json:"cookie_exempt"`            // sent unlimited: the query had a valid server cookie
	Unmatched        int64 `json:"responses_without_query"`  // charged as query and response at once
	Unanswered       int64 `json:"queries_without_response"` // no response in the input: lost, or not sent by the server

	Categories map[string]*Counts `json:"categories"`

	LimitedNetworks int             `json:"limited_networks"`           // distinct networks limited at least once
	EvictedNetworks int             `json:"evicted_networks,omitempty"` // dropped from the full table of networks
	Networks        []*NetworkEntry `json:"networks"`                   // the most limited networks, most first
	Limited         []*TupleEntry   `json:"limited"`                    // the most limited tuples, most first

	Bytes Bytes `json:"bytes"`
	// Cuts are what each limit cut, in a fixed order: the request limits,
	// all-per-second, all-bytes-per-second, nocookie-udp-size, then the
	// tuple allowances; a row for each limit that is on, and for any other
	// that cut something.
	Cuts    []*Cut           `json:"cut_by_limit"`
	Skipped map[string]int64 `json:"skipped"`

	Timeline *Timeline `json:"timeline,omitempty"`
}

// Counts are the fates of responses.
type Counts struct {
	Sent    int64 `json:"sent"`
	Slipped int64 `json:"slipped"`
	Dropped int64 `json:"dropped"`
}

func (c *Counts) add(act rrl.Action) {
	switch act {
	case rrl.Send:
		c.Sent++
	case rrl.Slip:
		c.Slipped++
	default:
		c.Dropped++
	}
}

func (c *Counts) denied() int64 { return c.Slipped + c.Dropped }
func (c *Counts) total() int64  { return c.Sent + c.denied() }

// Bytes are the DNS message bytes of the responses captured, and of those
// that would have been sent (a slip counts as its header, question and OPT
// record): the difference is what a reflection would have lost.
type Bytes struct {
	Captured int64 `json:"captured"`
	Sent     int64 `json:"sent"`
}

// NetworkEntry is a client network that was limited: its responses sent,
// slipped and dropped by a response limit from its first limited response
// or refused request on, and its requests refused by a request limit. The
// responses of those requests are in none of the Counts, so that a
// refusal is not counted twice, as a request and as a response dropped.
type NetworkEntry struct {
	Network string `json:"network"`
	Counts
	RequestsDropped int64     `json:"requests_dropped"`
	First           time.Time `json:"first"` // first and last limited response or request
	Last            time.Time `json:"last"`
	prefix          netip.Prefix
}

// TupleEntry is a response tuple (network, category, name, class, type)
// that was limited, counted from its first limited response on; like a
// NetworkEntry, it leaves out the responses of refused requests. Its fields
// are those that tell its account apart from others, as the core keys
// accounts.
type TupleEntry struct {
	Network  string `json:"network"`
	Category string `json:"category"`
	Name     string `json:"name"`            // "" for errors, which are charged to the network alone
	Class    string `json:"class,omitempty"` // for answers, referrals and NODATA
	Type     string `json:"type"`            // for answers only
	Counts
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}

// categoryNames are the report's names of the categories, as the CoreDNS
// plugin's metrics label them.
var categoryNames = [rrl.AllowanceLast]string{"answer", "referral", "nodata", "nxdomain", "error"}

type tupleKey struct {
	network      netip.Prefix
	cat          rrl.AllowanceCategory
	class, qtype uint16
	name         string
}

// reportBuilder accumulates one configuration's Report, in memory bounded
// by maxTracked networks and tuples and by the timeline's buckets. When a
// table is full, its less limited half is evicted, as heavy-hitter
// counting does, so that a network limited heavily late in the input still
// makes the report after a spray of networks limited a little each filled
// the table.
type reportBuilder struct {
	rep        Report
	cats       [rrl.AllowanceLast]Counts
	networks   map[netip.Prefix]*NetworkEntry
	tuples     map[tupleKey]*TupleEntry
	maxTracked int
	timeline   timelineBuilder
	cuts       cutCounts
}

func newReportBuilder(maxTracked int) *reportBuilder {
	return &reportBuilder{
		networks:   make(map[netip.Prefix]*NetworkEntry),
		tuples:     make(map[tupleKey]*TupleEntry),
		maxTracked: maxTracked,
		timeline:   newTimelineBuilder(),
	}
}

// query records a query, and the limit that refused it (causeNone: none).
func (b *reportBuilder) query(at time.Time, n netip.Prefix, k cause) {
	b.rep.Queries++
	if k == causeNone {
		return
	}
	b.cuts.refuse(k)
	b.rep.RequestsDropped++
	b.network(n, at).RequestsDropped++
	b.timeline.refuse(at, n)
}

// response records the fate of one response of the given size; denied
// responses are kept by network and tuple. A response whose request was
// refused (refused) is dropped, but counted apart from the drops of
// response limits by network, tuple and time: its request was counted
// when it was refused.
func (b *reportBuilder) response(at time.Time, n netip.Prefix, t *rrl.ResponseTuple, act rrl.Action, refused bool, size, slipSize int) {
	b.rep.Bytes.Captured += int64(size)
	cat := t.AllowanceCategory
	b.cats[cat].add(act)
	sent := int64(0)
	switch act {
	case rrl.Send:
		sent = int64(size)
	case rrl.Slip:
		sent = int64(slipSize)
	}
	b.rep.Bytes.Sent += sent
	if refused {
		b.rep.ResponsesRefused++
		b.timeline.cut(at, int64(size))
		return
	}
	b.timeline.add(at, n, act, int64(size)-sent)
	e := b.networks[n]
	if act != rrl.Send && e == nil {
		e = b.network(n, at)
	}
	if e == nil {
		return
	}
	e.add(act)
	key := tupleKey{network: n, cat: cat}
	key.class, key.qtype, key.name = tupleFields(t)
	te := b.tuples[key]
	if te == nil && act != rrl.Send {
		if len(b.tuples) >= b.maxTracked {
			b.evictTuples()
		}
		te = &TupleEntry{Network: n.String(), Category: categoryNames[cat], Name: key.name, First: at}
		if key.class != 0 {
			te.Class = dns.Class(key.class).String()
		}
		if key.qtype != 0 {
			te.Type = dns.Type(key.qtype).String()
		}
		b.tuples[key] = te
	}
	if te != nil {
		te.add(act)
		if act != rrl.Send {
			te.Last = at
		}
	}
	if act != rrl.Send {
		e.Last = at
	}
}

// tupleFields returns the class, type and name that tell apart the
// accounts of a category, as the core keys them: names compare without
// case.
func tupleFields(t *rrl.ResponseTuple) (class, qtype uint16, name string) {
	switch t.AllowanceCategory {
	case rrl.AllowanceAnswer:
		return t.Class, t.Type, lowerFQDN(t.SalientName)
	case rrl.AllowanceReferral, rrl.AllowanceNoData:
		return t.Class, 0, lowerFQDN(t.SalientName)
	case rrl.AllowanceNXDomain:
		return 0, 0, lowerFQDN(t.SalientName)
	}
	return 0, 0, ""
}

// classType is the tuple's class and type as the text and HTML reports
// show them, the way dig writes them: the class only when it is not IN,
// which nearly every tuple is.
func (t *TupleEntry) classType() string {
	if t.Class == "" || t.Class == "IN" {
		return t.Type
	}
	return strings.TrimSpace(t.Class + " " + t.Type)
}

func lowerFQDN(s string) string {
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return strings.ToLower(s)
}

// network returns the entry of a network being limited now, making it,
// and making room for it if the table of networks is full.
func (b *reportBuilder) network(n netip.Prefix, at time.Time) *NetworkEntry {
	if e := b.networks[n]; e != nil {
		e.Last = at
		return e
	}
	if len(b.networks) >= b.maxTracked {
		b.evictNetworks()
	}
	e := &NetworkEntry{Network: n.String(), First: at, Last: at, prefix: n}
	b.networks[n] = e
	return e
}

// evictNetworks drops the less limited half of the networks' table (the
// least recently limited first among equals); their tuples go with them.
func (b *reportBuilder) evictNetworks() {
	entries := slices.Collect(maps.Values(b.networks))
	slices.SortFunc(entries, func(x, y *NetworkEntry) int {
		return cmp.Or(cmp.Compare(x.denied()+x.RequestsDropped, y.denied()+y.RequestsDropped),
			x.Last.Compare(y.Last), x.prefix.Addr().Compare(y.prefix.Addr()), cmp.Compare(x.prefix.Bits(), y.prefix.Bits()))
	})
	gone := map[netip.Prefix]bool{}
	for _, e := range entries[:max(1, len(entries)/2)] {
		delete(b.networks, e.prefix)
		gone[e.prefix] = true
	}
	b.rep.EvictedNetworks += len(gone)
	for k := range b.tuples {
		if gone[k.network] {
			delete(b.tuples, k)
		}
	}
}

// evictTuples drops the less limited half of the tuples' table.
func (b *reportBuilder) evictTuples() {
	type keyed struct {
		k tupleKey
		e *TupleEntry
	}
	tuples := make([]keyed, 0, len(b.tuples))
	for k, e := range b.tuples {
		tuples = append(tuples, keyed{k, e})
	}
	slices.SortFunc(tuples, func(x, y keyed) int {
		return cmp.Or(cmp.Compare(x.e.denied(), y.e.denied()), x.e.Last.Compare(y.e.Last),
			x.k.network.Addr().Compare(y.k.network.Addr()), cmp.Compare(x.k.network.Bits(), y.k.network.Bits()),
			cmp.Compare(x.k.cat, y.k.cat), cmp.Compare(x.k.class, y.k.class), cmp.Compare(x.k.qtype, y.k.qtype), strings.Compare(x.k.name, y.k.name))
	})
	for _, t := range tuples[:max(1, len(tuples)/2)] {
		delete(b.tuples, t.k)
	}
}

// report finishes the Report, listing the top most limited networks and tuples.
func (b *reportBuilder) report(top int) *Report {
	r := b.rep
	r.Categories = make(map[string]*Counts, len(b.cats))
	var all Counts
	for i := range b.cats {
		c := b.cats[i]
		r.Categories[categoryNames[i]] = &c
		all.Sent, all.Slipped, all.Dropped = all.Sent+c.Sent, all.Slipped+c.Slipped, all.Dropped+c.Dropped
	}
	r.Sent, r.Slipped, r.Dropped, r.Responses = all.Sent, all.Slipped, all.Dropped, all.total()
	r.LimitedNetworks = len(b.networks) + r.EvictedNetworks // every network limited entered the table
	for _, e := range b.networks {
		r.Networks = append(r.Networks, e)
	}
	slices.SortFunc(r.Networks, func(a, b *NetworkEntry) int {
		return cmp.Or(cmp.Compare(b.denied()+b.RequestsDropped, a.denied()+a.RequestsDropped),
			strings.Compare(a.Network, b.Network))
	})
	for _, e := range b.tuples {
		r.Limited = append(r.Limited, e)
	}
	slices.SortFunc(r.Limited, func(a, b *TupleEntry) int {
		return cmp.Or(cmp.Compare(b.denied(), a.denied()), strings.Compare(a.Network, b.Network),
			strings.Compare(a.Category, b.Category), strings.Compare(a.Name, b.Name), strings.Compare(a.Class, b.Class), strings.Compare(a.Type, b.Type))
	})
	r.Cuts = b.cuts.list()
	r.Timeline = b.timeline.build(r.Networks, 5)
	if top >= 0 {
		r.Networks = r.Networks[:min(top, len(r.Networks))]
		r.Limited = r.Limited[:min(top, len(r.Limited))]
	}
	if r.Networks == nil {
		r.Networks = []*NetworkEntry{}
	}
	if r.Limited == nil {
		r.Limited = []*TupleEntry{}
	}
	return &r
}
