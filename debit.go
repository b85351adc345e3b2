package rrl

import "net/netip"

// debitChecked is DebitAddr for an RRL with any of exempt-clients, a
// request limit, all-per-second or qps-scale set, or for a response that is
// not over UDP: it applies the checks in the order Debit documents. With
// request false the caller has charged the request (DebitRequest), so the
// request limit and the qps-scale count are left out.
func (r *RRL) debitChecked(src netip.Addr, n network, udp bool, t *ResponseTuple, now int64, request bool) (Action, IPReason, RTReason) {
	if len(r.cfg.exempt) > 0 && r.isExempt(src) {
		return r.countAlone(n, t, Send, IPExempt, RTNotReached)
	}
	var ipr IPReason
	if request {
		if r.qps != nil {
			r.qps.observe(r.table, r.statsShard(n), now)
		}
		if ipr = r.chargeRequest(n, !udp, now); ipr == IPRateLimit {
			return r.countAlone(n, t, Drop, IPRateLimit, RTNotReached)
		}
	} else {
		ipr = r.requestReason(!udp)
	}
	if !udp {
		return r.countAlone(n, t, Send, ipr, RTNotUDP)
	}
	allLimited := r.limits[rateAll].on() && r.chargeNetwork(n, kindAll, now)
	if allLimited && !r.limits[t.AllowanceCategory].on() {
		return r.countAlone(n, t, Drop, ipr, RTAllLimit)
	}
	act, rtr := r.chargeTuple(n, t, now, ipr, allLimited)
	return act, ipr, rtr
}

// requestKind is the kind of the account that a request from a proven or
// an unproven source is charged to.
func (r *RRL) requestKind(proven bool) byte {
	if proven && r.provenApart {
		return kindProvenRequests
	}
	return kindRequests
}

// chargeRequest debits a request to its network's request account, if a
// request limit applies to it, and returns IPRateLimit when that account
// is in debt, IPOk when it is not, and IPNotConfigured when no limit applies.
func (r *RRL) chargeRequest(n network, proven bool, now int64) IPReason {
	kind := r.requestKind(proven)
	if !r.limits[kind].on() {
		return IPNotConfigured
	}
	if r.chargeNetwork(n, kind, now) {
		return IPRateLimit
	}
	return IPOk
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
// (kindRequests, kindProvenRequests or kindAll) and reports whether it is
// in debt.
func (r *RRL) chargeNetwork(n network, kind byte, now int64) bool {
	key := r.hash.account(n, kind, 0, 0, "")
	l := r.limit(rate(kind))
	s := r.table.shard(key)
	s.mu.Lock()
	a, inDebt, gone := s.debit(key, kind, now, l)
	edge := a.limited != inDebt
	a.limited = inDebt
	s.mu.Unlock()
	if r.observer != nil && (edge || gone.limited) {
		r.report(n, nil, key, kind, edge, inDebt, gone)
	}
	return inDebt
}

// chargeTuple debits the response tuple's account, decides the action, and
// counts the outcome, all under the account's shard lock. allLimited says
// that the network has exceeded all-per-second.
func (r *RRL) chargeTuple(n network, t *ResponseTuple, now int64, ipr IPReason, allLimited bool) (Action, RTReason) {
	cat := t.AllowanceCategory
	l := r.limit(rate(cat))
	if !l.on() {
		act, _, rtr := r.countAlone(n, t, Send, ipr, RTNotConfigured)
		return act, rtr
	}
	class, qtype, name := tupleKey(t)
	key := r.hash.account(n, byte(cat), class, qtype, name)
	s := r.table.shard(key)
	s.mu.Lock()
	a, inDebt, gone := s.debit(key, byte(cat), now, l)
	act, rtr := Send, RTOk
	if inDebt {
		act, rtr = a.slipOrDrop(cat, r.slipRatio()), RTRateLimit
	}
	if allLimited { // after the slip count advanced, as in BIND
		act, rtr = Drop, RTAllLimit
	}
	s.stats.count(cat, act, ipr, rtr)
	edge := a.limited != inDebt
	a.limited = inDebt
	s.mu.Unlock()
	if r.observer != nil && (edge || gone.limited) {
		r.report(n, t, key, byte(cat), edge, inDebt, gone)
	}
	return act, rtr
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

// slipOrDrop applies BIND's slip counter to a limited response: the first
// limited response slips, then every ratio-th. Errors never slip.
func (a *account) slipOrDrop(cat AllowanceCategory, ratio int) Action {
	if cat == AllowanceError || ratio == 0 {
		return Drop
	}
	act := Drop
	if a.slip == 0 {
		act = Slip
	}
	if a.slip++; int(a.slip) >= ratio {
		a.slip = 0
	}
	return act
}

// countAlone counts the outcome of a Debit that touches no account, in a
// shard chosen by its client network, and returns it.
func (r *RRL) countAlone(n network, t *ResponseTuple, act Action, ipr IPReason, rtr RTReason) (Action, IPReason, RTReason) {
	s := r.statsShard(n)
	s.mu.Lock()
	s.stats.count(t.AllowanceCategory, act, ipr, rtr)
	s.mu.Unlock()
	return act, ipr, rtr
}

// report tells the observer, once the shard's lock is released, that the
// account charged (key, of the given kind) began or ended an episode
// (edge, started), and that the account whose place it took ended one
// (gone.limited). t is nil for the per-network accounts.
func (r *RRL) report(n network, t *ResponseTuple, key uint64, kind byte, edge, started bool, gone recycled) {
	if gone.limited {
		r.observer(Event{Evicted: true, Limit: limitName(gone.kind), Account: gone.key})
	}
	if edge {
		e := Event{Started: started, Limit: limitName(kind), Account: key, Network: n.prefix()}
		if t != nil {
			e.Tuple = *t
		}
		r.observer(e)
	}
}

// limitNames names the allowance of each kind of account, by its keyword.
var limitNames = [...]string{
	AllowanceAnswer:    "responses-per-second",
	AllowanceReferral:  "referrals-per-second",
	AllowanceNoData:    "nodata-per-second",
	AllowanceNXDomain:  "nxdomains-per-second",
	AllowanceError:     "errors-per-second",
	kindRequests:       "requests-per-second",
	kindAll:            "all-per-second",
	kindProvenRequests: "proven-requests-per-second",
}

func limitName(kind byte) string { return limitNames[kind] }

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
