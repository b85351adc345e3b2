package rrl

import "net/netip"

// The charges of an RRL's accounts, shared by its entry points (debit.go,
// sent.go) and its protections (prefixes.go): each debits an account
// (accounts.go) and tells the record of limited accounts (record.go) and
// the observer what the debit began, ended or refused, and an armed watch
// of the busiest accounts (watch.go) what it cost.

// chargeNetwork debits the client network's account of the given kind
// (LimitRequests, LimitProvenRequests or LimitAll) and reports whether it
// is in debt. Each is the first limit its Debit applies, so a refusal is
// its own (decides, see limitedRecord.note).
func (r *RRL) chargeNetwork(n network, kind LimitKind, now int64, s *stripe) bool {
	return r.chargeKey(&n, n.bits, r.hash.account(n, kind, 0, 0, ""), kind, r.limit(kind), now, s, true)
}

// chargeKey debits the per-network account (or a request prefix's) whose
// key is key by l, tells whoever is told of charges (tellKey), and
// reports whether the account is in debt. The account's network is n
// masked to bits, for the event: a request prefix passes the whole
// address and the prefix's length, so that the mask is made only when
// needed. decides says whether the account, in debt, decides the refusal
// (see limitedRecord.note).
func (r *RRL) chargeKey(n *network, bits uint8, key uint64, kind LimitKind, l limit, now int64, s *stripe, decides bool) bool {
	d := r.accounts.debit(key, kind, now, l, s)
	if r.telling.Load() {
		r.tellKey(n, bits, key, kind, d, decides, l.interval, now)
	}
	return d.inDebt
}

// tellKey tells the record of limited accounts and the observer what a
// charge of a per-network account (or a request prefix's) did, when it
// began or ended an episode or found the account in debt, and the watch
// of the busiest accounts what it cost (cost, in nanoseconds of the
// allowance); decides says whether the account's debt decided a refusal
// (see limitedRecord.note). DebitSentBytes's charge, which refuses
// nothing whatever the debt it leaves (the response has gone), passes
// decides false: it starts or ends an episode but counts no refusal.
func (r *RRL) tellKey(n *network, bits uint8, key uint64, kind LimitKind, d debited, decides bool, cost, now int64) {
	if w := r.watch.Load(); w != nil {
		r.watchCharge(w, n, bits, nil, key, kind, cost, now)
	}
	report := d.edge && r.observer != nil
	if (r.record == nil || !d.edge && !(d.inDebt && decides)) && !report {
		return // nothing to record: no episode began or ended, or another limit decided the refusal
	}
	m := n.masked(bits)
	if r.record != nil {
		r.record.note(&r.accounts, m, nil, key, kind, d, decides, now)
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
	d := r.accounts.debit(key, kind, now, l, s)
	if r.telling.Load() { // as tellKey does, written out: a Debit in debt with the record on comes here every time
		if r.record != nil && (d.edge || d.inDebt && decides) {
			r.record.note(&r.accounts, n, t, key, kind, d, decides, now)
		}
		if d.edge && r.observer != nil {
			r.reportEdge(n, t, key, kind, d.inDebt)
		}
		if w := r.watch.Load(); w != nil {
			r.watchCharge(w, &n, n.bits, t, key, kind, l.interval, now)
		}
	}
	if d.inDebt {
		return d.act, RTRateLimit
	}
	return Send, RTOk
}

// The flag telling is set while a charge has someone to tell beyond its
// account: the record of limited accounts, the observer or an armed watch
// of the busiest accounts, so that a charge with no one to tell, the
// common case, costs one load of it.

// watchCharge counts a charge of cost (nanoseconds of the account's
// allowance) in the watch of the busiest accounts w (watch.go), if it is
// armed, and lowers the flag telling once the watch has lingered past the
// last Top, unless the record or the observer needs it. A Top that arms
// the watch again meanwhile has stored a later time, and the flag is put
// back.
func (r *RRL) watchCharge(w *topWatch, n *network, bits uint8, t *ResponseTuple, key uint64, kind LimitKind, cost, now int64) {
	if w.charge(n, bits, t, key, kind, cost, now) || r.tellsAlways() {
		return
	}
	r.telling.Store(false)
	if now <= w.until.Load() {
		r.telling.Store(true)
	}
}

// reportEdge tells the observer that the account charged (key, of the
// given kind) began (started) or ended an episode. t is nil for the
// per-network accounts.
func (r *RRL) reportEdge(n network, t *ResponseTuple, key uint64, kind LimitKind, started bool) {
	e := Event{Started: started, Limit: kind.String(), LimitKind: kind, Account: r.accounts.id(key, kind), Network: n.prefix()}
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
