package miekgrrl

import (
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

// SlipReply builds the small reply sent instead of resp when the limiter
// says Slip. It asks a genuine client to come back in a way a spoofer cannot:
//
//   - when c is not nil and req carries a client cookie: BADCOOKIE (extended
//     rcode 23) with the question, and a COOKIE option echoing the client
//     cookie with a fresh server cookie, so the client can retry over UDP with
//     a server cookie, which exempts it from the response limits in the
//     middleware (RFC 7873 section 5.2.3);
//   - otherwise: TC=1 with the question only, so the client retries over TCP.
//     The rcode is kept for NXDOMAIN and is NOERROR otherwise; AA is cleared
//     since the reply holds no authoritative data. If req had an OPT record
//     the reply has one too, with resp's UDP size and DO bit when resp has an
//     OPT record, and no options.
//
// Header fields come from req (the ID, opcode, RD and CD bits) or, when req
// is nil, from resp. It returns nil when both are nil.
//
// When req is signed with TSIG, the reply ends with a TSIG record naming the
// same key and algorithm (or those of resp's TSIG record, with its error
// code, when the handler signed resp), with the fudge of that record, time
// signed now (or the current time if now is zero) and no MAC: a dns.Server
// with the key in its TsigSecret signs it as it writes it, as it signs any
// reply ending with a TSIG record.
func SlipReply(req, resp *dns.Msg, c *Cookies, client netip.Addr, now time.Time) *dns.Msg {
	rc := slipCookie(req, c, client, now)
	return rc.SlipReply(resp)
}

// TooLargeReply builds the reply sent instead of resp when the limiter
// says Slip with rrl.RTTooLarge (a UDP response longer than
// nocookie-udp-size to a request without a valid server cookie): TC=1
// with the question only, as SlipReply's, and, when c is not nil and req
// carries a client cookie, a COOKIE option with a fresh server cookie, so
// that the client's retry with it gets the whole answer over UDP. Never
// BADCOOKIE: the request was not refused, only too large to answer unproven.
func TooLargeReply(req, resp *dns.Msg, c *Cookies, client netip.Addr, now time.Time) *dns.Msg {
	rc := slipCookie(req, c, client, now)
	return rc.TooLargeReply(resp)
}

// slipCookie is c.Request for SlipReply and TooLargeReply, with now kept
// for a TSIG record even when req has no cookie. A nil c adds no cookie.
func slipCookie(req *dns.Msg, c *Cookies, client netip.Addr, now time.Time) RequestCookie {
	rc := c.Request(req, client, func() time.Time { return now })
	rc.now = now
	return rc
}

// slip holds a slip reply and everything it points to, so that building one
// costs a single allocation (and one more for a cookie's text): under a flood
// slip replies are what the server mostly sends.
type slip struct {
	msg    dns.Msg
	q      [1]dns.Question
	extra  [2]dns.RR
	opt    dns.OPT
	opts   [1]dns.EDNS0
	cookie dns.EDNS0_COOKIE
	text   [cookieTextLen]byte // the cookie's text
}

// slipReply is SlipReply with the client cookie already decoded: BADCOOKIE
// when c and cc are set, TC otherwise; with tooLarge, TooLargeReply: TC,
// with a server cookie when c and cc are set.
func slipReply(req, resp *dns.Msg, c *Cookies, cc *[clientCookieLen]byte, client netip.Addr, now time.Time, tooLarge bool) *dns.Msg {
	base := req
	if base == nil {
		base = resp
	}
	if base == nil {
		return nil
	}
	s := new(slip)
	m := &s.msg
	m.Id = base.Id
	m.Response = true
	m.Opcode = base.Opcode
	m.RecursionDesired = base.RecursionDesired
	m.CheckingDisabled = base.CheckingDisabled
	if q, ok := question(base, orEmpty(resp)); ok {
		s.q[0] = q
		m.Question = s.q[:]
	}

	withCookie := c != nil && cc != nil && client.IsValid()
	if withCookie && !tooLarge {
		m.Rcode = dns.RcodeBadCookie
		s.setOPT(findOPT(req), nil)
		s.opts[0] = c.freshCookie(&s.cookie, &s.text, cc, client, now)
		s.opt.Option = s.opts[:]
		s.setTSIG(req, resp, now)
		return m
	}

	m.Truncated = true
	if resp != nil && resp.Rcode == dns.RcodeNameError {
		m.Rcode = dns.RcodeNameError
	}
	if reqOPT := findOPT(req); reqOPT != nil {
		s.setOPT(reqOPT, findOPT(resp))
		if withCookie {
			s.opts[0] = c.freshCookie(&s.cookie, &s.text, cc, client, now)
			s.opt.Option = s.opts[:]
		}
	}
	s.setTSIG(req, resp, now)
	return m
}

// setTSIG ends the reply with an unsigned TSIG record when req is signed
// (see SlipReply).
func (s *slip) setTSIG(req, resp *dns.Msg, now time.Time) {
	if req == nil || req.IsTsig() == nil {
		return
	}
	from := req.IsTsig()
	var rcode uint16
	if t := orEmpty(resp).IsTsig(); t != nil {
		from, rcode = t, t.Error
	}
	if now.IsZero() {
		now = time.Now()
	}
	fudge := from.Fudge
	if fudge == 0 {
		fudge = 300
	}
	tsig := &dns.TSIG{ // allocated apart: rare, and large
		Hdr:        dns.RR_Header{Name: from.Hdr.Name, Rrtype: dns.TypeTSIG, Class: dns.ClassANY},
		Algorithm:  from.Algorithm,
		Fudge:      fudge,
		TimeSigned: uint64(now.Unix()),
		OrigId:     s.msg.Id,
		Error:      rcode,
	}
	s.msg.Extra = append(s.extra[:len(s.msg.Extra)], tsig)
}

// setOPT gives the reply an OPT record without options: resp's UDP size and
// DO bit when the handler chose them, else ours and the request's.
func (s *slip) setOPT(reqOPT, respOPT *dns.OPT) {
	s.opt.Hdr = dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}
	switch {
	case respOPT != nil:
		s.opt.SetUDPSize(respOPT.UDPSize())
		if respOPT.Do() {
			s.opt.SetDo()
		}
	default:
		s.opt.SetUDPSize(defaultUDPSize)
		if reqOPT != nil && reqOPT.Do() {
			s.opt.SetDo()
		}
	}
	s.extra[0] = &s.opt
	s.msg.Extra = s.extra[:1]
}

var emptyMsg dns.Msg

// orEmpty lets question() read a message that may be nil.
func orEmpty(m *dns.Msg) *dns.Msg {
	if m == nil {
		return &emptyMsg
	}
	return m
}
