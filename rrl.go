package rrl

import (
	"net"
	"net/netip"
	"time"
)

// RRL limits responses and requests per client network. It is safe for
// concurrent use: a Debit locks only the table shards that hold its
// accounts, and statistics are kept per shard.
type RRL struct {
	cfg      Config
	hash     hashKey
	table    *table
	injected *injectedClock  // nil: the built-in coarse clock
	limits   [rateLast]limit // interval 0 is off
	qps      *qpsScaler      // nil unless qps-scale is set
	observer func(Event)     // nil unless Config.SetObserver

	// checked is set when exempt-clients, requests-per-second,
	// proven-requests-per-second, all-per-second or qps-scale is: a UDP
	// response then takes the path with every check rather than going
	// straight to its tuple's account.
	checked bool

	// provenApart is set when proven-requests-per-second is: proven
	// requests then have accounts of their own.
	provenApart bool
}

// NewRRL returns an RRL with a copy of cfg. A nil cfg means NewConfig(),
// which limits nothing. In a Config not made by NewConfig, settings out of
// their range take their defaults: a zero window, prefix length or
// max-table-size does, while a zero rate or slip-ratio is in range and
// kept. The table is allocated as it fills, never beyond max-table-size
// accounts.
func NewRRL(cfg *Config) *RRL {
	if cfg == nil {
		cfg = NewConfig()
	}
	r := &RRL{cfg: cfg.sanitized(), hash: newHashKey(), observer: cfg.observer}
	r.table = newTable(r.cfg.maxTableSize)
	if cfg.nowFunc != nil {
		r.injected = newInjectedClock(cfg.nowFunc)
	}
	for i := range r.limits {
		if f := r.cfg.rate(rate(i)); f > 0 {
			r.limits[i] = r.limitOf(int64(float64(time.Second) / f))
		}
	}
	if r.cfg.qpsScale > 0 {
		r.qps = newQPSScaler(r.cfg.qpsScale)
	}
	r.provenApart = r.cfg.rateSet[rateProvenRequests]
	r.checked = len(r.cfg.exempt) > 0 || r.limits[rateRequests].on() || r.limits[rateProvenRequests].on() ||
		r.limits[rateAll].on() || r.qps != nil
	return r
}

// DebitRequest charges one request from src as it arrives, before any work
// is done for it, and says whether to serve it: Send, or Drop (serve
// nothing: over UDP send nothing, over a connection close it). Together
// with DebitResponse it splits Debit in two, so that a request over its
// limit costs the server no work; a caller that uses both calls
// DebitResponse, not Debit, for the responses.
//
// validCookie says that the request carried a valid server cookie. Such a
// request, and any request that is not over UDP, comes from a proven
// source: it is charged to proven-requests-per-second when that is set
// (see Config). Its response needs no DebitResponse, since a proven source
// cannot be the victim of a reflection; the request limit still holds it,
// because that limit is about load, not spoofing.
//
// The checks, in order: a client in exempt-clients is sent (IPExempt); the
// request is counted for qps-scale; the network's request account is
// debited, and Drop returned when it is in debt (IPRateLimit); otherwise
// Send (IPOk, or IPNotConfigured when no request limit applies). A dropped
// request counts in the statistics as a Drop with IPRateLimit and
// RTNotReached, in no category. DebitRequest allocates nothing for a
// *net.UDPAddr or *net.TCPAddr; odd sources are read as Debit reads them.
func (r *RRL) DebitRequest(src net.Addr, validCookie bool) (Action, IPReason) {
	addr, udp := addrOf(src)
	return r.DebitRequestAddr(addr, udp, validCookie)
}

// DebitRequestAddr is DebitRequest for a server that holds the client's
// address as a netip.Addr; udp says whether the request came over UDP.
func (r *RRL) DebitRequestAddr(src netip.Addr, udp, validCookie bool) (Action, IPReason) {
	if r == nil || !r.checked {
		return Send, IPNotConfigured
	}
	n := r.networkOf(src)
	if len(r.cfg.exempt) > 0 && r.isExempt(src) {
		return Send, IPExempt
	}
	now := r.now()
	if r.qps != nil {
		r.qps.observe(r.table, r.statsShard(n), now)
	}
	ipr := r.chargeRequest(n, !udp || validCookie, now)
	if ipr == IPRateLimit {
		r.countAlone(n, &requestTuple, Drop, ipr, RTNotReached)
		return Drop, ipr
	}
	return Send, ipr
}

// requestTuple stands in for the response a dropped request never had: its
// category is out of range, so the statistics count it in none.
var requestTuple = ResponseTuple{AllowanceCategory: AllowanceLast}

// DebitResponse is Debit for a caller that charged the request with
// DebitRequest: it applies every check of Debit but the request limit, and
// does not count the response for qps-scale again. Its IPReason is
// IPExempt for an exempt client, IPOk when a request limit applies to the
// source (the request passed it), and IPNotConfigured otherwise.
func (r *RRL) DebitResponse(src net.Addr, tuple *ResponseTuple) (Action, IPReason, RTReason) {
	if u, ok := src.(*net.UDPAddr); ok && u != nil && r != nil && !r.checked {
		return r.debitUDP(r.networkOfIP(u.IP), tuple)
	}
	addr, udp := addrOf(src)
	return r.DebitResponseAddr(addr, udp, tuple)
}

// DebitResponseAddr is DebitResponse for a server that holds the client's
// address as a netip.Addr; udp says whether the response goes over UDP.
func (r *RRL) DebitResponseAddr(src netip.Addr, udp bool, tuple *ResponseTuple) (Action, IPReason, RTReason) {
	if r == nil {
		return Send, IPNotConfigured, RTNotConfigured
	}
	if !udp || r.checked {
		return r.debitChecked(src, r.networkOf(src), udp, tupleOrError(tuple), r.now(), false)
	}
	return r.debitUDP(r.networkOf(src), tuple)
}

// Debit charges one response to src's accounts and says what to do with it:
// Send, Drop, or Slip (send a truncated reply, or BADCOOKIE to a client that
// sent a cookie, in place of the response). Call it for every response,
// except to a client that presented a valid server cookie, whose source
// cannot be spoofed. Debit charges the request too, after the work of
// answering it is done; DebitRequest and DebitResponse split it in two so
// that a request over its limit is refused before the work, and so that
// requests with valid cookies are held to the request limit.
//
// The checks, in order:
//  1. A client in exempt-clients: Send (IPExempt).
//  2. requests-per-second, per client network, every transport (and
//     proven-requests-per-second for responses that are not over UDP, once
//     set): Drop when exceeded (IPRateLimit).
//  3. Responses that are not over UDP are not limited further: Send (RTNotUDP).
//     The transport is UDP for *net.UDPAddr, and for other types when
//     Network() begins with "udp" or is empty.
//  4. all-per-second debits the network's all-responses account, and the
//     tuple's allowance debits the tuple's account. If the network exceeded
//     all-per-second: Drop (RTAllLimit). If the tuple's account is in debt:
//     Slip for the first limited response and every slip-ratio-th one after
//     it, Drop for the others, and always Drop for errors (RTRateLimit).
//     Otherwise Send (RTOk, or RTNotConfigured if the allowance is 0).
//
// Odd input is accounted safely rather than refused: a src whose address
// cannot be had (nil, a typed nil, an empty IP, unparsable text) counts as
// the network 0.0.0.0 over UDP, so every such source shares one account
// and is limited; a nil tuple, or one with a category out of range, counts
// as an error response. Zones of IPv6 addresses are ignored; IPv4-mapped
// IPv6 addresses count as IPv4.
func (r *RRL) Debit(src net.Addr, tuple *ResponseTuple) (Action, IPReason, RTReason) {
	if u, ok := src.(*net.UDPAddr); ok && u != nil && r != nil && !r.checked {
		return r.debitUDP(r.networkOfIP(u.IP), tuple) // the common case, without netip
	}
	addr, udp := addrOf(src)
	return r.DebitAddr(addr, udp, tuple)
}

// DebitAddr is Debit for a server that holds the client's address as a
// netip.Addr; udp says whether the response goes over UDP.
func (r *RRL) DebitAddr(src netip.Addr, udp bool, tuple *ResponseTuple) (Action, IPReason, RTReason) {
	if r == nil {
		return Send, IPNotConfigured, RTNotConfigured
	}
	if !udp || r.checked {
		return r.debitChecked(src, r.networkOf(src), udp, tupleOrError(tuple), r.now(), true)
	}
	return r.debitUDP(r.networkOf(src), tuple)
}

// debitUDP is DebitAddr for a UDP response in an RRL that has none of
// exempt-clients, requests-per-second, all-per-second and qps-scale: it
// goes straight to the tuple's account.
func (r *RRL) debitUDP(n network, tuple *ResponseTuple) (Action, IPReason, RTReason) {
	var now int64 // r.now(), written out so that the coarse clock's read is inlined
	if r.injected == nil {
		now = coarse.read()
	} else {
		now = r.injected.read()
	}
	act, rtr := r.chargeTuple(n, tupleOrError(tuple), now, IPNotConfigured, false)
	return act, IPNotConfigured, rtr
}

// errorTuple stands in for a nil tuple.
var errorTuple = ResponseTuple{AllowanceCategory: AllowanceError}

func tupleOrError(t *ResponseTuple) *ResponseTuple {
	if t == nil || t.AllowanceCategory >= AllowanceLast {
		return &errorTuple
	}
	return t
}

func (r *RRL) now() int64 {
	if r.injected != nil {
		return r.injected.read()
	}
	return coarse.read()
}

// GetStats returns the counters accumulated since the last zeroing and, if
// zeroAfter is true, zeroes them. CacheLength is the number of accounts held.
func (r *RRL) GetStats(zeroAfter bool) Stats {
	var sum Stats
	if r == nil {
		return sum
	}
	for i := range r.table.shards {
		s := &r.table.shards[i]
		s.mu.Lock()
		c := s.stats.Copy(zeroAfter)
		c.CacheLength = int(s.n)
		s.mu.Unlock()
		sum.Add(&c)
	}
	return sum
}

// limit is an allowance in the units of an account's balance, nanoseconds:
// what one response costs, the most credit an account can hold (one
// second's worth of responses, but at least one response, so that rates
// below 1/s work), and how deep it can sink into debt (window seconds, or
// one response).
type limit struct{ interval, credit, debt int64 }

func (r *RRL) limitOf(interval int64) limit {
	return limit{interval, max(int64(time.Second), interval), max(r.cfg.window, interval)}
}

func (l limit) on() bool { return l.interval > 0 }

// limit returns allowance k, scaled by qps-scale when that is set (the
// request limits are not scaled).
func (r *RRL) limit(k rate) limit {
	if r.qps != nil {
		return r.scaledLimit(k)
	}
	return r.limits[k]
}

func (r *RRL) scaledLimit(k rate) limit {
	if k == rateRequests || k == rateProvenRequests || !r.limits[k].on() {
		return r.limits[k]
	}
	return r.limitOf(r.qps.scale(r.limits[k].interval))
}

// slipRatio is slip-ratio, scaled down by qps-scale as BIND does: only
// ratios above 2, and never below 2.
func (r *RRL) slipRatio() int {
	n := r.cfg.slipRatio
	if r.qps == nil || n <= 2 {
		return n
	}
	return max(2, int(float64(n)*r.qps.factor.Load()))
}

// statsShard picks a shard for the statistics of a Debit that touches no
// account, from the client network, so that concurrent callers spread out.
func (r *RRL) statsShard(n network) *shard {
	return r.table.shard((n.hi ^ n.lo) * 0x9e3779b97f4a7c15)
}

// sweepPerShard bounds the accounts EndQuietEpisodes looks at in one shard
// per call, so that it holds a shard's lock only briefly.
const sweepPerShard = 1024

// EndQuietEpisodes ends the limiting episodes of accounts that have been
// out of debt for at least quiet, reporting each to the observer as a stop
// (with Account set, and Network and Tuple zero), and returns how many it
// ended. Debit ends an episode only when the account is asked about again,
// and the victim of a spoofed flood usually is not once the flood stops: a
// server that logs episodes calls this every few seconds (BIND reports an
// account idle for 60 seconds). It looks at the least recently used accounts
// in debt first and stops at the first that is still too recent, so it costs
// little; it never blocks a shard for more than a bounded number of steps.
func (r *RRL) EndQuietEpisodes(quiet time.Duration) int {
	if r == nil {
		return 0
	}
	before := r.now() - int64(max(quiet, 0))
	var ended []recycled
	for i := range r.table.shards {
		s := &r.table.shards[i]
		s.mu.Lock()
		ended = s.quiet(before, sweepPerShard, ended)
		s.mu.Unlock()
	}
	if r.observer != nil {
		for _, e := range ended {
			r.observer(Event{Limit: limitName(e.kind), Account: e.key})
		}
	}
	return len(ended)
}
