package rrl

import (
	"net"
	"net/netip"
)

// The path of a Debit, top to bottom: the entry points read the client's
// address and network and the clock; debitUDP goes straight to the tuple's
// account when nothing else is configured, debitChecked applies every
// check in the order Debit documents; chargeRequest, chargeNetwork and
// chargeTuple debit the accounts through debitAccount, which does so with
// one compare-and-swap of the account's balance in its bucket (a new
// account moves in with more, see bucketTable.add); the outcome is
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
//  2. requests-per-second, per client network, every transport (and
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
		return r.debitUDP(r.networkOfIP(u.IP), tuple) // the common case, without netip
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
		return r.debitChecked(src, r.networkOf(src), udp, tupleOrError(tuple), r.now(), request)
	}
	return r.debitUDP(r.networkOf(src), tuple)
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
// request is counted for qps-scale; the network's request account is
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

// RequestRefusal names the request limit that refused a request: Limit is
// LimitRequests, LimitProvenRequests, LimitIPv4RequestPrefixes or
// LimitIPv6RequestPrefixes, and Prefix, for a request prefix, the pair's
// place (from 0) in the Config's list of the family (RequestPrefixes),
// else 0. It is the zero value for a request that was not refused.
type RequestRefusal struct {
	Limit  LimitKind
	Prefix int
}

// DebitRequestLimit is DebitRequestAddr that also says which request limit
// refused the request (when it returns Drop), as the account that was out
// of credit: the network's requests-per-second account (or
// proven-requests-per-second's, for a proven request once that is set),
// or the first request prefix, in the order configured, that refused it.
// A tool that reports what each limit cut, such as a replay of traffic,
// needs it; a server needs only DebitRequestAddr.
func (r *RRL) DebitRequestLimit(src netip.Addr, udp, validCookie bool) (Action, IPReason, RequestRefusal) {
	return r.debitRequest(src, udp, validCookie)
}

// debitRequest is DebitRequestLimit.
func (r *RRL) debitRequest(src netip.Addr, udp, validCookie bool) (Action, IPReason, RequestRefusal) {
	if r == nil || !r.checked {
		return Send, IPNotConfigured, RequestRefusal{}
	}
	s := r.stats.pick()
	ipr, why := r.admit(src, r.networkOf(src), !udp || validCookie, r.now(), s)
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
		ipr, _ = r.admit(src, n, !udp, now, s)
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
	if r.limits[LimitAll].on() && r.chargeNetwork(n, LimitAll, now, s) {
		over = RTAllLimit
	}
	p := r.scaledProtection()
	if p.nsPerByte > 0 && r.chargeBytes(n, p, t.Size, now, s, over == RTOk) && over == RTOk {
		over = RTAllBytesLimit
	}
	if over != RTOk && !r.limits[t.AllowanceCategory].on() {
		return countAlone(s, t, Drop, ipr, over)
	}
	act, rtr := r.chargeTuple(n, t, now, s, over == RTOk)
	switch {
	case over != RTOk: // after the slip count advanced, as in BIND
		act, rtr = Drop, over
	case act == Send && p.tooLarge(t.Size):
		act, rtr = Slip, RTTooLarge
	}
	return countAlone(s, t, act, ipr, rtr)
}

// admit applies to a request, in order, exempt-clients, the qps-scale
// count and the request limits, and returns its IPReason: IPExempt,
// IPRateLimit (refuse it, with the limit that did), IPOk or
// IPNotConfigured.
func (r *RRL) admit(src netip.Addr, n network, proven bool, now int64, s *stripe) (IPReason, RequestRefusal) {
	if len(r.cfg.exempt) > 0 && r.isExempt(src) {
		return IPExempt, RequestRefusal{}
	}
	if r.qps != nil {
		r.qps.observe(r.stats, s, now)
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
	if !proven && r.prot.levels[0].n+r.prot.levels[1].n > 0 {
		return r.chargeUnproven(src, n, now, s)
	}
	kind := r.requestKind(proven)
	if !r.limits[kind].on() {
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
	if r.limits[r.requestKind(proven)].on() {
		return IPOk
	}
	return IPNotConfigured
}

// chargeNetwork debits the client network's account of the given kind
// (LimitRequests, LimitProvenRequests or LimitAll) and reports whether it
// is in debt. Each is the first limit its Debit applies, so a refusal is
// its own (decides, see noteLimited).
func (r *RRL) chargeNetwork(n network, kind LimitKind, now int64, s *stripe) bool {
	return r.chargeKey(&n, n.bits, r.hash.account(n, kind, 0, 0, ""), kind, r.limit(kind), now, s, true)
}

// chargeKey debits the per-network account (or a request prefix's) whose
// key is key by l, tells the observer and the record of limited accounts
// if that began or ended an episode, and reports whether the account is in
// debt. The account's network is n masked to bits, for the event: a
// request prefix passes the whole address and the prefix's length, so that
// the mask is made only for an event. decides says whether the account,
// in debt, decides the refusal (see noteLimited).
func (r *RRL) chargeKey(n *network, bits uint8, key uint64, kind LimitKind, l limit, now int64, s *stripe, decides bool) bool {
	d := r.debitAccount(key, kind, now, l, s)
	if d.edge || d.inDebt {
		r.noteChargeBy(n, bits, key, kind, d, decides, now)
	}
	return d.inDebt
}

// noteCharge is noteChargeBy for a charge that refuses nothing, whatever
// the debt it leaves (DebitSentBytes's: the response has gone): it starts
// or ends an episode but counts no refusal.
func (r *RRL) noteCharge(n *network, bits uint8, key uint64, kind LimitKind, d debited, now int64) {
	r.noteChargeBy(n, bits, key, kind, d, false, now)
}

// noteChargeBy tells the record of limited accounts and the observer what
// a charge of a per-network account (or a request prefix's) did, when it
// began or ended an episode or found the account in debt; decides says
// whether the account's debt decided a refusal (see noteLimited).
func (r *RRL) noteChargeBy(n *network, bits uint8, key uint64, kind LimitKind, d debited, decides bool, now int64) {
	report := d.edge && r.observer != nil
	if (r.record == nil || !d.edge && !decides) && !report {
		return // nothing to record: another limit decided the refusal
	}
	m := n.masked(bits)
	if r.record != nil {
		r.noteLimited(m, nil, key, kind, d, decides, now)
	}
	if report {
		r.reportEdge(m, nil, key, kind, d.inDebt)
	}
}

// chargeTuple debits the response tuple's account and returns what its
// allowance says to do with the response: Send (RTOk, or RTNotConfigured
// when the allowance is 0), or in debt what the slip counter says
// (RTRateLimit). The caller counts the outcome. decides is false when a
// per-network limit already refused the response, whose refusal the
// record of limited accounts then counts there, not here.
func (r *RRL) chargeTuple(n network, t *ResponseTuple, now int64, s *stripe, decides bool) (Action, RTReason) {
	kind := LimitKind(t.AllowanceCategory)
	l := r.limit(kind)
	if !l.on() {
		return Send, RTNotConfigured
	}
	class, qtype, name := tupleKey(t)
	key := r.hash.account(n, kind, class, qtype, name)
	d := r.debitAccount(key, kind, now, l, s)
	if r.record != nil && (d.edge || d.inDebt && decides) {
		r.noteLimited(n, t, key, kind, d, decides, now)
	}
	if d.edge && r.observer != nil {
		r.reportEdge(n, t, key, kind, d.inDebt)
	}
	if d.inDebt {
		return d.act, RTRateLimit
	}
	return Send, RTOk
}

// debited is what debitAccount did: whether the account is in debt, what
// its slip counter says to do with a limited response (tuple accounts
// only), and whether the account began or ended a limiting episode.
type debited struct {
	inDebt bool
	act    Action
	edge   bool
}

// debitAccount debits the account for key, of the given kind, by l at now:
// it reads the account's balance, works out the new one (settle) and
// writes it with one compare-and-swap. That is all a Debit does when the
// table holds the account in its first bucket and no other Debit changes
// it meanwhile; debitAgain handles the rest.
func (r *RRL) debitAccount(key uint64, kind LimitKind, now int64, l limit, s *stripe) debited {
	i, id := r.table.index(key), identOf(key, kind)
	if ref, held := r.table.findFirst(i, id); held {
		if old, ok := ref.load(); ok {
			if v, d := settle(old, now, l); ref.store(old, v) {
				return d
			}
		}
	}
	return r.debitAgain(i, id, kind, now, l, s)
}

// debitAgain is debitAccount for an account that the table does not hold
// or holds in its second bucket, or that lost its place, or whose balance
// another Debit changed between
// its read and its write: it looks for the account in its set, adding it
// if need be already debited (firstDebit), and otherwise debits it again
// until its compare-and-swap succeeds. The observer hears at once of an
// account in a limiting episode whose place a new account took.
func (r *RRL) debitAgain(i uint64, id uint32, kind LimitKind, now int64, l limit, s *stripe) debited {
	for {
		ref, g, added := r.table.findOrAdd(i, id, now, firstDebit(now, l), s)
		if g != (gone{}) && r.observer != nil {
			r.reportEvicted(g)
		}
		if added {
			return debited{act: Send}
		}
		for {
			old, ok := ref.load()
			if !ok {
				break // a new account took its place: look again
			}
			if v, d := settle(old, now, l); ref.store(old, v) {
				return d
			}
		}
	}
}

// settle returns the balance old charged by l at now, with the slip
// counter advanced for an account in debt whose responses may slip and
// the episode flag set, and what the charge did.
func settle(old balance, now int64, l limit) (balance, debited) {
	v, inDebt := old.charge(now, l)
	act := Send
	if inDebt {
		act, v = v.slipOrDrop(l.slip)
	}
	limited := old.limitedAfter(now, l, inDebt)
	return v.withLimited(limited), debited{inDebt, act, old.limited() != limited}
}

// firstDebit is the balance of a new account after its first debit by l
// at now: full credit less one interval, which never puts it in debt
// (credit is at least one interval), so the response is sent, no slip is
// counted and no episode starts.
func firstDebit(now int64, l limit) balance {
	return fullCredit(now, l.credit-l.interval, 0)
}

// tupleKey returns the parts of a tuple that its account key holds: BIND
// compares class, type and name for answers; class and name for referrals
// and NODATA; the name (the zone) for NXDOMAIN; and nothing but the
// network for errors.
func tupleKey(t *ResponseTuple) (class, qtype uint16, name string) {
	switch t.AllowanceCategory {
	case AllowanceAnswer:
		return t.Class, t.Type, t.SalientName
	case AllowanceReferral, AllowanceNoData:
		return t.Class, 0, t.SalientName
	case AllowanceNXDomain:
		return 0, 0, t.SalientName
	}
	return 0, 0, ""
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

// reportEvicted tells the observer that an account in a limiting episode
// lost its place to a new account.
func (r *RRL) reportEvicted(g gone) {
	r.observer(Event{Evicted: true, Limit: g.kind.String(), LimitKind: g.kind, Account: g.account})
}

// reportEdge tells the observer that the account charged (key, of the
// given kind) began (started) or ended an episode. t is nil for the
// per-network accounts.
func (r *RRL) reportEdge(n network, t *ResponseTuple, key uint64, kind LimitKind, started bool) {
	e := Event{Started: started, Limit: kind.String(), LimitKind: kind, Account: r.table.accountID(key, kind), Network: n.prefix()}
	if t != nil {
		e.Tuple = *t
	}
	r.observer(e)
}

// isExempt reports whether src is in exempt-clients.
func (r *RRL) isExempt(src netip.Addr) bool {
	src = src.Unmap().WithZone("")
	for _, p := range r.cfg.exempt {
		if p.Contains(src) {
			return true
		}
	}
	return false
}

// RefusalNetwork returns the network of the account that refused a request
// from src, as DebitRequestLimit named it in why: src masked to
// ipv4-prefix-length or ipv6-prefix-length for requests-per-second (and
// proven-requests-per-second), or to the length of the request prefix that
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
	case LimitRequests, LimitProvenRequests:
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
