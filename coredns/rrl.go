// Package rrl is a CoreDNS plugin that limits the responses an
// authoritative server sends to each client network, as BIND 9's
// rate-limit does, so that the server is a poor amplifier in reflection
// attacks.
package rrl

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/metrics"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
	ot "github.com/opentracing/opentracing-go"

	core "github.com/dnsrrl/rrl"
	"github.com/dnsrrl/rrl/miekgrrl"
)

// RRL is the plugin handler of one server block. Each block has its own
// limiter, so blocks that share a listener never share accounts.
type RRL struct {
	Next  plugin.Handler
	Zones []string

	limiter    *core.RRL
	active     bool // some allowance is set; otherwise the plugin stands aside
	sized      bool // nocookie-udp-size or all-bytes-per-second needs each response's length
	noCookie   int  // nocookie-udp-size, 0 when off
	bytesRated bool // all-bytes-per-second is on: bytes added above rrl are charged after
	streamed   bool // stream-time-per-second is on: requests not over UDP are timed
	reportOnly bool
	traced     bool // the block has the trace plugin, which needs spans
	cookies    *miekgrrl.Cookies
	secret     [16]byte // the current cookie secret, to compare blocks on a listener
	stats      *instanceStats
	zoneIndex  map[string]int // zone -> index in Zones, when there are many
	listeners  []string       // the block's servers, as metrics.WithServer names them

	shared   *sharedLimiter // the limiter and the blocks that use it (see keep.go)
	settings string         // settingsString: a reload with the same keeps the limiter
	// unprovenOpen: proven-requests-per-second without requests-per-second
	unprovenOpen bool

	lifeMu   sync.Mutex
	started  bool
	stopped  bool
	tickStop chan struct{} // closed to stop the ticker
	tickDone chan struct{} // closed by the ticker when it has stopped

	ops    *ops        // status and log-limited (status.go); nil when neither is set
	kernel *kernelDrop // kernel-drop (kernel.go); nil when not set
}

// zoneIndexFrom is the number of zones from which matchZone looks the
// query's suffixes up in a map rather than comparing with each zone: a
// reverse zone given as a /9 is 128 zones.
const zoneIndexFrom = 8

// wildcardLabel is the metadata label under which file, auto and cache name
// the wildcard record ("*.example.org.") that synthesised an answer.
const wildcardLabel = "zone/wildcard"

// newHandler builds the handler and its limiter from a parsed block.
func newHandler(zones []string, cfg *core.Config, opts options) *RRL {
	h := &RRL{
		Zones:      zones,
		active:     cfg.IsActive(),
		reportOnly: opts.reportOnly,
		cookies:    newCookies(opts),
		secret:     opts.secret,
	}
	if len(zones) >= zoneIndexFrom {
		h.zoneIndex = make(map[string]int, len(zones))
		for i, z := range zones {
			if _, dup := h.zoneIndex[z]; !dup {
				h.zoneIndex[z] = i
			}
		}
	}
	h.stats = newInstanceStats(zones, opts.reportOnly)
	h.stats.maxTableSize = maxTableSize(cfg)
	h.stats.prefixes = [2][]core.RequestPrefix{cfg.RequestPrefixes(false), cfg.RequestPrefixes(true)}
	h.settings = settingsString(cfg, opts)
	h.unprovenOpen = unprovenOpen(cfg)
	h.shared = newSharedLimiter(cfg, h.stats)
	h.limiter = h.shared.limiter
	h.stats.limiter = h.limiter
	h.kernel = newKernelDrop(opts.kernel)
	h.stats.kernel = h.kernel
	h.sized = h.limiter.NeedsResponseSize()
	h.noCookie = h.limiter.NoCookieUDPSize()
	h.bytesRated = cfg.AllBytesPerSecond() > 0
	h.streamed = h.limiter.StreamTimed()
	return h
}

// maxTableSize is the block's max-table-size, set or default, as the core
// reads it.
func maxTableSize(cfg *core.Config) int {
	v, _ := cfg.Value("max-table-size")
	n, _ := strconv.Atoi(v)
	return n
}

// Name implements plugin.Handler.
func (h *RRL) Name() string { return pluginName }

// ServeDNS implements plugin.Handler. It charges the request to the client
// network's request account first: a request over requests-per-second (or
// proven-requests-per-second), or not over UDP from a network over its
// stream-time-per-second budget, never reaches the next plugin. Then it
// lets the rest of the chain build the response into a recorder, charges
// a request not over UDP with the wall time from here to the end of that
// chain (stream-time-per-second), charges the final response to the
// client network's accounts and sends, drops or slips it.
func (h *RRL) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	if !h.active || len(r.Question) == 0 {
		return plugin.NextOrFailure(h.Name(), h.Next, ctx, w, r)
	}
	zone := h.matchZone(r.Question[0].Name)
	if zone < 0 {
		return plugin.NextOrFailure(h.Name(), h.Next, ctx, w, r)
	}

	server := metrics.WithServer(ctx)
	client, udp := transport(w, server)
	var start time.Time
	if h.streamed && !udp {
		start = time.Now() // read only for stream requests: UDP pays nothing for it
	}
	// The option is decoded here once, for the request and its replies;
	// the clock is read only for a request with a cookie (reading it costs
	// more than the rest of the check).
	ck := h.cookies.Request(r, client, time.Now)
	cookie := ck.State()
	proven := cookie == miekgrrl.CookieValid

	act, why := h.debitRequest(client, udp, proven)
	refused := act == core.Drop
	if refused {
		if why.Limit == core.LimitStreamTime {
			h.stats.streamTimeRefused(server, zone)
		} else {
			h.stats.requestRefused(server, zone, proven || !udp)
		}
		if !h.reportOnly {
			abort(w, server, udp)
			return dns.RcodeSuccess, nil // nothing is sent, by us or by the server
		}
		// In report-only mode it is served as any request is (a server
		// cookie for a client that sent one, FORMERR for a malformed
		// one). Enforced, it would have had no response, so none is
		// charged or counted: the metrics say what enforcing would do.
	}

	hold := udp && !proven && !refused
	rec := newRecorder(w, keepCookie(&ck), hold)
	var rcode int
	var err error
	if ck.Malformed() {
		// RFC 7873 section 5.2.2; the reply is limited like any error,
		// and carries no cookie: the client's cannot be read.
		rec.WriteMsg(miekgrrl.MalformedCookieReply(r))
	} else {
		ctx = rec.ctx.withMetadata(ctx)
		rcode, err = h.next(ctx, rec, r)
	}

	if refused {
		return rcode, err // served as if rrl were not there, and not charged
	}
	if h.streamed && !udp {
		// Wall time, not CPU time: Go has no per-goroutine CPU clock, and
		// the goroutine is held for as long as the plugins below take,
		// computing or waiting on an upstream (see core.RRL.DebitStreamTime).
		h.limiter.DebitStreamTime(client, time.Since(start))
	}
	if rec.state.wroteNothing() && !plugin.ClientWrite(rcode) {
		// The server would write this error itself, after us and unlimited:
		// build it here so that an error flood is limited like any other.
		rec.msg, rec.state = errorReply(r, rcode), held
		rcode = dns.RcodeSuccess
	}
	if rec.msg == nil {
		return rcode, err // the chain wrote nothing we could read
	}
	size := 0
	if h.sized && udp && !proven {
		// Only the protections that weigh responses need the length as
		// it will go out: with its server cookie (made ahead of the
		// decision), its OPT record and cut to the client's buffer.
		size = rec.measured(r)
	}
	act, rtr := h.account(server, zone, client, udp, rec.state == held, r, rec.msg, size, cookie, rec.ctx.wildcardOrigin(ctx))
	if rec.state == held {
		h.deliver(rec, r, client, act, rtr, &ck, size)
		if !plugin.ClientWrite(rcode) {
			// We wrote (or dropped) the response: an error rcode would make
			// the server write another one, unlimited.
			rcode = dns.RcodeSuccess
		}
	}
	return rcode, err
}

// debitRequest charges the request to its network's request accounts, and
// with kernel-drop tells the kernel drop list of an unproven UDP request
// they refused. It returns the decision and, for a refusal, the limit
// that refused it.
func (h *RRL) debitRequest(client netip.Addr, udp, proven bool) (core.Action, core.RequestRefusal) {
	act, _, why := h.limiter.DebitRequestLimit(client, udp, proven)
	if h.kernel != nil && act == core.Drop && udp && !proven {
		if network, ok := h.limiter.RefusalNetwork(client, why); ok {
			h.kernel.refused(network)
		}
	}
	return act, why
}

// next calls the next plugin. plugin.NextOrFailure would wrap rec in a
// writer (an allocation) that tells writers which implement
// plugin.PluginTracker who wrote; rec is not one, so that is only done when
// tracing needs NextOrFailure's span.
func (h *RRL) next(ctx context.Context, rec *recorder, r *dns.Msg) (int, error) {
	if h.Next == nil || (h.traced && ot.SpanFromContext(ctx) != nil) {
		return plugin.NextOrFailure(h.Name(), h.Next, ctx, rec, r)
	}
	return h.Next.ServeDNS(ctx, rec, r)
}

// account charges resp to the client's accounts, after its request was
// charged, records the outcome in the metrics, and returns the decision
// and its reason. When size is not 0 it is resp's length as it goes out
// (recorder.measured), the tuple's Size: all-bytes-per-second charges it
// and nocookie-udp-size compares it; otherwise Size is left unknown,
// unmeasured. A response to a request with a valid server cookie is not
// charged: its source address is proven, so it cannot be part of a
// reflection.
//
// A response not over UDP is never limited (its request was charged, and
// its source is proven): it is only counted. A UDP response that was not
// held (bytes passed through) has already been written: it is still
// charged, so that its network's account sees the whole load, but it is
// counted as sent whatever the limiter says.
func (h *RRL) account(server string, zone int, client netip.Addr, udp, held bool, r, resp *dns.Msg, size int, cookie miekgrrl.CookieState, wildcard string) (core.Action, core.RTReason) {
	if cookie == miekgrrl.CookieValid {
		h.stats.cookieExempt(server, zone)
		return core.Send, core.RTNotReached
	}
	tuple := miekgrrl.Tuple(r, resp, wildcard)
	if !udp {
		h.stats.count(server, zone, tuple.AllowanceCategory, core.Send, core.RTNotUDP)
		return core.Send, core.RTNotUDP
	}
	tuple.Size = size
	act, _, rtr := h.limiter.DebitResponseAddr(client, true, &tuple) // errors never slip (core)
	if !held {
		act = core.Send
	}
	h.stats.count(server, zone, tuple.AllowanceCategory, act, rtr)
	return act, rtr
}

// abort ends a stream connection whose request was refused, so that it
// holds no server resources waiting for an answer that will not come.
// Only plain DNS over TCP is closed; the other transports are left to time
// out, as their servers own their connections. udp is the query's
// transport as transport reads it: on a plain DNS server anything but UDP
// is TCP, whatever type its address has (the proxyproto plugin wraps it).
func abort(w dns.ResponseWriter, server string, udp bool) {
	_, tcp := w.RemoteAddr().(*net.TCPAddr) // with no IP, the core reads it as UDP
	if (!udp || tcp) && (server == "" || strings.HasPrefix(server, transportDNS)) {
		w.Close()
	}
}

// deliver sends what act says for a held response to the request r from
// client. In report-only mode everything is sent: the metrics and logs
// alone tell what would have been.
//
// A response too long for nocookie-udp-size (RTTooLarge) goes as a
// truncated reply that carries a fresh server cookie when the client sent
// a cookie, never BADCOOKIE: every client knows to retry a TC reply over
// TCP, and one that keeps cookies may retry over UDP with the cookie
// instead; either way it gets the whole answer. BADCOOKIE is an error,
// on which a client may give up.
//
// size is the response's length as measured for the decision, 0 when it
// was not (TCP, a proven client, no limit that weighs responses). Plugins
// above rrl may still add to it (the nsid plugin's option, for one), so
// while it is written the request's buffer is capped at
// nocookie-udp-size (capBuffer; not in report-only mode, which sends
// everything as it would go without rrl), and the bytes it came to beyond size are
// charged to all-bytes-per-second once it has gone (the server's writers
// change the message in place, so its length then is what went out).
func (h *RRL) deliver(rec *recorder, r *dns.Msg, client netip.Addr, act core.Action, rtr core.RTReason, ck *miekgrrl.RequestCookie, size int) {
	if h.reportOnly {
		act = core.Send
	}
	var was uint16
	if size > 0 && h.noCookie > 0 && !h.reportOnly { // report-only changes nothing sent
		was = capBuffer(r, h.noCookie)
	}
	switch {
	case act == core.Send:
		rec.send(rec.msg)
		if size > 0 && h.bytesRated {
			h.limiter.DebitSentBytes(client, rec.msg.Len()-size)
		}
	case act == core.Slip && rtr == core.RTTooLarge:
		rec.ResponseWriter.WriteMsg(ck.TooLargeReply(rec.msg))
	case act == core.Slip:
		rec.ResponseWriter.WriteMsg(ck.SlipReply(rec.msg))
	}
	restoreBuffer(r, was)
}

// matchZone returns the index in h.Zones of the longest zone that contains
// qname, or -1. Names compare without regard to case.
func (h *RRL) matchZone(qname string) int {
	if h.zoneIndex != nil {
		return h.matchZoneIndexed(qname)
	}
	best, bestLen := -1, -1
	for i, z := range h.Zones {
		if len(z) > bestLen && isSubDomain(z, qname) {
			best, bestLen = i, len(z)
		}
	}
	return best
}

// matchZoneIndexed is matchZone by map: it looks up qname and then each of
// its parents, longest first, so the first hit is the longest zone.
func (h *RRL) matchZoneIndexed(qname string) int {
	name := qname
	if hasUpper(name) {
		name = strings.ToLower(name) // zones are lower case
	}
	if name == "" {
		name = "."
	}
	for {
		if i, ok := h.zoneIndex[name]; ok {
			return i
		}
		dot := strings.IndexByte(name, '.')
		if dot < 0 || dot == len(name)-1 {
			break
		}
		name = name[dot+1:]
	}
	if i, ok := h.zoneIndex["."]; ok {
		return i
	}
	return -1
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// isSubDomain reports whether name is zone or below it. Both are fully
// qualified; zone is lower case (the Corefile parser normalizes it).
func isSubDomain(zone, name string) bool {
	if zone == "." {
		return true
	}
	if len(name) < len(zone) {
		return false
	}
	if tail := name[len(name)-len(zone):]; tail != zone && !strings.EqualFold(tail, zone) {
		return false
	}
	return len(name) == len(zone) || name[len(name)-len(zone)-1] == '.'
}

// transport returns the client's address and whether the query came over
// bare UDP, the only transport that can be used for reflection. It is decided
// per query, never per server block: CoreDNS gives every key of a block
// (say "grpc://example.org:443 example.org:53") the same plugin chain. The
// address and transport are read as the core's Debit reads them; a query
// that a server for another transport (DoT, DoH, DoQ, gRPC) handles is never
// UDP, whatever its address says: DoQ's addresses are UDP ones, but QUIC's
// handshake proves the client's address, as TCP's does. server is the
// server's address with its transport ("dns://:53"), "" when not known.
func transport(w dns.ResponseWriter, server string) (netip.Addr, bool) {
	client, udp := core.Source(w.RemoteAddr())
	if udp && server != "" && !strings.HasPrefix(server, transportDNS) {
		udp = false
	}
	return client.Unmap(), udp
}

// transportDNS is how the address of a plain DNS server starts.
const transportDNS = "dns://"

// errorReply builds the response the server would write for an rcode that
// a plugin returned without writing, as CoreDNS's server does.
func errorReply(r *dns.Msg, rcode int) *dns.Msg {
	m := new(dns.Msg)
	m.SetRcode(r, rcode)
	state := request.Request{Req: r}
	state.SizeAndDo(m)
	return m
}
