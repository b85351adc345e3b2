package rrl

import (
	"slices"

	"github.com/coredns/coredns/plugin/pkg/edns"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"

	"github.com/dnsrrl/rrl/miekgrrl"
)

// recorder is the ResponseWriter the rest of the chain writes to. For a UDP
// response that may be limited it holds the message until the limiter has
// decided; otherwise (TCP, or a client with a valid server cookie) it writes
// straight through and only remembers the first message for accounting, so
// that a zone transfer's many messages stream as before.
//
// One recorder, with the context it carries, is allocated per request and
// never reused: the chain may keep both past ServeDNS (cache prefetch and
// serve-stale verification do, in goroutines), so pooling them would hand a
// live writer and context to the next request.
type recorder struct {
	dns.ResponseWriter

	msg   *dns.Msg // the response, for accounting
	state recState

	ck *miekgrrl.RequestCookie // the request's cookie, decoded once; nil without one
	// cookied: msg already carries the server cookie that send would add
	// (measured put it in, so that it counts in the length), so send writes it as is.
	cookied bool

	ctx metaContext
}

// recState is where a recorder stands. It starts in holding or streaming,
// as the transport decides, and moves on as the chain writes:
//
//	holding   --WriteMsg, Write of a message-->  held  (msg is kept back)
//	held      --WriteMsg, Write of a message-->  held  (the last one wins)
//	streaming --WriteMsg-->                      streamed (msg is the first one, written)
//	any       --Write of what cannot be held-->  passedThrough (written as it came)
//
// Only a held message waits for the limiter; the other states have written
// what they got. In passedThrough, msg is the first message written, if it
// could be decoded: bytes written after a held message replace it, as a
// second message does, so it is neither sent nor charged. A recorder still
// in holding or streaming when the chain returns had nothing written to it.
type recState uint8

const (
	holding       recState = iota // UDP that may be limited: nothing written yet
	held                          // msg is held and not yet written
	streaming                     // written as it comes: nothing written yet
	streamed                      // written as it came; msg is the first message
	passedThrough                 // something was written that could not be held
)

// wroteNothing reports whether the chain has written nothing.
func (s recState) wroteNothing() bool { return s == holding || s == streaming }

// newRecorder makes the recorder of one request. It is kept small (a
// request's cookie is kept apart, by keepCookie), and comes from a batch
// (see batch): never reused, so that what the chain keeps stays its own.
func newRecorder(w dns.ResponseWriter, ck *miekgrrl.RequestCookie, hold bool) *recorder {
	rec := recorders.next()
	rec.ResponseWriter = w
	rec.ck, rec.state = ck, streaming
	if hold {
		rec.state = holding
	}
	return rec
}

// recorders holds the recorders of requests.
var recorders batch[recorder]

// WriteMsg implements dns.ResponseWriter.
func (rec *recorder) WriteMsg(m *dns.Msg) error {
	switch rec.state {
	case holding, held:
		// A second message over UDP is unusual; the last one is the answer.
		rec.msg, rec.state = m, held
		return nil
	case streaming:
		rec.msg, rec.state = m, streamed
	}
	return rec.send(m)
}

// Write implements dns.ResponseWriter. A plugin that writes wire format is
// decoded so that its response is limited too; bytes that do not decode
// are passed on untouched, since we cannot tell what they are.
func (rec *recorder) Write(b []byte) (int, error) {
	m := new(dns.Msg)
	err := m.Unpack(b)
	if err == nil && (rec.state == holding || rec.state == held) {
		rec.msg, rec.state = m, held
		return len(b), nil
	}
	if rec.state == held {
		rec.msg = nil // the bytes replace the held message, which is never sent
	}
	if err == nil && rec.msg == nil {
		rec.msg = m
	}
	rec.state = passedThrough
	return rec.ResponseWriter.Write(b)
}

// send writes m to the client, with a server cookie when the request
// carried a client cookie: that is how clients obtain the cookie that
// exempts them. The request's own is sent back while it is young, a fresh
// one otherwise (miekgrrl.RequestCookie.Reply). The cookie goes into one
// copy of m: a plugin may write one message to many clients (a shared or
// cached message), and writing the cookie into it would race with the other
// requests and leak one client's cookie to another. The copy is not
// truncated here: the server's writer (request.ScrubWriter) fits every
// response to the client's payload size.
func (rec *recorder) send(m *dns.Msg) error {
	if !rec.cookied || m != rec.msg {
		m = rec.withCookie(m)
	}
	return rec.ResponseWriter.WriteMsg(m)
}

// withCookie returns m, or when the request carried a client cookie a copy
// of m with a server cookie (see send).
func (rec *recorder) withCookie(m *dns.Msg) *dns.Msg {
	if rec.ck == nil {
		return m
	}
	return rec.ck.Reply(m, false)
}

// measured readies the held UDP response for measuring, and returns its
// length as it will go out, as far as rrl can know it. It puts into msg the
// server cookie that send would add (send then writes msg as it is), so
// that the cookie is made once and counts in msg's length. Then it
// measures what CoreDNS's ScrubWriter, below every plugin, makes of msg
// (see onWire). What plugins above rrl add later (the nsid plugin's
// option) it cannot see: deliver charges that once the message has gone.
func (rec *recorder) measured(r *dns.Msg) int {
	if rec.msg != nil && !rec.cookied && rec.state == held {
		rec.msg, rec.cookied = rec.withCookie(rec.msg), true
	}
	return onWire(request.Request{Req: r, W: rec.ResponseWriter}, rec.msg)
}

// onWire returns the length of m once the server's writer
// (request.ScrubWriter) has done its work on it, without changing m or its
// records: the request's OPT record, with the options CoreDNS copies, for a
// response that has none (SizeAndDo), then the truncation to the client's
// buffer, 512 bytes without EDNS (Scrub). A response that fits the buffer
// as it is goes uncompressed, as Scrub sends it, and is measured without a
// copy; only a longer one is scrubbed in a copy.
func onWire(state request.Request, m *dns.Msg) int {
	plain := *m // the length without compression; m itself is left alone
	plain.Compress = false
	n := plain.Len()
	if o := state.Req.IsEdns0(); o != nil && m.IsEdns0() == nil {
		if len(o.Option) > 0 {
			return scrubbedLen(state, m)
		}
		n += optLen // the request's OPT record, bare
	}
	if n <= state.Size() && n <= scrubCompressFrom {
		return n
	}
	return scrubbedLen(state, m)
}

// optLen is the length of an OPT record without options.
const optLen = 11

// scrubCompressFrom is the shortest length at which Scrub compresses a
// response that fits the buffer uncompressed (1220 bytes over IPv6, 1480
// over IPv4).
const scrubCompressFrom = 1220

// scrubbedLen is onWire for a response Scrub may cut or compress: it does
// Scrub's work on a copy.
func scrubbedLen(state request.Request, m *dns.Msg) int {
	out := *m // Truncate reslices the sections of its copy, never their arrays
	out.Extra = slices.Clone(m.Extra)
	if o := state.Req.IsEdns0(); o != nil && m.IsEdns0() == nil {
		opt := &dns.OPT{Hdr: o.Hdr}
		for _, e := range o.Option {
			if edns.SupportedOption(e.Option()) {
				opt.Option = append(opt.Option, e)
			}
		}
		out.Extra = append(out.Extra, opt)
	}
	state.Scrub(&out)
	return out.Len()
}

// capBuffer lowers the UDP payload size that the request r advertises to
// size, if it advertises more, and returns what it advertised (0 when it
// was left alone) for restoreBuffer. The server's writer truncates every
// response to the buffer the request advertises (at least 512 bytes), and
// it sits below every plugin: so a response written while the buffer is
// lowered leaves no longer than size, whatever plugins above rrl added to
// it after rrl decided. BIND applies nocookie-udp-size so, as the buffer
// of a client without a server cookie; CoreDNS's bufsize plugin changes
// requests so too.
func capBuffer(r *dns.Msg, size int) uint16 {
	size = max(size, dns.MinMsgSize) // the server reads less as 512 (RFC 6891)
	o := r.IsEdns0()
	if o == nil || int(o.UDPSize()) <= size {
		return 0
	}
	was := o.UDPSize()
	o.SetUDPSize(uint16(size))
	return was
}

// restoreBuffer gives r back the buffer size that capBuffer lowered, so
// that whatever reads the request after the response went sees it as it
// came.
func restoreBuffer(r *dns.Msg, was uint16) {
	if o := r.IsEdns0(); o != nil && was != 0 {
		o.SetUDPSize(was)
	}
}
