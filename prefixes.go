package rrl

import (
	"encoding/binary"
	"net/netip"
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

// NoCookieUDPSize returns the RRL's nocookie-udp-size, 0 when off, so that
// an integration that holds only the RRL can size its truncated replies.
func (r *RRL) NoCookieUDPSize() int {
	if r == nil {
		return 0
	}
	return r.base.prot.noCookie
}

// NeedsResponseSize reports whether the RRL reads ResponseTuple.Size:
// whether nocookie-udp-size or all-bytes-per-second is on. An integration
// for which a response's length costs work can leave Size 0 otherwise.
func (r *RRL) NeedsResponseSize() bool {
	return r != nil && (r.base.prot.noCookie > 0 || r.base.prot.nsPerByte > 0)
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
	al := r.allowances()
	lv := &al.prot.levels[fam]
	ipr := IPNotConfigured
	l := al.limits[LimitRequests]
	key := uint64(0)
	if l.on() {
		key = r.hash.account(n, LimitRequests, 0, 0, "")
		if r.chargeKey(&n, n.bits, key, LimitRequests, l, now, s, true) {
			return IPRateLimit, RequestRefusal{Limit: LimitRequests}
		}
		ipr = IPOk
	}
	var keys [MaxRequestPrefixes]uint64 // those charged, for a refund
	for i := range lv.level[:lv.n] {
		le := &lv.level[i]
		keys[i] = r.hash.prefixOf(whole.hi&le.hiMask, whole.lo&le.loMask, le.meta)
		if !r.chargeKey(&whole, le.bits, keys[i], kind, le.limit, now, s, true) {
			ipr = IPOk
			continue
		}
		s.prot.prefixDrops[fam][le.index].Add(1)
		if l.on() {
			r.accounts.refund(key, LimitRequests, l, now)
		}
		for j := range i {
			r.accounts.refund(keys[j], kind, lv.level[j].limit, now)
		}
		return IPRateLimit, RequestRefusal{Limit: kind, Prefix: int(le.index)}
	}
	return ipr, RequestRefusal{}
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

// chargeBytes debits the network's all-bytes-per-second account by the
// response's length (see allowances.bytesLimit) and reports whether it is
// in debt. Like all-per-second it charges every response, sent or not, so
// that the network of a victim stays limited for as long as a flood lasts.
// decides is false when all-per-second already refused the response (see
// limitedRecord.note).
func (r *RRL) chargeBytes(n network, al *allowances, size int, now int64, s *stripe, decides bool) bool {
	key := r.hash.account(n, LimitAllBytes, 0, 0, "")
	return r.chargeKey(&n, n.bits, key, LimitAllBytes, al.bytesLimit(size), now, s, decides)
}
