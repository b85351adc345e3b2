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
//     a server cookie, which the middleware does not limit (RFC 7873 section
//     5.2.3);
//   - otherwise: TC=1 with the question only, so the client retries over TCP.
//     The rcode is kept for NXDOMAIN and is NOERROR otherwise; AA is cleared
//     since the reply holds no authoritative data. If req had an OPT record
//     the reply has one too, with resp's UDP size and DO bit when resp has an
//     OPT record, and no options.
//
// Header fields come from req (the ID, opcode, RD and CD bits) or, when req
// is nil, from resp. It returns nil when both are nil.
func SlipReply(req, resp *dns.Msg, c *Cookies, client netip.Addr, now time.Time) *dns.Msg {
	base := req
	if base == nil {
		base = resp
	}
	if base == nil {
		return nil
	}
	m := new(dns.Msg)
	m.Id = base.Id
	m.Response = true
	m.Opcode = base.Opcode
	m.RecursionDesired = base.RecursionDesired
	m.CheckingDisabled = base.CheckingDisabled
	if q, ok := question(base, orEmpty(resp)); ok {
		m.Question = []dns.Question{q}
	}

	if c != nil && client.IsValid() {
		if _, ok := clientCookie(req); ok {
			m.Rcode = dns.RcodeBadCookie
			c.AddServerCookie(m, req, client, now)
			return m
		}
	}

	m.Truncated = true
	if resp != nil && resp.Rcode == dns.RcodeNameError {
		m.Rcode = dns.RcodeNameError
	}
	if reqOPT := findOPT(req); reqOPT != nil {
		m.Extra = []dns.RR{slipOPT(reqOPT, findOPT(resp))}
	}
	return m
}

// slipOPT returns the OPT record of a TC reply: resp's UDP size and DO bit
// when the handler chose them, else ours and the request's.
func slipOPT(reqOPT, respOPT *dns.OPT) *dns.OPT {
	if respOPT == nil {
		return newOPT(reqOPT)
	}
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	opt.SetUDPSize(respOPT.UDPSize())
	if respOPT.Do() {
		opt.SetDo()
	}
	return opt
}

var emptyMsg dns.Msg

// orEmpty lets question() read a message that may be nil.
func orEmpty(m *dns.Msg) *dns.Msg {
	if m == nil {
		return &emptyMsg
	}
	return m
}
