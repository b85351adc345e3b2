package rrl

import (
	"net/netip"
	"time"
)

// stream-time-per-second: a budget of handling time per client network for
// the requests that are not over UDP. Their source is proven by the
// connection's handshake, so they cannot be part of a reflection; what
// they can do is load the server, and a request count weighs a forward to
// a slow upstream, a zone transfer and a cached answer alike. So each is
// charged, once its work is done, with the time it took, and a network
// that has spent more than its budget has its stream requests refused
// before any work until it has earned the time back.
//
// The account is the network's, of kind LimitStreamTime, in the arithmetic
// of the response accounts (balance.charge): a charge of d nanoseconds
// moves its tat d*streamScale later, it earns a second a second, holds at
// most stream-time-instant of budget as credit and sinks at most window
// seconds into debt. The check before the work is a charge of 0, which
// only says whether the account is in debt.
//
// The time is wall time, not CPU time: Go has no clock of the CPU time of
// one goroutine, and a request's goroutine is held, with its memory and
// its connection's place, for as long as the plugins below take, whether
// they compute or wait on an upstream. A forward to a slow upstream is as
// real a cost as a signature.

// overStreamTime reports whether the network n, asking over a stream at
// now, is over its stream-time-per-second budget: whether its account is
// in debt. A refusal counts in Stats.StreamTimeDrops, and in the record of
// limited accounts as the account's (it is the first limit applied).
func (r *RRL) overStreamTime(n network, now int64, s *stripe) bool {
	al := r.allowances()
	key := r.hash.account(n, LimitStreamTime, 0, 0, "")
	if r.chargeKey(&n, n.bits, key, LimitStreamTime, al.streamLimit(0), now, s, true) {
		s.prot.streamDrops.Add(1)
		return true
	}
	return false
}

// DebitStreamTime charges src's network, on its stream-time-per-second
// account, with d: the wall time that the work of one request not over UDP
// took, from the server's first look at it to its response (or, in a
// chain of handlers, from the limiting handler to the end of those below
// it). Call it after that work, for each stream request that DebitRequest
// let through; DebitRequest refuses (Drop, with LimitStreamTime) the
// stream requests of a network whose account is in debt.
//
// Because the charge comes after the work, the requests a network has in
// flight when it spends its budget were admitted and still run, and each
// is charged in full; so is one that arrives between a response going out
// and its charge landing (a client that asks again at once). A network
// overshoots its budget by at most the time of the requests it can have
// in flight at once: its connections × the requests each pipelines × the
// longest a request takes (16 connections of one query each to a 20 ms
// upstream: about 320 ms). The debt this leaves, at most window seconds
// of budget, is refused until it is earned back, so over a long flood the
// network is held to its budget, the overshoot paid for with refusals
// afterwards (all of it while it is within window seconds of budget).
//
// It decides and counts nothing. It charges nothing when d is not
// positive, when stream-time-per-second is off, or for a client in
// exempt-clients. A charge that puts the account in debt starts a
// limiting episode as a Debit's would, seen by the observer and the record
// of limited accounts. It allocates nothing once the network's account is
// held.
func (r *RRL) DebitStreamTime(src netip.Addr, d time.Duration) {
	if r == nil || d <= 0 || r.base.prot.streamScale <= 0 || (len(r.cfg.exempt) > 0 && r.isExempt(src)) {
		return
	}
	al := r.allowances()
	n, now := r.nets.networkOf(src), r.now()
	key := r.hash.account(n, LimitStreamTime, 0, 0, "")
	l := al.streamLimit(int64(d))
	dd := r.accounts.debit(key, LimitStreamTime, now, l, r.stats.pick())
	if r.telling.Load() {
		r.tellKey(&n, n.bits, key, LimitStreamTime, dd, false, l.interval, now)
	}
}

// StreamTimed reports whether stream-time-per-second is on: whether an
// integration must time the requests that are not over UDP and charge
// them with DebitStreamTime.
func (r *RRL) StreamTimed() bool { return r != nil && r.base.prot.streamScale > 0 }
