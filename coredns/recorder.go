package rrl

import (
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsrrl/rrl/miekgrrl"
)

// recorder is the ResponseWriter the rest of the chain writes to. For a UDP
// response that may be limited it holds the message until the limiter has
// decided; otherwise (TCP, or a client with a valid server cookie) it writes
// straight through and only remembers the first message for accounting, so
// that a zone transfer's many messages stream as before.
type recorder struct {
	dns.ResponseWriter

	req    *dns.Msg
	h      *RRL
	client netip.Addr
	now    time.Time
	cookie miekgrrl.CookieState
	hold   bool

	msg           *dns.Msg // the response, for accounting
	held          bool     // msg is held and not yet written
	passedThrough bool     // something was written that we could not hold

	ctx metaContext // kept across uses: its metadata map is reused
}

var recorders = sync.Pool{New: func() any { return new(recorder) }}

// getRecorder takes a recorder from the pool, so that a query costs no
// allocation for it. Every field but ctx is set here.
func getRecorder(w dns.ResponseWriter, r *dns.Msg, h *RRL, client netip.Addr, now time.Time, cookie miekgrrl.CookieState, hold bool) *recorder {
	rec := recorders.Get().(*recorder)
	rec.ResponseWriter, rec.req, rec.h = w, r, h
	rec.client, rec.now, rec.cookie, rec.hold = client, now, cookie, hold
	rec.msg, rec.held, rec.passedThrough = nil, false, false
	return rec
}

// putRecorder returns rec to the pool, dropping the references that would
// keep a request's messages and writer alive; the rest is overwritten by
// the next getRecorder.
func putRecorder(rec *recorder) {
	rec.ResponseWriter, rec.req, rec.msg = nil, nil, nil
	rec.ctx.parent, rec.ctx.own = nil, false
	recorders.Put(rec)
}

// WriteMsg implements dns.ResponseWriter.
func (rec *recorder) WriteMsg(m *dns.Msg) error {
	if rec.hold {
		// A second message over UDP is unusual; the last one is the answer.
		rec.msg, rec.held = m, true
		return nil
	}
	if rec.msg == nil {
		rec.msg = m
	}
	return rec.send(m)
}

// Write implements dns.ResponseWriter. A plugin that writes wire format is
// decoded so that its response is limited too; bytes that do not decode
// are passed on untouched, since we cannot tell what they are.
func (rec *recorder) Write(b []byte) (int, error) {
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil || !rec.hold {
		if err == nil && rec.msg == nil {
			rec.msg = m
		}
		rec.passedThrough = true
		return rec.ResponseWriter.Write(b)
	}
	rec.msg, rec.held = m, true
	return len(b), nil
}

// send writes m to the client, with a fresh server cookie when the request
// carried a client cookie: that is how clients obtain the cookie that
// exempts them.
func (rec *recorder) send(m *dns.Msg) error {
	if rec.cookie != miekgrrl.CookieNone {
		rec.h.cookies.AddServerCookie(m, rec.req, rec.client, rec.now)
	}
	return rec.ResponseWriter.WriteMsg(m)
}
