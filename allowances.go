package rrl

import "time"

// allowances are an RRL's settings in the units of its accounts: each
// limit an account is charged by, the protections beyond BIND
// (prefixes.go), and the window. NewRRL makes them from the Config;
// qps-scale (qps.go) scales them once a second.
type allowances struct {
	// limits holds the limit of each kind whose accounts are charged by
	// it: the five response categories, requests-per-second,
	// proven-requests-per-second and all-per-second (interval 0 is off).
	// The request prefixes keep theirs in prot, and all-bytes-per-second
	// charges by the response's length.
	limits [LimitKindLast]limit
	prot   protection
	window int64
	factor float64 // the qps-scale factor they are scaled by: at most 1
}

// protection is the protections beyond BIND, in the units of the accounts.
type protection struct {
	levels    [2]levels // request prefixes, by family
	nsPerByte float64   // all-bytes-per-second: the cost of one byte; 0 is off
	noCookie  int       // nocookie-udp-size; 0 is off

	// stream-time-per-second: streamScale is what one nanosecond of
	// handling costs the network's account, a second over the budget
	// (1 s / budget; 0 is off), and streamCredit stream-time-instant in
	// the account's nanoseconds, the most it holds.
	streamScale  float64
	streamCredit int64
}

// levels is the request prefixes of one family that are on.
type levels struct {
	n     int
	level [MaxRequestPrefixes]level
}

// level is one request prefix that is on, with what its debit needs made
// ready when the RRL is made: the masks and the hashed length and kind,
// so that a request costs no shift or branch per prefix to find its
// account.
type level struct {
	hiMask, loMask uint64 // the prefix's mask of the 16-byte address (IPv4-mapped for IPv4)
	meta           uint64 // the length and kind, as hashKey.prefix hashes them
	limit          limit
	bits           uint8
	index          uint8 // the pair's place in the Config, for Stats
}

// allowancesOf returns the allowances of a sanitized Config.
func allowancesOf(c *Config) allowances {
	a := allowances{window: c.window, factor: 1}
	for _, k := range [...]LimitKind{LimitResponses, LimitReferrals, LimitNoData, LimitNXDomains, LimitErrors,
		LimitRequests, LimitProvenRequests, LimitAll} {
		f := c.rate(k)
		if f <= 0 {
			continue
		}
		interval := int64(float64(time.Second) / f)
		if k.Request() {
			a.limits[k] = requestLimitOf(interval)
		} else {
			a.limits[k] = limitOf(interval, c.window).withSlip(k, c.slipRatio)
		}
	}
	for fam := range a.prot.levels {
		lv := &a.prot.levels[fam]
		for i, rp := range c.prefixes[fam][:c.prefixCount[fam]] {
			if rp.Rate > 0 {
				lv.level[lv.n] = levelOf(fam, uint8(rp.Bits), uint8(i), int64(float64(time.Second)/rp.Rate))
				lv.n++
			}
		}
	}
	if f := c.rates[LimitAllBytes]; f > 0 {
		a.prot.nsPerByte = float64(time.Second) / f
	}
	a.prot.noCookie = c.noCookieUDPSize
	if c.streamTime > 0 {
		a.prot.streamScale = float64(time.Second) / float64(c.streamTime)
		a.prot.streamCredit = min(int64(float64(c.StreamTimeInstant())*a.prot.streamScale), maxStreamCredit)
	}
	return a
}

// maxStreamCredit bounds the credit of a stream-time-per-second account,
// as the slowest rates bound theirs (see balance): 100 seconds' budget.
const maxStreamCredit = 100 * int64(time.Second)

// streamLimit returns the limit of stream-time-per-second for a charge of
// d nanoseconds of handling: d times streamScale (what the account's
// arithmetic calls the interval, at most the credit and the debt, so that
// no charge overflows), stream-time-instant's credit, and a debt of at
// most window seconds: a network that spent far more than its budget is
// refused for at most the window, as a response account is. A charge of 0
// is the check before the work: it changes nothing but says whether the
// account is in debt.
func (a *allowances) streamLimit(d int64) limit {
	credit := a.prot.streamCredit
	cost := min(float64(max(d, 0))*a.prot.streamScale, float64(credit+a.window))
	return limit{interval: int64(cost), credit: credit, debt: a.window}
}

// levelOf makes the level of the prefix of bits bits, of family fam, the
// index-th pair of the Config, allowing a request every interval.
func levelOf(fam int, bits, index uint8, interval int64) level {
	kind, n := LimitIPv4RequestPrefixes, network{hi: ^uint64(0), lo: ^uint64(0), v4: true, bits: 32}
	if fam == 1 {
		kind, n = LimitIPv6RequestPrefixes, network{hi: ^uint64(0), lo: ^uint64(0), bits: 128}
	}
	m := n.masked(bits)
	return level{hiMask: m.hi, loMask: m.lo, meta: prefixMeta(kind, bits), limit: requestLimitOf(interval), bits: bits, index: index}
}

// hasPrefixes reports whether any request prefix is on.
func (p *protection) hasPrefixes() bool { return p.levels[0].n+p.levels[1].n > 0 }

// on reports whether any protection is on.
func (p *protection) on() bool { return p.hasPrefixes() || p.nsPerByte > 0 || p.noCookie > 0 }

// tooLarge reports whether a UDP response of size bytes is longer than
// nocookie-udp-size.
func (p *protection) tooLarge(size int) bool { return p.noCookie > 0 && size > p.noCookie }

// bytesLimit returns the limit of all-bytes-per-second for a response of
// size bytes (UnknownResponseSize when unknown, and at most
// nocookie-udp-size when the response is too long to go): the time its
// bytes cost, at least a nanosecond.
func (a *allowances) bytesLimit(size int) limit {
	if size <= 0 {
		size = UnknownResponseSize
	}
	if a.prot.noCookie > 0 {
		size = min(size, a.prot.noCookie)
	}
	return a.extraBytesLimit(size)
}

// extraBytesLimit is bytesLimit for bytes counted as they are, without
// the rules for a whole response (see RRL.DebitSentBytes).
func (a *allowances) extraBytesLimit(bytes int) limit {
	return limitOf(max(int64(float64(bytes)*a.prot.nsPerByte), 1), a.window)
}

// episodeSlack is the episode slack (see limit.episodeSlack) of accounts
// of kind k: that of k's limit, or for a request prefix's, whose limits
// differ by length, the longest of the family's, so that no account of
// the family is found quiet before its episode ends.
func (a *allowances) episodeSlack(k LimitKind) int64 {
	fam := 0
	switch k {
	case LimitIPv6RequestPrefixes:
		fam = 1
	case LimitIPv4RequestPrefixes:
	default:
		return a.limits[k].episodeSlack()
	}
	slack := int64(0)
	for _, le := range a.prot.levels[fam].level[:a.prot.levels[fam].n] {
		slack = max(slack, le.limit.episodeSlack())
	}
	return slack
}

// requestInterval returns the interval of a request account of the given
// kind, of a request prefix of bits bits for the prefix kinds: 0 if no
// such limit is on.
func (a *allowances) requestInterval(kind LimitKind, bits int) int64 {
	fam := 0
	switch kind {
	case LimitIPv6RequestPrefixes:
		fam = 1
	case LimitIPv4RequestPrefixes:
	default:
		return a.limits[kind].interval
	}
	lv := &a.prot.levels[fam]
	for i := range lv.level[:lv.n] {
		if int(lv.level[i].bits) == bits {
			return lv.level[i].limit.interval
		}
	}
	return 0
}

// scaled returns a scaled by the qps-scale factor f: the response
// allowances, all-per-second, all-bytes-per-second,
// stream-time-per-second and the request prefixes (not the network's
// request limits), and slip-ratio when it is above 2, never below 2, as
// BIND does.
func (a allowances) scaled(f float64) allowances {
	s := a
	s.factor = f
	for k, l := range a.limits {
		if !LimitKind(k).Request() && l.on() {
			s.limits[k] = limitOf(scale(l.interval, f), a.window)
			s.limits[k].slip = scaleSlip(l.slip, f)
		}
	}
	s.prot = scaleProtection(a.prot, f)
	return s
}

// scaleProtection returns p scaled by the qps-scale factor f: the request
// prefixes as requests-per-second would be, all-bytes-per-second never
// below its floor, one response of unknown size a second, and
// stream-time-per-second's budget never below 100 µs a second (its credit,
// in the account's units, stays: the burst shrinks with the budget).
func scaleProtection(p protection, f float64) protection {
	if f >= 1 {
		return p
	}
	for fam := range p.levels {
		lv := &p.levels[fam]
		for i := range lv.level[:lv.n] {
			lv.level[i].limit = requestLimitOf(scale(lv.level[i].limit.interval, f))
		}
	}
	if p.nsPerByte > 0 {
		p.nsPerByte = min(p.nsPerByte/f, max(p.nsPerByte, float64(time.Second)/minBytesRate))
	}
	if p.streamScale > 0 { // the budget shrinks by f, never below minStreamTime
		p.streamScale = min(p.streamScale/f, max(p.streamScale, float64(time.Second)/float64(minStreamTime)))
	}
	return p
}

// scaleSlip scales a slip ratio by f when it is above 2, never below 2,
// as BIND does; 0 (no slip) stays 0.
func scaleSlip(ratio int, f float64) int {
	if ratio > 2 {
		return max(2, int(float64(ratio)*f))
	}
	return ratio
}

// scale stretches an interval by factor f, as BIND scales a rate down, but
// never to less than one response per second (BIND's floor) unless the
// configured rate was already lower.
func scale(interval int64, f float64) int64 {
	if f >= 1 {
		return interval
	}
	return max(interval, int64(min(float64(interval)/f, float64(time.Second))))
}
