package rrl

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Three protections go beyond BIND's model, which limits one prefix length
// and counts responses rather than sizes them:
//
//   - Request limits at several prefix lengths (ipv4-request-prefixes,
//     ipv6-request-prefixes). An unproven request is charged to an
//     account for each configured length, beside its network's
//     requests-per-second account, and refused when any of them is out
//     of credit; a refused request is charged to none of them. A flood
//     spread over many networks is then held by a wider prefix, and one
//     heavy host by a narrower one without limiting its neighbours.
//   - all-bytes-per-second: all-per-second counted in bytes, so that the
//     bytes a network can be sent in a second are bounded whatever the
//     size of the answers and however many names are asked.
//   - nocookie-udp-size: a UDP response longer than this, to a source
//     not proven by a server cookie, goes as a truncated reply, so that
//     a spoofed query cannot be amplified into a large answer.

// MaxRequestPrefixes is the most LENGTH:ALLOWANCE pairs that
// ipv4-request-prefixes and ipv6-request-prefixes each take.
const MaxRequestPrefixes = 4

// UnknownResponseSize is what all-bytes-per-second charges for a response
// whose ResponseTuple.Size is 0 (unknown): the largest UDP response a
// client without EDNS accepts.
const UnknownResponseSize = 512

// RequestPrefix is one pair of ipv4-request-prefixes or
// ipv6-request-prefixes: every prefix of Bits bits of the source address
// has an account that allows Rate requests per second (0: the pair is
// off).
type RequestPrefix struct {
	Bits int
	Rate float64
}

// RequestPrefixes returns the pairs of ipv6-request-prefixes (ipv6 true)
// or ipv4-request-prefixes, in the order they were given; nil for none.
func (c *Config) RequestPrefixes(ipv6 bool) []RequestPrefix {
	fam := familyOf(ipv6)
	if c.prefixCount[fam] == 0 {
		return nil
	}
	return append([]RequestPrefix(nil), c.prefixes[fam][:c.prefixCount[fam]]...)
}

// NoCookieUDPSize returns nocookie-udp-size: the longest UDP response, in
// bytes, that goes to a request without a valid server cookie; 0 is off.
func (c *Config) NoCookieUDPSize() int { return c.noCookieUDPSize }

// AllBytesPerSecond returns all-bytes-per-second, in bytes a second; 0 is off.
func (c *Config) AllBytesPerSecond() float64 { return c.rates[LimitAllBytes] }

// familyOf numbers an address family: 0 for IPv4, 1 for IPv6.
func familyOf(ipv6 bool) int {
	if ipv6 {
		return 1
	}
	return 0
}

// parseRequestPrefixes reads LENGTH:ALLOWANCE pairs separated by spaces or
// commas, at most MaxRequestPrefixes of them, with distinct lengths from 1
// to maxBits. An empty value is an empty list.
func parseRequestPrefixes(keyword, value string, maxBits int) (list [MaxRequestPrefixes]RequestPrefix, n int, err error) {
	fields := strings.FieldsFunc(value, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
	bad := func(why string) error {
		return fmt.Errorf("rrl: %s %q: %s; want up to %d pairs LENGTH:ALLOWANCE separated by spaces or commas, "+
			"LENGTH a whole number from 1 to %d, each length once, ALLOWANCE requests per second, "+
			"a plain decimal number, 0 (off) or from %g to %d", keyword, value, why, MaxRequestPrefixes, maxBits, minRate, int(maxRate))
	}
	if len(fields) > MaxRequestPrefixes {
		return list, 0, bad(strconv.Itoa(len(fields)) + " pairs")
	}
	for _, f := range fields {
		length, allowance, ok := strings.Cut(f, ":")
		if !ok {
			return list, 0, bad(strconv.Quote(f) + " is not LENGTH:ALLOWANCE")
		}
		bits, err := strconv.Atoi(length)
		if err != nil || !digits.MatchString(length) || bits < 1 || bits > maxBits {
			return list, 0, bad("length " + strconv.Quote(length) + " is out of range")
		}
		rate, err := readRate(allowance, minRate, maxRate)
		if err != nil {
			return list, 0, bad("allowance " + strconv.Quote(allowance) + " is out of range")
		}
		for _, p := range list[:n] {
			if p.Bits == bits {
				return list, 0, bad("length " + length + " is given twice")
			}
		}
		list[n] = RequestPrefix{Bits: bits, Rate: rate}
		n++
	}
	return list, n, nil
}

// formatRequestPrefixes writes pairs in the form parseRequestPrefixes reads.
func formatRequestPrefixes(list []RequestPrefix) string {
	s := make([]string, len(list))
	for i, p := range list {
		s[i] = strconv.Itoa(p.Bits) + ":" + formatRate(p.Rate)
	}
	return strings.Join(s, " ")
}

// slowestPrefix returns the smallest allowance above 0 among the pairs of
// family fam, or 0 if none is on. The RRL keeps it as the allowance of the
// kind, whose episode slack (see limit) is then the longest of its pairs.
func (c *Config) slowestPrefix(fam int) float64 {
	slowest := 0.0
	for _, p := range c.prefixes[fam][:c.prefixCount[fam]] {
		if p.Rate > 0 && (slowest == 0 || p.Rate < slowest) {
			slowest = p.Rate
		}
	}
	return slowest
}

// sanitizePrefixes drops, from a Config not made by SetValue, the pairs
// out of range. A pair set to 0 (off) is in range: it keeps its place,
// by which Stats.RequestPrefixDrops counts the pairs after it.
func (c *Config) sanitizePrefixes() {
	for fam := range c.prefixes {
		n := 0
		for _, p := range c.prefixes[fam][:min(max(c.prefixCount[fam], 0), MaxRequestPrefixes)] {
			if p.Bits >= 1 && p.Bits <= 32+96*fam && (p.Rate == 0 || p.Rate >= minRate) && p.Rate <= maxRate {
				c.prefixes[fam][n] = p
				n++
			}
		}
		c.prefixCount[fam] = n
	}
}

// protection is an RRL's settings of the three protections, in the units
// of its accounts.
type protection struct {
	levels    [2]levels // request prefixes, by family
	nsPerByte float64   // all-bytes-per-second: the cost of one byte; 0 is off
	noCookie  int       // nocookie-udp-size; 0 is off
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

// initProtection sets up the protections from the RRL's Config, after its
// qps-scale, and reports whether any is on.
func (r *RRL) initProtection() bool {
	p := &r.prot
	for fam := range p.levels {
		lv := &p.levels[fam]
		for i, rp := range r.cfg.prefixes[fam][:r.cfg.prefixCount[fam]] {
			if rp.Rate <= 0 {
				continue
			}
			lv.level[lv.n] = levelOf(fam, uint8(rp.Bits), uint8(i), int64(float64(time.Second)/rp.Rate))
			lv.n++
		}
	}
	if f := r.cfg.rates[LimitAllBytes]; f > 0 {
		p.nsPerByte = float64(time.Second) / f
	}
	p.noCookie = r.cfg.noCookieUDPSize
	if r.qps != nil {
		r.qps.prot = *p
		r.qps.setFactor(1)
	}
	return p.levels[0].n+p.levels[1].n > 0 || p.nsPerByte > 0 || p.noCookie > 0
}

// NoCookieUDPSize returns the RRL's nocookie-udp-size, 0 when off, so that
// an integration that holds only the RRL can size its truncated replies.
func (r *RRL) NoCookieUDPSize() int {
	if r == nil {
		return 0
	}
	return r.prot.noCookie
}

// NeedsResponseSize reports whether the RRL reads ResponseTuple.Size:
// whether nocookie-udp-size or all-bytes-per-second is on. An integration
// for which a response's length costs work can leave Size 0 otherwise.
func (r *RRL) NeedsResponseSize() bool {
	return r != nil && (r.prot.noCookie > 0 || r.prot.nsPerByte > 0)
}

// scaledProtection returns the protections as qps-scale scales them now.
func (r *RRL) scaledProtection() *protection {
	if r.qps != nil {
		return &r.qps.scaled.Load().prot
	}
	return &r.prot
}

// chargeUnproven debits an unproven request to its network's
// requests-per-second account, then to the account of each request
// prefix, in the order configured, and returns IPRateLimit as soon as one
// refuses it, with the account that did, having refunded those charged
// before, so that a refused request is charged to none; else IPOk, or
// IPNotConfigured if no request limit applies. A request account sinks
// into no debt: the one that refuses is left as it was.
func (r *RRL) chargeUnproven(src netip.Addr, n network, now int64, s *stripe) (IPReason, RequestRefusal) {
	whole := wholeNetwork(src)
	fam, kind := 0, LimitIPv4RequestPrefixes
	if !whole.v4 {
		fam, kind = 1, LimitIPv6RequestPrefixes
	}
	lv := &r.scaledProtection().levels[fam]
	ipr := IPNotConfigured
	l := r.limit(LimitRequests)
	key := uint64(0)
	if l.on() {
		key = r.hash.account(n, LimitRequests, 0, 0, "")
		if r.chargeLevel(&n, n.bits, key, LimitRequests, l, now, s) {
			return IPRateLimit, RequestRefusal{Limit: LimitRequests}
		}
		ipr = IPOk
	}
	var keys [MaxRequestPrefixes]uint64 // those charged, for a refund
	for i := range lv.level[:lv.n] {
		le := &lv.level[i]
		keys[i] = r.hash.prefixOf(whole.hi&le.hiMask, whole.lo&le.loMask, le.meta)
		refused := r.chargeLevel(&whole, le.bits, keys[i], kind, le.limit, now, s)
		if !refused {
			ipr = IPOk
			continue
		}
		s.prot.prefixDrops[fam][le.index].Add(1)
		if l.on() {
			r.refund(key, LimitRequests, l, now, s)
		}
		for j := range i {
			r.refund(keys[j], kind, lv.level[j].limit, now, s)
		}
		return IPRateLimit, RequestRefusal{Limit: kind, Prefix: int(le.index)}
	}
	return ipr, RequestRefusal{}
}

// chargeLevel is chargeKey for a request account: the debit of
// debitAccount for an account held in its first bucket, without the slip
// counter that no request account has, written out here because it is
// most of what a request costs with four prefixes. findFirst is inlined
// where find is not; debitAccount does the rest, an account in its second
// bucket included.
func (r *RRL) chargeLevel(whole *network, bits uint8, key uint64, kind LimitKind, l limit, now int64, s *stripe) bool {
	if ref, held := r.table.findFirst(r.table.index(key), identOf(key, kind)); held {
		if old, ok := ref.load(); ok {
			v, refused := old.requestCharged(now, l)
			if ref.store(old, v) {
				if edge := v.limited() != old.limited(); edge || refused {
					r.noteChargeBy(whole, bits, key, kind, debited{refused, Send, edge}, true, now)
				}
				return refused
			}
		}
	}
	return r.chargeKey(whole, bits, key, kind, l, now, s, true)
}

// refund gives back to a request account the request charged to it: it
// moves the account's tat back an interval, which leaves its episode flag
// as the charge left it. Where find does not see the account (a table of
// one page, whose sets find leaves to debitAccount, or an account that
// lost its place meanwhile), debitAccount charges it the inverse of the
// charge, its credit widened so that its episode slack is the charge's: an
// account added by it starts with more than full credit, which its next
// charge cuts back to full.
func (r *RRL) refund(key uint64, kind LimitKind, l limit, now int64, s *stripe) {
	i, id := r.table.index(key), identOf(key, kind)
	for {
		ref, held := r.table.find(i, id)
		if !held {
			r.debitAccount(key, kind, now, limit{-l.interval, l.credit + 2*l.interval, 0, 0}, s)
			return
		}
		old, ok := ref.load()
		if !ok {
			continue // it moved or lost its place since find: look again
		}
		if ref.store(old, old.withTat(old.tat(now)-l.interval)) {
			return
		}
	}
}

// wholeNetwork is a as a network of all its bits: 32 for IPv4 (and
// IPv4-mapped IPv6), 128 for IPv6.
func wholeNetwork(a netip.Addr) network {
	if a.Is4() {
		b := a.As4()
		return network{lo: mapped | uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3]), v4: true, bits: 32}
	}
	b := a.As16() // the zero Addr reads as ::, 0.0.0.0 elsewhere (see networkOf)
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	if a.Is4In6() || !a.IsValid() {
		return network{lo: mapped | lo&0xffffffff, v4: true, bits: 32}
	}
	return network{hi: hi, lo: lo, bits: 128}
}

// masked returns n masked to bits prefix bits (of its 32 for IPv4); bits
// no shorter than n's leave it as it is.
func (n network) masked(bits uint8) network {
	if bits >= n.bits {
		return n
	}
	b := uint(bits)
	if n.v4 {
		return network{lo: n.lo &^ (1<<(32-b) - 1), v4: true, bits: bits}
	}
	return network{hi: n.hi &^ (1<<(64-min(b, 64)) - 1), lo: n.lo &^ (1<<(128-max(b, 64)) - 1), bits: bits}
}

// chargeBytes debits the network's all-bytes-per-second account by the
// response's length (UnknownResponseSize when unknown, and at most
// nocookie-udp-size when the response is too long to go) and reports
// whether it is in debt. Like all-per-second it charges every response,
// sent or not, so that the network of a victim stays limited for as long
// as a flood lasts. decides is false when all-per-second already refused
// the response (see noteLimited).
func (r *RRL) chargeBytes(n network, p *protection, size int, now int64, s *stripe, decides bool) bool {
	if size <= 0 {
		size = UnknownResponseSize
	}
	if p.noCookie > 0 {
		size = min(size, p.noCookie)
	}
	cost := max(int64(float64(size)*p.nsPerByte), 1)
	key := r.hash.account(n, LimitAllBytes, 0, 0, "")
	return r.chargeKey(&n, n.bits, key, LimitAllBytes, limitOf(cost, r.cfg.window), now, s, decides)
}

// tooLarge reports whether a UDP response of size bytes is longer than
// nocookie-udp-size.
func (p *protection) tooLarge(size int) bool { return p.noCookie > 0 && size > p.noCookie }

// scaleProtection returns p scaled by the qps-scale factor f: the request
// prefixes as requests-per-second would be, all-bytes-per-second never
// below its floor, one response of unknown size a second.
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
	return p
}

// requestCharged is balance.charge followed by balance.limitedAfter for a
// request account (l.debt 0), in one call that reads the tat once and
// tests no debt: it returns v charged by l at now, its episode flag set,
// and whether the charge was refused. A refused charge leaves the tat
// where it was; either way an account that had earned full credit holds
// just that, its slip count afresh. The account is in an episode after a
// refusal, or if it was in one and its tat was within full credit and an
// interval of now.
func (v balance) requestCharged(now int64, l limit) (balance, bool) {
	tat, full, w := v.tat(now), now-l.credit, v&^(tatMask|limitedBit)
	if v&limitedBit != 0 && tat > full-l.interval {
		w |= limitedBit
	}
	if tat <= full {
		tat, w = full, w&^slipMask
	}
	if tat += l.interval; tat > now {
		return w | limitedBit | balance(uint64(tat-l.interval)&tatMask), true
	}
	return w | balance(uint64(tat)&tatMask), false
}
