package rrl

import "net/netip"

// debit is one Debit call in progress: its inputs, its verdict so far, and
// the observer events it owes once every lock is released.
type debit struct {
	r     *RRL
	net   network
	udp   bool
	tuple *ResponseTuple
	now   int64

	act Action
	ipr IPReason
	rtr RTReason

	events  [6]pendingEvent // at most a start/stop and an eviction per account touched
	nEvents uint8
}

type pendingEvent struct {
	key              uint64
	kind             byte
	started, evicted bool
}

// run applies the checks in the order Debit documents, and counts the
// outcome in exactly one shard's statistics.
func (d *debit) run() {
	r := d.r
	d.act, d.ipr, d.rtr = Send, IPNotConfigured, RTNotConfigured
	if r.qps != nil {
		r.qps.observe(r.table, r.statsShard(d.net), d.now)
	}
	if r.intervals[rateRequests] > 0 {
		if d.chargeNetwork(kindRequests, rateRequests) {
			d.act, d.ipr, d.rtr = Drop, IPRateLimit, RTNotReached
			d.countAlone()
			return
		}
		d.ipr = IPOk
	}
	if !d.udp {
		d.rtr = RTNotUDP
		d.countAlone()
		return
	}
	allLimited := r.intervals[rateAll] > 0 && d.chargeNetwork(kindAll, rateAll)
	if r.intervals[d.tuple.AllowanceCategory] == 0 {
		if allLimited {
			d.act, d.rtr = Drop, RTAllLimit
		}
		d.countAlone()
		return
	}
	d.chargeTuple(allLimited)
}

// chargeNetwork debits the client network's account of the given kind and
// reports whether it is in debt.
func (d *debit) chargeNetwork(kind byte, k rate) bool {
	key := d.r.hash.account(d.net, kind, 0, 0, "")
	s := d.r.table.shard(key)
	s.mu.Lock()
	_, inDebt := d.charge(s, key, kind, k)
	s.mu.Unlock()
	return inDebt
}

// chargeTuple debits the response tuple's account, decides the action, and
// counts the outcome, all under the account's shard lock.
func (d *debit) chargeTuple(allLimited bool) {
	r, t := d.r, d.tuple
	cat := t.AllowanceCategory
	class, qtype, name := tupleKey(t)
	key := r.hash.account(d.net, byte(cat), class, qtype, name)
	s := r.table.shard(key)
	s.mu.Lock()
	a, inDebt := d.charge(s, key, byte(cat), rate(cat))
	d.act, d.rtr = Send, RTOk
	if inDebt {
		d.act, d.rtr = r.slipOrDrop(a, cat), RTRateLimit
	}
	if allLimited { // after the slip count advanced, as in BIND
		d.act, d.rtr = Drop, RTAllLimit
	}
	s.stats.count(cat, d.act, d.ipr, d.rtr)
	s.mu.Unlock()
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

// charge finds or creates the account for key in s (whose lock the caller
// holds), debits it against allowance k, and notes episode changes for the
// observer. It returns the account and whether it is in debt.
func (d *debit) charge(s *shard, key uint64, kind byte, k rate) (*account, bool) {
	r := d.r
	iv := r.interval(k)
	i, a, gone := s.get(key, d.now, credit(iv), kind)
	if gone.limited {
		d.event(gone.key, gone.kind, false, true)
	}
	inDebt := s.charge(i, a, d.now, iv, credit(iv), r.debt(iv))
	if a.limited != inDebt {
		a.limited = inDebt
		d.event(key, kind, inDebt, false)
	}
	return a, inDebt
}

// slipOrDrop applies BIND's slip counter to a limited response: the first
// limited response slips, then every slip-ratio-th. Errors never slip.
func (r *RRL) slipOrDrop(a *account, cat AllowanceCategory) Action {
	ratio := r.slipRatio()
	if cat == AllowanceError || ratio == 0 {
		return Drop
	}
	first := a.slip == 0
	if a.slip++; int(a.slip) >= ratio {
		a.slip = 0
	}
	if first {
		return Slip
	}
	return Drop
}

// countAlone counts the outcome of a Debit that holds no shard lock.
func (d *debit) countAlone() {
	s := d.r.statsShard(d.net)
	s.mu.Lock()
	s.stats.count(d.tuple.AllowanceCategory, d.act, d.ipr, d.rtr)
	s.mu.Unlock()
}

func (d *debit) event(key uint64, kind byte, started, evicted bool) {
	if d.r.observer != nil && int(d.nEvents) < len(d.events) {
		d.events[d.nEvents] = pendingEvent{key, kind, started, evicted}
		d.nEvents++
	}
}

// report tells the observer about the episodes this Debit began or ended.
func (d *debit) report() {
	for _, p := range d.events[:d.nEvents] {
		e := Event{Started: p.started, Evicted: p.evicted, Limit: limitName(p.kind), Account: p.key}
		if !p.evicted {
			e.Network = d.net.prefix()
			if p.kind < kindRequests {
				e.Tuple = *d.tuple
			}
		}
		d.r.observer(e)
	}
}

// limitNames names the allowance of each kind of account, by its keyword.
var limitNames = [...]string{
	AllowanceAnswer:   "responses-per-second",
	AllowanceReferral: "referrals-per-second",
	AllowanceNoData:   "nodata-per-second",
	AllowanceNXDomain: "nxdomains-per-second",
	AllowanceError:    "errors-per-second",
	kindRequests:      "requests-per-second",
	kindAll:           "all-per-second",
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
