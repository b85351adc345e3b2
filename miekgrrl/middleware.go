package miekgrrl

import (
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/miekg/dns"
)

// Options tune Middleware. The zero value limits with the RRL alone, without
// cookies and without reporting.
type Options struct {
	// ReportOnly serves every request and sends every response as the
	// handler wrote it, while still debiting the limiter and reporting
	// through OnDecision what would have been done (Decision.Action). It is
	// for trying limits out.
	ReportOnly bool

	// Cookies, if set, makes the middleware a DNS COOKIE server: a request
	// with a valid server cookie proves its source address, so it is held
	// to the request limits (proven-requests-per-second) but exempt from
	// the response limits; every response to a request with a client cookie
	// gets a server cookie (replacing any COOKIE option the handler set):
	// the request's own, as it came, if it is valid, made with the current
	// secret and under half an hour old, else a fresh one. A slipped
	// response to such a request is BADCOOKIE rather than TC=1, and a
	// request with a malformed COOKIE option gets FORMERR.
	Cookies *Cookies

	// OnDecision, if set, is called once per request that was decided: when
	// its request limit refuses it, before the handler would run
	// (Decision.RequestDropped), or else when the handler writes its first
	// response, before the write. A request that is served and answered
	// with nothing gets no call. A reader made by DecorateReader with these
	// Options calls it for each request it refuses as it reads it
	// (Decision.AtRead), before the middleware would see it. It runs on the
	// serving goroutines (and the reading ones), concurrently: it must be
	// safe for that, and quick. Nil costs nothing; a hook costs no
	// allocation either.
	OnDecision func(Decision)

	// WildcardOrigin, if set, is asked for the wildcard origin of each
	// response to be debited (see Tuple) unless the handler declared one with
	// SetWildcardOrigin. It may return "".
	WildcardOrigin func(req, resp *dns.Msg) string

	// Now is the clock for cookies; nil means time.Now. The limiter has its
	// own (rrl.Config.SetNowFunc).
	Now func() time.Time

	// ChargedAtRead tells Middleware that the requests it serves have been
	// charged to their request limit as the server read them, by a reader
	// that DecorateReader made with the same limiter and Options, which
	// refused those over their limit and reported them (Decision.AtRead).
	// The middleware then charges no request itself, so that each is
	// charged once, and lets every one through. Every server that serves
	// through the middleware must then read through such a reader, over UDP
	// and TCP alike: a request that came another way is not charged at
	// all. The response to a request with a valid server cookie, which is
	// not debited, is reported with IPReason IPNotReached, since the
	// middleware did not consult the request limit (the reader did, and let
	// the request through). In report-only mode (ReportOnly) the field is
	// ignored: DecorateReader then charges nothing, and the middleware
	// charges and reports as it does without it.
	ChargedAtRead bool

	// RefusedNetwork, if set, is called for each unproven UDP request that
	// a request limit refuses (requests-per-second, or a request prefix),
	// with the network of the account that refused it
	// (rrl.RRL.RefusalNetwork), wherever it is refused: in the middleware
	// or by a reader that DecorateReader made. It is the feed of a kernel
	// drop list, such as the Refused method of a
	// github.com/dnsrrl/rrl/kerneldrop List, which keeps a network that
	// keeps being refused out of the server altogether for a while. It is
	// called in report-only mode too (open such a list report-only then).
	// Like OnDecision it runs on the serving goroutines, concurrently.
	RefusedNetwork func(netip.Prefix)
}

// chargeRequest charges a request from client to its request limits, as
// limiter.DebitRequestLimit does, and tells opts.RefusedNetwork of an
// unproven UDP one they refused. It returns the limit that refused it,
// if one did.
func chargeRequest(limiter *rrl.RRL, opts *Options, client netip.Addr, udp, proven bool) (rrl.Action, rrl.IPReason, rrl.RequestRefusal) {
	act, ipr, why := limiter.DebitRequestLimit(client, udp, proven)
	if opts.RefusedNetwork != nil && act == rrl.Drop && udp && !proven {
		if network, ok := limiter.RefusalNetwork(client, why); ok {
			opts.RefusedNetwork(network)
		}
	}
	return act, ipr, why
}

// Decision tells what the middleware decided for one request and its
// response.
type Decision struct {
	// Action is what the limiter said: Send, Drop or Slip. In report-only
	// mode the request was served and the response sent anyway.
	Action   rrl.Action
	IPReason rrl.IPReason
	RTReason rrl.RTReason

	// RequestDropped is set when the request limit (requests-per-second,
	// or proven-requests-per-second for a proven source) refused the
	// request as it arrived: the handler was not called, nothing was sent
	// over UDP and a connection (TCP, TLS) was closed (in report-only mode the
	// request was served all the same, and its response not debited).
	// Action is then Drop, IPReason IPRateLimit, RTReason RTNotReached;
	// Response is nil and Tuple zero.
	RequestDropped bool

	// RequestLimit names, when RequestDropped is set, the limit that
	// refused the request: its Limit is rrl.LimitStreamTime for a stream
	// request of a network over stream-time-per-second, otherwise a
	// request limit's (see rrl.RRL.DebitRequestLimit).
	RequestLimit rrl.RequestRefusal

	// AtRead is set when the request was refused by a reader that
	// DecorateReader made, as the server read it, before it was unpacked:
	// Request is then nil, and Cookie is read from the packet's OPT record
	// (CookieNone without Options.Cookies). RequestDropped is set too.
	AtRead bool

	// Limited is false when a valid server cookie exempted the response
	// from the response limits: the request limit still applied, and
	// IPReason is what it said (IPOk, IPNotConfigured when no request limit
	// is set, or IPExempt); Action is Send and RTReason RTNotReached. Tuple
	// is filled in either case.
	Limited bool

	Tuple      rrl.ResponseTuple
	Client     netip.Addr
	UDP        bool
	Cookie     CookieState
	ReportOnly bool

	// Request is the query; Response is the handler's answer (or the
	// middleware's own, for the requests it answers itself), not the slip
	// reply nor the copy that carries a server cookie, and nil when the
	// request was dropped before the handler. Request is nil for a request
	// refused as it was read (AtRead). Neither may be kept or changed by
	// the hook.
	Request, Response *dns.Msg
}

// Middleware returns a dns.Handler that serves next behind limiter. It
// charges each request as it arrives (rrl.RRL.DebitRequest), before next is
// called: a request over its request limit (requests-per-second, or
// proven-requests-per-second for a request over TCP or with a valid server
// cookie) never reaches next; over UDP nothing is sent, and a connection
// (DNS over TCP or TLS, or any other transport that is not UDP, as
// rrl.Source reads the RemoteAddr) is closed. Then it captures the response
// next writes, classifies it with Tuple, debits it (rrl.RRL.DebitResponse),
// and sends it, drops it or sends SlipReply in its place. The core never
// limits TCP responses (RTNotUDP). A UDP response longer than the
// limiter's nocookie-udp-size, to a request without a valid server
// cookie, is replaced by TooLargeReply: TC=1 with a server cookie when the
// client sent a cookie, so that its retry, with the cookie or over TCP,
// gets the whole answer. A handler that writes nothing gets
// nothing written for it. With Options.Cookies, the response to a request
// with a valid server cookie is not debited: its source cannot be spoofed,
// so it cannot be the victim of a reflection; the request limit holds it
// all the same, since that limit is about load.
//
// The middleware never changes the messages the handler writes: to add a
// server cookie it sends a copy, with its own additional section and OPT
// record, so a handler may write one prebuilt message to every client. Over
// UDP that copy is truncated (dns.Msg.Truncate) to the payload size the
// client advertised (512 bytes without EDNS), since the cookie makes it
// longer; a message signed with TSIG is not, as package dns truncates none.
//
// Some requests never reach next; the middleware answers them itself, once
// their request limit let them through, and debits the answer like any
// other:
//
//   - with Options.Cookies, a request with a malformed COOKIE option (see
//     MalformedCookie) gets FORMERR (RFC 7873 section 5.2.2);
//   - a request without a question (see AcceptCookieOnly) gets NOERROR and
//     a server cookie if it is a query with a client cookie and cookies are
//     on (a cookie-only exchange, RFC 7873 section 5.4), FORMERR otherwise.
//
// A nil limiter limits nothing: the middleware then only serves cookies.
//
// With stream-time-per-second set in the limiter's Config, the middleware
// times each request that is not over UDP, from its arrival in the
// middleware until next returns (wall time: see rrl.RRL.DebitStreamTime),
// and charges the time to the client's network; a network over that
// budget has its stream requests refused as a request limit refuses them,
// before next is called. A handler that hijacks the writer is charged
// until it returns, not for what it writes after.
//
// With Options.ChargedAtRead the request limits are left to the servers'
// readers (DecorateReader), which refuse a request over its limit before
// it is unpacked: the middleware then charges no request, and serves every
// one that reaches it as one its request limit let through.
//
// The ResponseWriter given to next must not be used after next returns,
// unless next hijacked it, as dns.Transfer does: the middleware recycles
// what is behind it. Writes through it then fail with ErrWriterDone and
// reach no one.
func Middleware(limiter *rrl.RRL, next dns.Handler, opts Options) dns.Handler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &middleware{limiter: limiter, next: next, opts: opts, timed: limiter.StreamTimed()}
}

// ErrWriterDone is what writes return through a ResponseWriter that the
// middleware gave a handler, once the handler has returned without
// hijacking it.
var ErrWriterDone = errors.New("miekgrrl: ResponseWriter used after the handler returned")

type middleware struct {
	limiter *rrl.RRL
	next    dns.Handler
	opts    Options
	timed   bool // stream-time-per-second is on: stream requests are timed
}

// writers recycles the capturing writers: one per request would otherwise
// be the largest allocation the middleware makes.
var writers = sync.Pool{New: func() any { return new(writer) }}

func (h *middleware) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	if req == nil {
		return // nothing to answer: no ID to answer with
	}
	cw := writers.Get().(*writer)
	s := &cw.s
	s.rw, s.h, s.req = w, h, req
	s.remote = w.RemoteAddr()
	s.client, s.udp = clientAddr(s.remote)
	s.stream = onStream(s.remote, s.udp)
	if h.opts.Cookies != nil {
		s.ck = h.opts.Cookies.Request(req, s.client, h.opts.Now)
	} else {
		s.ck = RequestCookie{req: req, client: s.client} // no cookie state: slips are TC
	}
	var start time.Time
	if h.timed && !s.udp {
		start = time.Now() // only for stream requests: UDP pays nothing for it
	}
	if s.admit() {
		// Read before serving: a handler that hijacks the writer may
		// still use the state after it returns. A request refused but
		// served in report-only mode is not charged: enforced, it would
		// have cost nothing.
		charge, client := h.timed && !s.udp && s.reqIP != rrl.IPRateLimit, s.client
		h.serve(cw, req)
		if charge {
			h.limiter.DebitStreamTime(client, time.Since(start))
		}
	}
	cw.mu.Lock()
	if cw.hijacked {
		cw.mu.Unlock()
		return // the handler may still write: leave this writer to it
	}
	cw.gen++
	cw.s = state{}
	cw.mu.Unlock()
	writers.Put(cw)
}

// serve answers a request that its request limit let through: the
// middleware answers the requests it must (see Middleware), the handler
// the others.
func (h *middleware) serve(cw *writer, req *dns.Msg) {
	s := &cw.s
	switch {
	case s.ck.malformed:
		s.writeMsg(MalformedCookieReply(req))
	case len(req.Question) == 0:
		rcode := dns.RcodeFormatError
		if req.Opcode == dns.OpcodeQuery && s.needsCookie() {
			rcode = dns.RcodeSuccess
		}
		s.writeMsg(replyWithOPT(req, rcode))
	default:
		// The handler gets a handle that stops working when it returns, so
		// that a late write cannot go through the recycled writer.
		h.next.ServeDNS(&handle{w: cw, gen: cw.gen}, req)
	}
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

// writer is what the middleware recycles: the state of one request, and
// what tells the handles of earlier requests apart from the current one.
type writer struct {
	mu       sync.Mutex // held by every call through a handle, and to recycle
	gen      uint64     // generation: incremented when recycled
	hijacked bool
	s        state
}

// state is what the middleware knows of one request and its response.
type state struct {
	rw       dns.ResponseWriter // the server's writer
	h        *middleware
	req      *dns.Msg
	remote   net.Addr
	client   netip.Addr
	udp      bool // as the core reads the source: what the limiter is told
	stream   bool // on a connection (onStream): what writing the response goes by
	ck       RequestCookie
	origin   string
	tuple    rrl.ResponseTuple // here, not on the stack, so Debit cannot make it escape
	reqIP    rrl.IPReason      // what the request limit said
	decided  bool
	action   rrl.Action // what to do with this and any later message
	tooLarge bool       // the action is Slip for nocookie-udp-size (rrl.RTTooLarge)
}

// handle is the ResponseWriter a handler gets: it works while its writer is
// in the generation it was made for, that is until the handler returns
// (unless it hijacked the writer, which is then never recycled).
type handle struct {
	w   *writer
	gen uint64
}

// lock locks the writer and returns the request's state, or nil (with the
// writer unlocked) if the handle is stale.
func (hd *handle) lock() *state {
	hd.w.mu.Lock()
	if hd.w.gen != hd.gen {
		hd.w.mu.Unlock()
		return nil
	}
	return &hd.w.s
}

func (hd *handle) unlock() { hd.w.mu.Unlock() }

// WriteMsg debits the first message and applies the decision to it; later
// messages of the same request (a zone transfer over TCP) follow the first.
func (hd *handle) WriteMsg(m *dns.Msg) error {
	s := hd.lock()
	if s == nil {
		return ErrWriterDone
	}
	defer hd.unlock()
	return s.writeMsg(m)
}

// Write is WriteMsg for a handler that packs its own messages. The message
// is unpacked to be classified; one that does not unpack counts as an error
// response.
func (hd *handle) Write(b []byte) (int, error) {
	s := hd.lock()
	if s == nil {
		return 0, ErrWriterDone
	}
	defer hd.unlock()
	return s.write(b)
}

// deadAddr is the address of a stale handle.
type deadAddr struct{}

func (deadAddr) Network() string { return "none" }
func (deadAddr) String() string  { return "none" }

func (hd *handle) LocalAddr() net.Addr {
	s := hd.lock()
	if s == nil {
		return deadAddr{}
	}
	defer hd.unlock()
	return s.rw.LocalAddr()
}

func (hd *handle) RemoteAddr() net.Addr {
	s := hd.lock()
	if s == nil {
		return deadAddr{}
	}
	defer hd.unlock()
	return s.remote
}

func (hd *handle) Close() error {
	s := hd.lock()
	if s == nil {
		return ErrWriterDone
	}
	defer hd.unlock()
	return s.rw.Close()
}

func (hd *handle) TsigStatus() error {
	s := hd.lock()
	if s == nil {
		return ErrWriterDone
	}
	defer hd.unlock()
	return s.rw.TsigStatus()
}

func (hd *handle) TsigTimersOnly(b bool) {
	if s := hd.lock(); s != nil {
		s.rw.TsigTimersOnly(b)
		hd.unlock()
	}
}

// Hijack marks the writer as the handler's for good (see ServeDNS).
func (hd *handle) Hijack() {
	if s := hd.lock(); s != nil {
		hd.w.hijacked = true
		s.rw.Hijack()
		hd.unlock()
	}
}

// ConnectionState forwards the TLS state of a DNS-over-TLS connection.
func (hd *handle) ConnectionState() *tls.ConnectionState {
	s := hd.lock()
	if s == nil {
		return nil
	}
	defer hd.unlock()
	if cs, ok := s.rw.(dns.ConnectionStater); ok {
		return cs.ConnectionState()
	}
	return nil
}

// SetWildcardOrigin implements the method SetWildcardOrigin looks for.
func (hd *handle) SetWildcardOrigin(origin string) {
	if s := hd.lock(); s != nil {
		s.origin = origin
		hd.unlock()
	}
}

// admit charges the request to its request limit and reports whether to
// serve it. A request it refuses is decided here: Drop, reported to the hook,
// and its TCP connection closed; in report-only mode it is served all the
// same, and its response sent without being debited, as the response that
// would not have existed.
func (s *state) admit() bool {
	h := s.h
	if h.opts.ChargedAtRead && !h.opts.ReportOnly {
		s.reqIP = rrl.IPNotReached // the reader charged the request and let it through
		return true
	}
	act, ipr, why := chargeRequest(h.limiter, &h.opts, s.client, s.udp, s.ck.state == CookieValid)
	s.reqIP = ipr
	if act == rrl.Send {
		return true
	}
	if h.opts.OnDecision != nil {
		h.opts.OnDecision(Decision{Action: rrl.Drop, IPReason: ipr, RTReason: rrl.RTNotReached,
			RequestDropped: true, RequestLimit: why, Limited: true, Client: s.client, UDP: s.udp, Cookie: s.ck.state,
			ReportOnly: h.opts.ReportOnly, Request: s.req})
	}
	if h.opts.ReportOnly {
		s.decided, s.action = true, rrl.Send
		return true
	}
	if s.stream {
		s.rw.Close() // nothing will be written: free the connection now
	}
	return false
}

// onStream reports whether a request from remote came on a connection:
// TCP and TLS (a *net.TCPAddr, even one without a usable IP, which the core
// reads as UDP), a Unix socket of streams or of sequenced packets (which
// has no IP either), and any other transport the core does not read as
// UDP. A refused request closes its connection, and a response on one is
// never truncated nor slipped, whatever the core's reading of the source.
func onStream(remote net.Addr, udp bool) bool {
	switch a := remote.(type) {
	case *net.TCPAddr:
		return true
	case *net.UnixAddr:
		return a != nil && (a.Net == "unix" || a.Net == "unixpacket")
	}
	return !udp
}

func (s *state) writeMsg(m *dns.Msg) error {
	if m == nil {
		return s.rw.WriteMsg(m)
	}
	// The message is weighed as it goes out, server cookie and all; it is
	// made ahead of the decision only when the decision weighs it.
	var out *dns.Msg
	size := 0
	if s.weighs() {
		out = s.outgoing(m)
		size = out.Len()
	}
	switch s.decide(m, size) {
	case rrl.Drop:
		return s.drop()
	case rrl.Slip:
		return s.rw.WriteMsg(s.slipReply(m))
	}
	if out == nil {
		out = s.outgoing(m)
	}
	return s.rw.WriteMsg(out)
}

// outgoing returns m as it is sent: a copy with a server cookie when the
// request carried a client cookie (withCookie), else m.
func (s *state) outgoing(m *dns.Msg) *dns.Msg {
	if s.needsCookie() {
		return s.withCookie(m)
	}
	return m
}

// outgoingBytes is outgoing for a message the handler wrote packed, as b:
// repacked with a server cookie when it needs one, else b as it came. A
// message signed with TSIG goes as it is: a cookie added to it would not
// match its MAC.
func (s *state) outgoingBytes(m *dns.Msg, b []byte, unpacked bool) []byte {
	if !unpacked || !s.needsCookie() || m.IsTsig() != nil {
		return b
	}
	out := s.withCookie(m)
	out.Compress = true
	if packed, err := out.Pack(); err == nil {
		return packed
	}
	return b
}

// weighs reports whether the decision still to be made reads the length
// of the response: nocookie-udp-size or all-bytes-per-second is on, and
// the response goes over UDP (as the core reads the source) to a request
// not proven by a server cookie.
func (s *state) weighs() bool {
	return !s.decided && s.udp && s.ck.state != CookieValid && s.h.limiter.NeedsResponseSize()
}

// drop writes nothing for a dropped response. On a connection (a stream
// whose address the core cannot read, and so limits as UDP) it closes the
// connection, as for a refused request, rather than leave the client
// waiting for an answer that will not come.
func (s *state) drop() error {
	if s.stream {
		return s.rw.Close()
	}
	return nil
}

func (s *state) write(b []byte) (int, error) {
	m := new(dns.Msg)
	unpacked := m.Unpack(b) == nil
	if !unpacked {
		m = &dns.Msg{MsgHdr: dns.MsgHdr{Rcode: dns.RcodeServerFailure}}
	}
	var out []byte // as in writeMsg: weighed as it goes out
	size := len(b)
	if s.weighs() {
		out = s.outgoingBytes(m, b, unpacked)
		size = len(out)
	}
	switch s.decide(m, size) {
	case rrl.Drop:
		return len(b), s.drop()
	case rrl.Slip:
		return len(b), s.rw.WriteMsg(s.slipReply(m))
	}
	if out == nil {
		out = s.outgoingBytes(m, b, unpacked)
	}
	_, err := s.rw.Write(out)
	return len(b), err
}

// decide returns what to do with m, which goes out as size bytes (server
// cookie and all; read only when the limiter weighs responses): the
// limiter's action for the first
// message, made Send in report-only mode and over TCP (a TC reply means
// nothing there), and the same action for any later message, except that a
// reply is slipped at most once.
func (s *state) decide(m *dns.Msg, size int) rrl.Action {
	if s.decided {
		if s.action == rrl.Slip {
			return rrl.Drop
		}
		return s.action
	}
	s.decided = true
	h := s.h
	var ipr rrl.IPReason
	var rtr rrl.RTReason
	limited := s.ck.state != CookieValid
	if limited {
		s.tuple = Tuple(s.req, m, s.wildcardOrigin(m))
		if h.limiter.NeedsResponseSize() {
			s.tuple.Size = size
		}
		s.action, ipr, rtr = h.limiter.DebitResponseAddr(s.client, s.udp, &s.tuple)
		s.tooLarge = rtr == rrl.RTTooLarge
	} else {
		// A proven source: exempt from the response limits, held only to
		// the request limit it has passed.
		s.action, ipr, rtr = rrl.Send, s.reqIP, rrl.RTNotReached
	}
	if h.opts.OnDecision != nil {
		// Built only for the hook: the struct is large enough to show in profiles.
		d := Decision{Action: s.action, IPReason: ipr, RTReason: rtr, Limited: limited,
			Client: s.client, UDP: s.udp, Cookie: s.ck.state, ReportOnly: h.opts.ReportOnly,
			Request: s.req, Response: m}
		if limited {
			d.Tuple = s.tuple
		} else {
			d.Tuple = Tuple(s.req, m, s.wildcardOrigin(m))
		}
		h.opts.OnDecision(d)
	}
	if h.opts.ReportOnly || (s.stream && s.action == rrl.Slip) {
		s.action = rrl.Send
	}
	return s.action
}

// wildcardOrigin returns what the handler or Options.WildcardOrigin said
// about m's wildcard.
func (s *state) wildcardOrigin(m *dns.Msg) string {
	if s.origin == "" && s.h.opts.WildcardOrigin != nil {
		return s.h.opts.WildcardOrigin(s.req, m)
	}
	return s.origin
}

// needsCookie reports whether responses to this request carry a server
// cookie: cookies are on and the request had a client cookie.
func (s *state) needsCookie() bool {
	return s.h.opts.Cookies != nil && s.ck.hasCC && s.client.IsValid()
}

// withCookie returns a copy of m with a server cookie (RequestCookie.Reply),
// truncated over UDP to the client's payload size.
func (s *state) withCookie(m *dns.Msg) *dns.Msg {
	return s.ck.Reply(m, !s.stream)
}

// slipReply is SlipReply with the cookie decoded when the request came.
func (s *state) slipReply(m *dns.Msg) *dns.Msg {
	if s.ck.now.IsZero() && s.req.IsTsig() != nil {
		s.ck.now = s.h.opts.Now() // for the TSIG record's time signed
	}
	if s.tooLarge {
		return s.ck.TooLargeReply(m)
	}
	return s.ck.SlipReply(m)
}

// clientAddr returns the client's address without its zone, IPv4-mapped
// IPv6 addresses made IPv4, and whether the transport is UDP, as the core's
// Debit reads them (rrl.Source): a source whose address cannot be had (nil,
// a typed nil, no IP, unparsable) is the zero Addr over UDP, and so is
// limited, in the network 0.0.0.0.
func clientAddr(a net.Addr) (netip.Addr, bool) {
	ip, udp := rrl.Source(a)
	return ip.Unmap().WithZone(""), udp
}
