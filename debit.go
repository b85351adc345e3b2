package rrl

import (
	"net"
	"net/netip"
)

// The path of a Debit, top to bottom: the entry points read the client's
// address and network and the clock; debitUDP goes straight to the tuple's
// account when nothing else is configured, debitChecked applies every
// check in the order Debit documents; chargeRequest, chargeNetwork and
// chargeTuple (charge.go) debit the accounts through accounts.debit, which
// does so with one compare-and-swap of the account's balance in its bucket
// (a new account moves in with more, see table.add); the outcome is
// counted in the calling goroutine's stripe of the statistics (stripes.go).

// Debit charges one response to src's accounts and says what to do with it:
// Send, Drop, or Slip (send a truncated reply, or BADCOOKIE to a client that
// sent a cookie, in place of the response). Call it for every response.
// Debit charges the request too, after the work of answering it is done;
// DebitRequest and DebitResponse split it in two, so that a request over
// its limit is refused before the work. A server that exempts clients with
// a valid server cookie from the response limits (their source cannot be
// spoofed) must use the two calls: DebitRequest for every request, cookie
// or not, so that the request limits and qps-scale still see them, and
// DebitResponse for the responses of the others. Skipping Debit for them
// would let them escape the request limits too.
//
// The checks, in order:
//  1. A client in exempt-clients: Send (IPExempt).
//  2. For a response not over UDP, stream-time-per-second: Drop when the
//     network is over its budget of time (IPRateLimit; see
//     DebitStreamTime). Then requests-per-second, per client network,
//     every transport (and
//     proven-requests-per-second for responses that are not over UDP, once
//     set), and for UDP the request prefixes: Drop when exceeded
//     (IPRateLimit).
//  3. Responses that are not over UDP are not limited further: Send (RTNotUDP).
//     The transport is UDP for *net.UDPAddr, and for other types when
//     Network() begins with "udp" or is empty.
//  4. all-per-second debits the network's all-responses account,
//     all-bytes-per-second its all-bytes account by the response's Size,
//     and the tuple's allowance debits the tuple's account. If the network
//     exceeded all-per-second: Drop (RTAllLimit); else if it exceeded
//     all-bytes-per-second: Drop (RTAllBytesLimit). If the tuple's account
//     is in debt: Slip for the first limited response and every
//     slip-ratio-th one after it, Drop for the others, and always Drop for
//     errors (RTRateLimit).
//  5. A response to be sent that is longer than nocookie-udp-size: Slip
//     (RTTooLarge). The integration sends a truncated reply in its place,
//     with a server cookie when the client sent a cookie (never
//     BADCOOKIE), so that the client's retry over TCP, or with the
//     cookie, gets the whole answer. Otherwise Send (RTOk, or
//     RTNotConfigured if the allowance is 0).
//
// Debit takes every UDP request for unproven: a server that knows of valid
// server cookies uses DebitRequest and DebitResponse, and asks
// DebitResponse only about responses to unproven sources, so that a proven
// source is never asked to retry and never limited by the response
// allowances, all-bytes-per-second or nocookie-udp-size.
//
// Odd input is accounted safely rather than refused: a src whose address
// cannot be had (nil, a typed nil, an empty IP, unparsable text) counts as
// the network 0.0.0.0 over UDP, so every such source shares one account
// and is limited; a nil tuple, or one with a category out of range, counts
// as an error response. Zones of IPv6 addresses are ignored; IPv4-mapped
// IPv6 addresses count as IPv4.
func (r *RRL) Debit(src net.Addr, tuple *ResponseTuple) (Action, IPReason, RTReason) {
	return r.debit(src, tuple, true)
}

// DebitAddr is Debit for a server that holds the client's address as a
// netip.Addr; udp says whether the response goes over UDP.
func (r *RRL) DebitAddr(src netip.Addr, udp bool, tuple *ResponseTuple) (Action, IPReason, RTReason) {
	return r.debitAddr(src, udp, tuple, true)
}

// debit is Debit, and with request false DebitResponse, which leaves the
// request to DebitRequest.
func (r *RRL) debit(src net.Addr, tuple *ResponseTuple, request bool) (Action, IPReason, RTReason) {
	if u, ok := src.(*net.UDPAddr); ok && u != nil && r != nil && !r.checked {
		return r.debitUDP(r.nets.networkOfIP(u.IP), tuple) // the common case, without netip
	}
	addr, udp := addrOf(src)
	return r.debitAddr(addr, udp, tuple, request)
}

// debitAddr is DebitAddr, and with request false DebitResponseAddr.
func (r *RRL) debitAddr(src netip.Addr, udp bool, tuple *ResponseTuple, request bool) (Action, IPReason, RTReason) {
	if r == nil {
		return Send, IPNotConfigured, RTNotConfigured
	}
	if !udp || r.checked {
		return r.debitChecked(src, r.nets.networkOf(src), udp, tupleOrError(tuple), r.now(), request)
	}
	return r.debitUDP(r.nets.networkOf(src), tuple)
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
// (see Config), and never to the request prefixes. An unproven request is
// charged to its network's requests-per-second account and to the account
// of each request prefix, and refused if any of them is out of credit; a
// refused request is charged to none of them. Its response needs no DebitResponse, since a proven source
// cannot be the victim of a reflection; the request limit still holds it,
// because that limit is about load, not spoofing.
//
// The checks, in order: a client in exempt-clients is sent (IPExempt); the
// request is counted for qps-scale; a request not over UDP from a network
// over its stream-time-per-second budget is refused (Drop, IPRateLimit;
// see DebitStreamTime); the network's request account is
// debited (and the request prefixes' accounts), and Drop returned when it
// is in debt (IPRateLimit); otherwise
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
	act, ipr, _ := r.debitRequest(src, udp, validCookie)
	return act, ipr
}

// DebitRequestLimit is DebitRequestAddr that also says which request limit
// refused the request (when it returns Drop), as the account that was out
// of credit: the network's requests-per-second account (or
// proven-requests-per-second's, for a proven request once that is set),
// the first request prefix, in the order configured, that refused it, or
// for a request not over UDP the network's stream-time-per-second
// account (LimitStreamTime).
// A tool that reports what each limit cut, such as a replay of traffic,
// needs it; a server needs only DebitRequestAddr.
func (r *RRL) DebitRequestLimit(src netip.Addr, udp, validCookie bool) (Action, IPReason, RequestRefusal) {
	return r.debitRequest(src, udp, validCookie)
}

// debitRequest is DebitRequestLimit.
func (r *RRL) debitRequest(src netip.Addr, udp, validCookie bool) (Action, IPReason, RequestRefusal) {
	if r == nil || !r.checked && (udp || r.base.prot.streamScale == 0) {
		return Send, IPNotConfigured, RequestRefusal{}
	}
	s := r.stats.pick()
	ipr, why := r.admit(src, r.nets.networkOf(src), !udp || validCookie, !udp, r.now(), s)
	if ipr == IPRateLimit {
		s.count(AllowanceLast, Drop, ipr, RTNotReached) // in no category: it has no response
		return Drop, ipr, why
	}
	return Send, ipr, RequestRefusal{}
}

// DebitResponse is Debit for a caller that charged the request with
// DebitRequest: it applies every check of Debit but the request limit, and
// does not count the response for qps-scale again. Its IPReason is
// IPExempt for an exempt client, IPOk when a request limit applies to the
// source (the request passed it), and IPNotConfigured otherwise.
func (r *RRL) DebitResponse(src net.Addr, tuple *ResponseTuple) (Action, IPReason, RTReason) {
	return r.debit(src, tuple, false)
}

// DebitResponseAddr is DebitResponse for a server that holds the client's
// address as a netip.Addr; udp says whether the response goes over UDP.
func (r *RRL) DebitResponseAddr(src netip.Addr, udp bool, tuple *ResponseTuple) (Action, IPReason, RTReason) {
	return r.debitAddr(src, udp, tuple, false)
}

// debitUDP is DebitAddr for a UDP response in an RRL that has none of
// exempt-clients, requests-per-second, proven-requests-per-second,
// all-per-second and qps-scale: it goes straight to the tuple's account.
func (r *RRL) debitUDP(n network, tuple *ResponseTuple) (Action, IPReason, RTReason) {
	var now int64 // r.now(), written out so that the coarse clock's read is inlined
	if r.injected == nil {
		now = coarse.read()
	} else {
		now = r.injected.read()
	}
	t, s := tupleOrError(tuple), r.stats.pick()
	act, rtr := r.chargeTuple(n, t, now, s, true)
	s.countUDP(t.AllowanceCategory, act, rtr)
	return act, IPNotConfigured, rtr
}

// debitChecked is DebitAddr for an RRL with any of exempt-clients, a
// request limit, all-per-second, qps-scale or a protection of prefixes.go
// set, or for a response that is
// not over UDP: it applies the checks in the order Debit documents. With
// request false the caller has charged the request (DebitRequest), so the
// request limit and the qps-scale count are left out.
func (r *RRL) debitChecked(src netip.Addr, n network, udp bool, t *ResponseTuple, now int64, request bool) (Action, IPReason, RTReason) {
	s := r.stats.pick()
	var ipr IPReason
	switch {
	case request:
		ipr, _ = r.admit(src, n, !udp, !udp, now, s)
	case len(r.cfg.exempt) > 0 && r.isExempt(src):
		ipr = IPExempt
	default:
		ipr = r.requestReason(!udp) // the request passed DebitRequest
	}
	switch ipr {
	case IPExempt:
		return countAlone(s, t, Send, IPExempt, RTNotReached)
	case IPRateLimit:
		return countAlone(s, t, Drop, IPRateLimit, RTNotReached)
	}
	if !udp {
		return countAlone(s, t, Send, ipr, RTNotUDP)
	}
	// Every account is charged, but the refusal is the first limit's to
	// count in the record of limited accounts (decides): all-per-second,
	// then all-bytes-per-second, then the tuple's allowance.
	over := RTOk // whether the network is over all-per-second or all-bytes-per-second
	if r.base.limits[LimitAll].on() && r.chargeNetwork(n, LimitAll, now, s) {
		over = RTAllLimit
	}
	al := r.allowances()
	if al.prot.nsPerByte > 0 && r.chargeBytes(n, al, t.Size, now, s, over == RTOk) && over == RTOk {
		over = RTAllBytesLimit
	}
	if over != RTOk && !r.base.limits[t.AllowanceCategory].on() {
		return countAlone(s, t, Drop, ipr, over)
	}
	act, rtr := r.chargeTuple(n, t, now, s, over == RTOk)
	switch {
	case over != RTOk: // after the slip count advanced, as in BIND
		act, rtr = Drop, over
	case act == Send && al.prot.tooLarge(t.Size):
		act, rtr = Slip, RTTooLarge
	}
	return countAlone(s, t, act, ipr, rtr)
}

// admit applies to a request, in order, exempt-clients, the qps-scale
// count, stream-time-per-second for a request not over UDP (stream) and
// the request limits, and returns its IPReason: IPExempt, IPRateLimit
// (refuse it, with the limit that did), IPOk or IPNotConfigured. The
// stream time budget comes before the request limits because it charges
// nothing before the work: a request it refuses is then charged to none.
func (r *RRL) admit(src netip.Addr, n network, proven, stream bool, now int64, s *stripe) (IPReason, RequestRefusal) {
	if len(r.cfg.exempt) > 0 && r.isExempt(src) {
		return IPExempt, RequestRefusal{}
	}
	if r.qps != nil {
		r.qps.observe(r.stats, s, now)
	}
	if stream && r.base.prot.streamScale > 0 && r.overStreamTime(n, now, s) {
		return IPRateLimit, RequestRefusal{Limit: LimitStreamTime}
	}
	return r.chargeRequest(src, n, proven, now, s)
}

// requestKind is the kind of the account that a request from a proven or
// an unproven source is charged to.
func (r *RRL) requestKind(proven bool) LimitKind {
	if proven && r.provenApart {
		return LimitProvenRequests
	}
	return LimitRequests
}

// chargeRequest debits a request to its network's request account, if a
// request limit applies to it, and an unproven one to its request
// prefixes (chargeUnproven), and returns IPRateLimit when an account is
// in debt, with the account's limit, IPOk when none is, and
// IPNotConfigured when no limit applies.
func (r *RRL) chargeRequest(src netip.Addr, n network, proven bool, now int64, s *stripe) (IPReason, RequestRefusal) {
	if !proven && r.base.prot.hasPrefixes() {
		return r.chargeUnproven(src, n, now, s)
	}
	kind := r.requestKind(proven)
	if !r.base.limits[kind].on() {
		return IPNotConfigured, RequestRefusal{}
	}
	if r.chargeNetwork(n, kind, now, s) {
		return IPRateLimit, RequestRefusal{Limit: kind}
	}
	return IPOk, RequestRefusal{}
}

// requestReason is the IPReason of a response whose request passed
// DebitRequest: IPOk when a request limit applies to its source.
func (r *RRL) requestReason(proven bool) IPReason {
	if r.base.limits[r.requestKind(proven)].on() {
		return IPOk
	}
	return IPNotConfigured
}

// errorTuple stands in for a nil tuple.
var errorTuple = ResponseTuple{AllowanceCategory: AllowanceError}

func tupleOrError(t *ResponseTuple) *ResponseTuple {
	if t == nil || t.AllowanceCategory >= AllowanceLast {
		return &errorTuple
	}
	return t
}

// countAlone counts the outcome of a Debit, and returns it.
func countAlone(s *stripe, t *ResponseTuple, act Action, ipr IPReason, rtr RTReason) (Action, IPReason, RTReason) {
	s.count(t.AllowanceCategory, act, ipr, rtr)
	return act, ipr, rtr
}

// RefusalNetwork returns the network of the account that refused a request
// from src, as DebitRequestLimit named it in why: src masked to
// ipv4-prefix-length or ipv6-prefix-length for requests-per-second (and
// proven-requests-per-second and stream-time-per-second), or to the length of the request prefix that
// refused it. It reports false for a request that was not refused, a
// refusal that names no account of this RRL, and a network that holds a
// client of exempt-clients: a server that acts on the networks its request
// limits keep refusing (a kernel drop list, say) names them with it, and
// must not act on one whose exempt clients it would cut off with the rest.
func (r *RRL) RefusalNetwork(src netip.Addr, why RequestRefusal) (netip.Prefix, bool) {
	if r == nil {
		return netip.Prefix{}, false
	}
	src = src.Unmap().WithZone("")
	if !src.IsValid() {
		src = netip.IPv4Unspecified() // as Debit reads a source it cannot read
	}
	fam, bits := 0, r.cfg.ipv4PrefixLength
	if src.Is6() {
		fam, bits = 1, r.cfg.ipv6PrefixLength
	}
	switch why.Limit {
	case LimitRequests, LimitProvenRequests, LimitStreamTime:
	case LimitIPv4RequestPrefixes, LimitIPv6RequestPrefixes:
		if why.Limit != [2]LimitKind{LimitIPv4RequestPrefixes, LimitIPv6RequestPrefixes}[fam] ||
			why.Prefix < 0 || why.Prefix >= r.cfg.prefixCount[fam] {
			return netip.Prefix{}, false
		}
		bits = r.cfg.prefixes[fam][why.Prefix].Bits
	default:
		return netip.Prefix{}, false
	}
	p, err := src.Prefix(bits)
	if err != nil {
		return netip.Prefix{}, false
	}
	for _, e := range r.cfg.exempt {
		if e.Overlaps(p) {
			return netip.Prefix{}, false
		}
	}
	return p, true
}
