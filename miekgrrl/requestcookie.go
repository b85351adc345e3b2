package miekgrrl

import (
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

// RequestCookie is the DNS COOKIE option of one request, decoded once by
// Cookies.Request, and what the replies to that request need of it: its
// state, the client cookie, and the request's server cookie when it may be
// sent back as it came. It is the one cookie path of Middleware and of the
// CoreDNS plugin. It is a small value, meant to live in the state of one
// request; its zero value is a request without a COOKIE option.
type RequestCookie struct {
	cookieInfo
	c      *Cookies
	req    *dns.Msg
	client netip.Addr
	now    time.Time // read when the request has a COOKIE option
}

// Request decodes the COOKIE option of req, sent from client, once, and
// classifies it as Check does. now is read only when req has a COOKIE
// option (reading the clock costs more than the rest of the check); nil
// means time.Now. A nil c checks nothing: a server cookie is CookieBad and
// replies get no cookie.
func (c *Cookies) Request(req *dns.Msg, client netip.Addr, now func() time.Time) RequestCookie {
	if now == nil {
		now = time.Now
	}
	rc := RequestCookie{c: c, req: req, client: client}
	if o, n := cookieOptions(req); n > 0 {
		rc.now = now()
		rc.cookieInfo = c.classify(o, n, client, rc.now)
	}
	return rc
}

// State is what the request's COOKIE option amounts to (see Check).
func (rc *RequestCookie) State() CookieState { return rc.state }

// Malformed reports whether the request's COOKIE option is one that RFC
// 7873 section 5.2.2 says to answer with FORMERR (see MalformedCookie and
// MalformedCookieReply).
func (rc *RequestCookie) Malformed() bool { return rc.malformed }

// Reply returns resp, the response to the request, as it is to be sent: when
// the request has a usable client cookie (and Cookies and the client address
// are set), a copy of resp whose OPT record carries that client cookie and a
// server cookie, else resp itself. The server cookie is the request's own,
// as it came, when it is valid, made with the current secret and less than
// half an hour old (RFC 9018 section 4.3), and a fresh one otherwise. Making
// the copy costs one allocation in the usual cases; resp, its records and
// their arrays are left as they were (see Middleware), so a handler may send
// one message to many clients. When truncate is set (a response over UDP)
// the copy is cut (dns.Msg.Truncate) to the payload size the client
// advertised, since the cookie makes it longer; the CoreDNS plugin leaves
// that to the server, which truncates every response it writes.
func (rc *RequestCookie) Reply(resp *dns.Msg, truncate bool) *dns.Msg {
	if resp == nil || rc.c == nil || !rc.hasCC || !rc.client.IsValid() {
		return resp
	}
	r := new(cookieReply)
	o := rc.opt
	if !rc.resend {
		o = rc.c.freshCookie(&r.cookie, &r.text, &rc.cc, rc.client, rc.now)
	}
	out := r.attach(rc.req, resp, o)
	if truncate {
		if size := udpSize(rc.req); uncompressedLen(out, &r.opt) > size {
			out.Truncate(size)
		}
	}
	return out
}

// SlipReply is SlipReply for the request, with the client cookie decoded
// when the request was: BADCOOKIE with a fresh server cookie when the
// request has a usable client cookie and Cookies are set, TC=1 otherwise.
// A TSIG record's time signed is the time read by Request, or the current
// time when the request had no COOKIE option.
func (rc *RequestCookie) SlipReply(resp *dns.Msg) *dns.Msg {
	return rc.slip(resp, false)
}

// TooLargeReply is TooLargeReply for the request, with the client cookie
// decoded when the request was: TC=1, with a fresh server cookie when the
// request has a usable client cookie and Cookies are set.
func (rc *RequestCookie) TooLargeReply(resp *dns.Msg) *dns.Msg {
	return rc.slip(resp, true)
}

func (rc *RequestCookie) slip(resp *dns.Msg, tooLarge bool) *dns.Msg {
	var cc *[clientCookieLen]byte
	if rc.hasCC {
		cc = &rc.cc
	}
	return slipReply(rc.req, resp, rc.c, cc, rc.client, rc.now, tooLarge)
}
