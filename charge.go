package rrl

import "net/netip"

// The charges of an RRL's accounts, shared by its entry points (debit.go,
// sent.go) and its protections (prefixes.go): each debits an account
// (accounts.go) and tells the record of limited accounts (record.go) and
// the observer what the debit began, ended or refused.

// chargeNetwork debits the client network's account of the given kind
// (LimitRequests, LimitProvenRequests or LimitAll) and reports whether it
// is in debt. Each is the first limit its Debit applies, so a refusal is
// its own (decides, see limitedRecord.note).
func (r *RRL) chargeNetwork(n network, kind LimitKind, now int64, s *stripe) bool {
	return r.chargeKey(&n, n.bits, r.hash.account(n, kind, 0, 0, ""), kind, r.limit(kind), now, s, true)
}

// chargeKey debits the per-network account (or a request prefix's) whose
// key is key by l, tells the observer and the record of limited accounts
// if that began or ended an episode, and reports whether the account is in
// debt. The account's network is n masked to bits, for the event: a
// request prefix passes the whole address and the prefix's length, so that
// the mask is made only for an event. decides says whether the account,
// in debt, decides the refusal (see limitedRecord.note).
func (r *RRL) chargeKey(n *network, bits uint8, key uint64, kind LimitKind, l limit, now int64, s *stripe, decides bool) bool {
	d := r.accounts.debit(key, kind, now, l, s)
	if d.edge || d.inDebt {
		r.noteChargeBy(n, bits, key, kind, d, decides, now)
	}
	if r.watching.Load() {
		r.watchCharge(n, bits, nil, key, kind, l.interval, now)
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
// whether the account's debt decided a refusal (see limitedRecord.note).
func (r *RRL) noteChargeBy(n *network, bits uint8, key uint64, kind LimitKind, d debited, decides bool, now int64) {
	report := d.edge && r.observer != nil
	if (r.record == nil || !d.edge && !decides) && !report {
		return // nothing to record: another limit decided the refusal
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
	if r.record != nil && (d.edge || d.inDebt && decides) {
		r.record.note(&r.accounts, n, t, key, kind, d, decides, now)
	}
	if d.edge && r.observer != nil {
		r.reportEdge(n, t, key, kind, d.inDebt)
	}
	if r.watching.Load() {
		r.watchCharge(&n, n.bits, t, key, kind, l.interval, now)
	}
	if d.inDebt {
		return d.act, RTRateLimit
	}
	return Send, RTOk
}

// watchCharge counts a charge of cost (nanoseconds of the account's
// allowance) in the watch of the busiest accounts (watch.go), which is
// armed, and disarms it once it has lingered past the last Top. A Top
// that arms it again meanwhile has stored a later time, which puts the
// flag back.
func (r *RRL) watchCharge(n *network, bits uint8, t *ResponseTuple, key uint64, kind LimitKind, cost, now int64) {
	w := r.watch.Load()
	if !w.charge(n, bits, t, key, kind, cost, now) {
		r.watching.Store(false)
		if now <= w.until.Load() {
			r.watching.Store(true)
		}
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
