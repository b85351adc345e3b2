package rrl

import "net/netip"

// DebitSentBytes charges src's network, on its all-bytes-per-second
// account, with extra bytes that a UDP response came to on the wire beyond
// the Size it was debited with. It is for a server in which something
// after the decision still adds to the message: CoreDNS's nsid plugin, for
// one, adds its option to every response it sees, after the rrl plugin has
// decided. The server measures the message as it went out and charges the
// difference, so that the account holds the bytes actually sent: each
// decision then weighs every response sent before it exactly, and the
// bytes sent stay within the allowance plus the last response let through.
//
// It decides and counts nothing: the response has gone. It charges nothing
// when extra is not positive, when all-bytes-per-second is off, or for a
// client in exempt-clients. A charge that puts the account in debt starts
// a limiting episode as a Debit's would, seen by the observer and the
// record of limited accounts.
func (r *RRL) DebitSentBytes(src netip.Addr, extra int) {
	if r == nil || extra <= 0 {
		return
	}
	al := r.allowances()
	if al.prot.nsPerByte <= 0 || (len(r.cfg.exempt) > 0 && r.isExempt(src)) {
		return
	}
	n, now := r.nets.networkOf(src), r.now()
	key := r.hash.account(n, LimitAllBytes, 0, 0, "")
	l := al.extraBytesLimit(extra)
	d := r.accounts.debit(key, LimitAllBytes, now, l, r.stats.pick())
	if r.telling.Load() {
		r.tellKey(&n, n.bits, key, LimitAllBytes, d, false, l.interval, now)
	}
}
