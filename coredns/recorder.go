package rrl

import (
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

// measured readies the held UDP response for measuring, and returns the
// most bytes of it that go out. It puts into msg the server cookie that
// send would add (send then writes msg as it is), so that the cookie is
// made once and counts in msg's length; the most is the client's UDP
// buffer, to which CoreDNS's ScrubWriter, below the recorder, truncates
// the response: 512 bytes without EDNS, else the size EDNS advertises in
// the request r.
func (rec *recorder) measured(r *dns.Msg) int {
	if rec.msg != nil && !rec.cookied && rec.state == held {
		rec.msg, rec.cookied = rec.withCookie(rec.msg), true
	}
	buf := dns.MinMsgSize
	if opt := r.IsEdns0(); opt != nil {
		buf = max(buf, int(opt.UDPSize()))
	}
	return buf
}
