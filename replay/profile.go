package replay

import (
	"net/netip"
	"strings"
	"time"

	"github.com/dnsrrl/rrl"
)

// A profile counts the traffic as the limiter would charge it, second by
// second, and keeps each account's busiest second: what -suggest sets the
// allowances above. Its memory is bounded: per account a count of the
// current second, its peak and its total; at most maxProfileAccounts
// accounts, maxProfileNetworks networks and maxProfileAggregates wider
// prefixes. Traffic of accounts beyond the caps is not tracked (the first
// ones seen are kept), and counted in overflow, which the suggestion
// states.
type profile struct {
	lc       *limiterConfig
	exempt   []netip.Prefix
	window   int64 // seconds, for the accounts alive at once
	accounts map[tupleKey]*account
	networks map[netip.Prefix]*netStats
	aggs     map[netip.Prefix]*aggStats
	overflow int64 // charges of accounts, networks or prefixes not tracked
	server   peakCounter
	inWindow windowCounter
	first    time.Time
	last     time.Time
	messages int64
}

// Caps of a profile's tables; see profile.
const (
	maxProfileAccounts   = 1 << 17
	maxProfileNetworks   = 1 << 16
	maxProfileAggregates = 1 << 14
)

// Aggregate prefix lengths: the wider prefixes whose requests a profile
// counts, to find a flood spread over a prefix's networks.
const (
	aggBits4 = 20
	aggBits6 = 48
)

// peakCounter counts events in the current second and keeps the most of
// any second. A second earlier than the current one (a message a little
// out of order) counts in the current one, which can only raise the peak.
type peakCounter struct {
	sec  int64
	n    int64
	peak int64
}

func (c *peakCounter) add(sec, v int64) {
	if sec > c.sec {
		c.sec, c.n = sec, 0
	}
	c.n += v
	c.peak = max(c.peak, c.n)
}

// windowCounter counts the accounts used in the current window of the
// limiter's window seconds, and keeps the most of any window.
type windowCounter struct {
	win  int64
	n    int64
	peak int64
}

// use counts an account used in window win whose last use was in window
// *seen, weighing it n (a network holds several accounts).
func (c *windowCounter) use(win int64, seen *int64, n int64) {
	if win > c.win {
		c.win, c.n = win, 0
	}
	if *seen == win && win != 0 {
		return
	}
	*seen = win
	c.n += n
	c.peak = max(c.peak, c.n)
}

// account is one response account: its peak second and total.
type account struct {
	key   tupleKey
	c     peakCounter
	total int64
	win   int64
}

// Measures of a network's traffic that an allowance limits: the busiest
// account of each category (indexed by rrl.AllowanceCategory), then the
// network's responses, response bytes and requests.
const (
	measureAll = int(rrl.AllowanceLast) + iota
	measureBytes
	measureRequests
	measureCount
)

// measureKeywords are the settings that limit each measure.
var measureKeywords = [measureCount]string{"responses-per-second", "referrals-per-second", "nodata-per-second",
	"nxdomains-per-second", "errors-per-second", "all-per-second", "all-bytes-per-second", "requests-per-second"}

// netStats is a client network's traffic: the peak of each measure, and
// what tells an attack's shape.
type netStats struct {
	prefix    netip.Prefix
	all       peakCounter
	bytes     peakCounter
	requests  peakCounter
	catPeak   [rrl.AllowanceLast]int64
	catTop    [rrl.AllowanceLast]*account // the account of each category's peak
	responses int64                       // charged to the response accounts
	respBytes int64
	top       int64 // responses to its busiest account
	maxSize   int   // the longest response charged
	proven    bool  // a query over TCP or with a valid server cookie came from it
	win       int64
}

// peak returns the network's peak of measure m, per second (bytes for
// measureBytes).
func (n *netStats) peak(m int) int64 {
	switch m {
	case measureAll:
		return n.all.peak
	case measureBytes:
		return n.bytes.peak
	case measureRequests:
		return n.requests.peak
	}
	return n.catPeak[m]
}

// aggStats is a wider prefix's unproven requests, which a request prefix
// of its length would count.
type aggStats struct {
	prefix   netip.Prefix
	requests peakCounter
	win      int64
}

func newProfile(lc *limiterConfig) *profile {
	p := &profile{lc: lc, window: int64(max(1, lc.intValue("window"))),
		accounts: map[tupleKey]*account{}, networks: map[netip.Prefix]*netStats{}, aggs: map[netip.Prefix]*aggStats{}}
	v, _ := lc.cfg.Value("exempt-clients")
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' }) {
		if pf, err := netip.ParsePrefix(f); err == nil {
			p.exempt = append(p.exempt, pf)
		} else if a, err := netip.ParseAddr(f); err == nil {
			p.exempt = append(p.exempt, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return p
}

// exempted reports whether the limiter exempts client: it is charged
// nothing, so it has no peak to stay under.
func (p *profile) exempted(client netip.Addr) bool {
	for _, e := range p.exempt {
		if e.Contains(client) {
			return true
		}
	}
	return false
}

// seen notes a message's time.
func (p *profile) seen(at time.Time) (sec, win int64) {
	if p.messages == 0 {
		p.first = at
	}
	p.messages++
	if at.After(p.last) {
		p.last = at
	}
	sec = at.Unix()
	return sec, sec/p.window + 1 // window 0 is "never used"
}

func (p *profile) request(at time.Time, client netip.Addr, udp, valid, _ bool) {
	sec, win := p.seen(at)
	p.server.add(sec, 1)
	if p.exempted(client) {
		return
	}
	n := p.network(client)
	if n == nil {
		p.overflow++
		p.inWindow.use(win, new(int64), 1)
		return
	}
	n.requests.add(sec, 1)
	// A network holds up to three accounts of its own: requests, all and
	// bytes.
	p.inWindow.use(win, &n.win, 3)
	proven := !udp || valid
	n.proven = n.proven || proven
	if proven {
		return // a request prefix charges unproven requests only
	}
	if a := p.aggregate(client); a != nil {
		a.requests.add(sec, 1)
		p.inWindow.use(win, &a.win, 1)
	}
}

func (p *profile) response(at time.Time, client netip.Addr, unproven bool, t *rrl.ResponseTuple, _ rrl.Action, _ int) {
	sec, win := p.seen(at)
	if !unproven || p.exempted(client) {
		return
	}
	n := p.network(client)
	if n == nil {
		p.overflow++
		p.inWindow.use(win, new(int64), 1)
		return
	}
	n.all.add(sec, 1)
	n.bytes.add(sec, int64(t.Size))
	n.responses++
	n.respBytes += int64(t.Size)
	n.maxSize = max(n.maxSize, t.Size)
	key := tupleKey{network: n.prefix, cat: t.AllowanceCategory}
	key.class, key.qtype, key.name = tupleFields(t)
	a := p.accounts[key]
	if a == nil {
		if len(p.accounts) >= maxProfileAccounts {
			p.overflow++
			p.inWindow.use(win, new(int64), 1)
			return
		}
		a = &account{key: key}
		p.accounts[key] = a
	}
	a.c.add(sec, 1)
	a.total++
	p.inWindow.use(win, &a.win, 1)
	n.top = max(n.top, a.total)
	if c := t.AllowanceCategory; c < rrl.AllowanceLast && a.c.peak > n.catPeak[c] {
		n.catPeak[c], n.catTop[c] = a.c.peak, a
	}
}

// network returns the stats of client's network, or nil when the table
// is full and it is not in it.
func (p *profile) network(client netip.Addr) *netStats {
	pf := p.lc.network(client)
	n := p.networks[pf]
	if n == nil {
		if len(p.networks) >= maxProfileNetworks {
			return nil
		}
		n = &netStats{prefix: pf}
		p.networks[pf] = n
	}
	return n
}

// aggregate returns the stats of client's wider prefix, or nil.
func (p *profile) aggregate(client netip.Addr) *aggStats {
	pf := aggregateOf(client.WithZone(""))
	a := p.aggs[pf]
	if a == nil {
		if len(p.aggs) >= maxProfileAggregates {
			p.overflow++
			return nil
		}
		a = &aggStats{prefix: pf}
		p.aggs[pf] = a
	}
	return a
}

// aggregateOf returns the wider prefix of an address or a network: its
// /20 (IPv4) or /48 (IPv6).
func aggregateOf(a netip.Addr) netip.Prefix {
	bits := aggBits6
	if a.Is4() {
		bits = aggBits4
	}
	pf, _ := a.Prefix(bits)
	return pf
}
