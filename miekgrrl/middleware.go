package miekgrrl

import (
	"crypto/tls"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/miekg/dns"
)

// Options tune Middleware. The zero value limits with the RRL alone, without
// cookies and without reporting.
type Options struct {
	// ReportOnly sends every response as the handler wrote it, while still
	// debiting the limiter and reporting through OnDecision what would have
	// been done (Decision.Action). It is for trying limits out.
	ReportOnly bool

	// Cookies, if set, makes the middleware a DNS COOKIE server: a request
	// with a valid server cookie bypasses the limiter, every response to a
	// request with a client cookie gets a fresh server cookie (replacing any
	// COOKIE option the handler set), and a slipped response to such a
	// request is BADCOOKIE rather than TC=1.
	Cookies *Cookies

	// OnDecision, if set, is called once per request for which the handler
	// wrote a response, after the decision and before the write. It runs on
	// the serving goroutines, concurrently: it must be safe for that, and
	// quick. Nil costs nothing; a hook costs no allocation either.
	OnDecision func(Decision)

	// WildcardOrigin, if set, is asked for the wildcard origin of each
	// response to be debited (see Tuple) unless the handler declared one with
	// SetWildcardOrigin. It may return "".
	WildcardOrigin func(req, resp *dns.Msg) string

	// Now is the clock for cookies; nil means time.Now. The limiter has its
	// own (rrl.Config.SetNowFunc).
	Now func() time.Time
}

// Decision tells what the middleware decided for one response.
type Decision struct {
	// Action is what the limiter said: Send, Drop or Slip. In report-only
	// mode the response was sent anyway.
	Action   rrl.Action
	IPReason rrl.IPReason
	RTReason rrl.RTReason

	// Limited is false when a valid server cookie let the request bypass the
	// limiter; Action is then Send and the reasons IPNotReached and
	// RTNotReached. Tuple is filled in either case.
	Limited bool

	Tuple      rrl.ResponseTuple
	Client     netip.Addr
	UDP        bool
	Cookie     CookieState
	ReportOnly bool

	// Request is the query; Response is the handler's answer, not the slip
	// reply. Neither may be kept or changed by the hook.
	Request, Response *dns.Msg
}

// Middleware returns a dns.Handler that serves next behind limiter. For each
// request it captures the response next writes, classifies it with Tuple,
// debits it, and sends it, drops it or sends SlipReply in its place. TCP
// responses are debited too, so requests-per-second applies to them, but the
// core never limits their responses (RTNotUDP). A handler that writes
// nothing gets nothing written for it. With Options.Cookies, a request with a
// valid server cookie is not debited at all: its source cannot be spoofed.
//
// A nil limiter limits nothing: the middleware then only serves cookies.
//
// The ResponseWriter given to next must not be used after next returns,
// unless next hijacked it, as dns.Transfer does: the middleware recycles it.
func Middleware(limiter *rrl.RRL, next dns.Handler, opts Options) dns.Handler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &middleware{limiter: limiter, next: next, opts: opts}
}

type middleware struct {
	limiter *rrl.RRL
	next    dns.Handler
	opts    Options
}

// writers recycles the capturing writers: one per request would otherwise
// be the largest allocation the middleware makes.
var writers = sync.Pool{New: func() any { return new(writer) }}

func (h *middleware) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	cw := writers.Get().(*writer)
	cw.ResponseWriter, cw.h, cw.req = w, h, req
	cw.client, cw.udp = clientAddr(w.RemoteAddr())
	if h.opts.Cookies != nil {
		cw.now = h.opts.Now()
		cw.cookie, cw.cc, cw.hasCC = h.opts.Cookies.check(req, cw.client, cw.now)
	}
	h.next.ServeDNS(cw, req)
	if cw.hijacked {
		return // the handler may still write: leave this writer to it
	}
	*cw = writer{}
	writers.Put(cw)
}

// SetWildcardOrigin tells the middleware around w that the response about to
// be written was synthesised from the wildcard "*.<origin>" (see Tuple). A
// handler calls it before WriteMsg; it reports whether w was a writer of this
// package (possibly under other wrappers that forward the method).
func SetWildcardOrigin(w dns.ResponseWriter, origin string) bool {
	s, ok := w.(interface{ SetWildcardOrigin(string) })
	if ok {
		s.SetWildcardOrigin(origin)
	}
	return ok
}

// writer captures what the inner handler writes for one request.
type writer struct {
	dns.ResponseWriter
	h       *middleware
	req     *dns.Msg
	client  netip.Addr
	udp     bool
	cookie  CookieState
	cc      [clientCookieLen]byte // the request's client cookie, if hasCC
	hasCC   bool
	now     time.Time
	origin  string
	tuple   rrl.ResponseTuple // here, not on the stack, so Debit cannot make it escape
	decided bool
	action  rrl.Action // what to do with this and any later message
	// hijacked is set by Hijack.
	hijacked bool
}

// SetWildcardOrigin implements the method SetWildcardOrigin looks for.
func (w *writer) SetWildcardOrigin(origin string) { w.origin = origin }

// WriteMsg debits the first message and applies the decision to it; later
// messages of the same request (a zone transfer over TCP) follow the first.
func (w *writer) WriteMsg(m *dns.Msg) error {
	if m == nil {
		return w.ResponseWriter.WriteMsg(m)
	}
	switch w.decide(m) {
	case rrl.Drop:
		return nil
	case rrl.Slip:
		return w.ResponseWriter.WriteMsg(w.slipReply(m))
	}
	w.addCookie(m)
	return w.ResponseWriter.WriteMsg(m)
}

// Write is WriteMsg for a handler that packs its own messages. The message
// is unpacked to be classified; one that does not unpack counts as an error
// response.
func (w *writer) Write(b []byte) (int, error) {
	m := new(dns.Msg)
	unpacked := m.Unpack(b) == nil
	if !unpacked {
		m = &dns.Msg{MsgHdr: dns.MsgHdr{Rcode: dns.RcodeServerFailure}}
	}
	switch w.decide(m) {
	case rrl.Drop:
		return len(b), nil
	case rrl.Slip:
		return len(b), w.ResponseWriter.WriteMsg(w.slipReply(m))
	}
	if unpacked && w.needsCookie() {
		w.addCookie(m)
		if packed, err := m.Pack(); err == nil {
			_, err = w.ResponseWriter.Write(packed)
			return len(b), err
		}
	}
	return w.ResponseWriter.Write(b)
}

// decide returns what to do with m: the limiter's action for the first
// message, made Send in report-only mode and over TCP (a TC reply means
// nothing there), and the same action for any later message, except that a
// reply is slipped at most once.
func (w *writer) decide(m *dns.Msg) rrl.Action {
	if w.decided {
		if w.action == rrl.Slip {
			return rrl.Drop
		}
		return w.action
	}
	w.decided = true
	h := w.h
	var ipr rrl.IPReason
	var rtr rrl.RTReason
	limited := w.cookie != CookieValid
	if limited {
		w.tuple = Tuple(w.req, m, w.wildcardOrigin(m))
		w.action, ipr, rtr = h.limiter.DebitAddr(w.client, w.udp, &w.tuple)
	} else {
		w.action, ipr, rtr = rrl.Send, rrl.IPNotReached, rrl.RTNotReached
	}
	if h.opts.OnDecision != nil {
		// Built only for the hook: the struct is large enough to show in profiles.
		d := Decision{Action: w.action, IPReason: ipr, RTReason: rtr, Limited: limited,
			Client: w.client, UDP: w.udp, Cookie: w.cookie, ReportOnly: h.opts.ReportOnly,
			Request: w.req, Response: m}
		if limited {
			d.Tuple = w.tuple
		} else {
			d.Tuple = Tuple(w.req, m, w.wildcardOrigin(m))
		}
		h.opts.OnDecision(d)
	}
	if h.opts.ReportOnly || (!w.udp && w.action == rrl.Slip) {
		w.action = rrl.Send
	}
	return w.action
}

// wildcardOrigin returns what the handler or Options.WildcardOrigin said
// about m's wildcard.
func (w *writer) wildcardOrigin(m *dns.Msg) string {
	if w.origin == "" && w.h.opts.WildcardOrigin != nil {
		return w.h.opts.WildcardOrigin(w.req, m)
	}
	return w.origin
}

// needsCookie reports whether responses to this request carry a server
// cookie: cookies are on and the request had a client cookie.
func (w *writer) needsCookie() bool {
	return w.h.opts.Cookies != nil && w.hasCC && w.client.IsValid()
}

func (w *writer) addCookie(m *dns.Msg) {
	if w.needsCookie() {
		w.h.opts.Cookies.addServerCookie(m, w.req, &w.cc, w.client, w.now)
	}
}

// slipReply is SlipReply with the client cookie decoded when the request
// was checked.
func (w *writer) slipReply(m *dns.Msg) *dns.Msg {
	var cc *[clientCookieLen]byte
	if w.hasCC {
		cc = &w.cc
	}
	return slipReply(w.req, m, w.h.opts.Cookies, cc, w.client, w.now)
}

// Hijack marks the writer as the handler's for good (see ServeDNS).
func (w *writer) Hijack() {
	w.hijacked = true
	w.ResponseWriter.Hijack()
}

// ConnectionState forwards the TLS state of a DNS-over-TLS connection.
func (w *writer) ConnectionState() *tls.ConnectionState {
	if s, ok := w.ResponseWriter.(dns.ConnectionStater); ok {
		return s.ConnectionState()
	}
	return nil
}

// clientAddr returns the client's address without its zone, IPv4-mapped
// IPv6 addresses made IPv4, and whether the transport is UDP.
func clientAddr(a net.Addr) (netip.Addr, bool) {
	switch a := a.(type) {
	case *net.UDPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap().WithZone(""), true
	case *net.TCPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap().WithZone(""), false
	case nil:
		return netip.Addr{}, false
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap().WithZone(""), strings.HasPrefix(a.Network(), "udp")
}
