package replay

import (
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"
	"time"
)

// TCP flags.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
)

// Bounds of the reassembler, so that memory stays bounded whatever the
// capture: flows tracked at once, data held out of order per flow, and
// bytes held by all flows together (incomplete messages and segments ahead
// of a gap), which a spray of spoofed segments, each opening a flow with
// the start of a long message, would otherwise grow to maxFlows times the
// per-flow bounds.
const (
	maxFlows       = 1 << 16
	maxOutOfOrder  = 64
	maxHeldBytes   = 1 << 18
	maxHeldTotal   = 64 << 20
	flowIdle       = 2 * time.Minute
	sweepEverySegs = 1 << 14
)

// keepBuf is the largest buffer an idle flow keeps for its next message.
const keepBuf = 4096

// tcpSegment is one TCP segment of a DNS connection, with its sides known.
type tcpSegment struct {
	client, server netip.AddrPort
	fromServer     bool
	seq            uint32
	flags          byte
	payload        []byte
	lost           bool // the capture cut the segment short
	at             time.Time
}

type flowKey struct {
	client, server netip.AddrPort
	fromServer     bool
}

// flow is one direction of a TCP connection: the sequence number expected
// next, the bytes of a message not yet complete, and segments that came
// ahead of a gap.
type flow struct {
	next     uint32
	buf      []byte
	ahead    []heldSegment
	held     int
	broken   bool // data was lost: the message framing cannot be trusted
	fromSYN  bool // the stream was read from its start, so its framing is known
	closed   bool // by FIN or RST: kept until idle, so that segments seen again are ignored
	lastSeen time.Time
}

// bytes is the memory the flow holds for data: its buffer and the
// segments ahead of a gap.
func (f *flow) bytes() int { return cap(f.buf) + f.held }

// pending reports whether the flow holds data of a message not yet
// complete: the start of one, or segments ahead of a gap. A flow that
// holds only a spare buffer is whole.
func (f *flow) pending() bool { return len(f.buf) > 0 || f.held > 0 }

type heldSegment struct {
	seq  uint32
	data []byte
}

// reassembler turns TCP segments into DNS messages (RFC 1035 section 4.2.2:
// each message is preceded by its length in two bytes). It handles a
// message split over segments, several messages in a segment,
// retransmissions and reordering within bounds. A flow that loses data is
// given up until the connection ends, since its framing is lost.
type reassembler struct {
	flows map[flowKey]*flow
	held  int // the bytes of all flows
	skip  func(string)
	emit  func(*Message)
	msg   Message
	segs  int
}

func newReassembler(skip func(string), emit func(*Message)) *reassembler {
	return &reassembler{flows: make(map[flowKey]*flow), skip: skip, emit: emit}
}

func (r *reassembler) segment(s *tcpSegment) {
	if r.segs++; r.segs%sweepEverySegs == 0 {
		r.sweep(s.at.Add(-flowIdle))
	}
	key := flowKey{s.client, s.server, s.fromServer}
	f := r.flows[key]
	if s.flags&tcpSYN != 0 {
		if f == nil {
			f = r.add(key)
		}
		s.seq++ // the SYN takes a sequence number; data in it (TCP Fast Open) follows
		r.countCut(f)
		r.held -= f.held
		*f = flow{next: s.seq, buf: f.buf[:0], fromSYN: true}
	}
	if f != nil && f.closed && s.flags&tcpSYN == 0 {
		return // seen again after the close: retransmitted, or captured twice
	}
	if f == nil {
		if len(s.payload) == 0 {
			return
		}
		// The capture began inside the connection: take this segment as
		// the start of a message, the best guess there is.
		f = r.add(key)
		f.next = s.seq
	}
	f.lastSeen = s.at
	if len(s.payload) > 0 {
		before := f.bytes()
		r.data(f, s)
		r.held += f.bytes() - before
		if r.held > maxHeldTotal {
			r.shed()
		}
	}
	if s.flags&(tcpFIN|tcpRST) != 0 {
		r.close(f)
	}
}

// close ends a flow's connection: what it holds incomplete is counted and
// let go, and the flow is kept, closed, until the idle sweep, so that a
// segment seen again is not read as the start of another stream.
func (r *reassembler) close(f *flow) {
	r.countCut(f)
	r.held -= f.bytes()
	*f = flow{closed: true, lastSeen: f.lastSeen}
}

// forget drops a flow.
func (r *reassembler) forget(key flowKey, f *flow) {
	r.countCut(f)
	r.held -= f.bytes()
	delete(r.flows, key)
}

// flush drops every flow, at the end of the input.
func (r *reassembler) flush() {
	for k, f := range r.flows {
		r.forget(k, f)
	}
}

// countCut counts what a flow being dropped or started again holds
// incomplete: segments ahead of a gap mean data lost (SkipTCPGap); the
// start of a message, a message cut off (SkipTCPCut). A broken flow was
// counted when it broke. A flow whose SYN the capture missed is not
// counted: its framing is a guess, and a segment seen again after the
// connection closed (retransmitted, or captured twice) opens such a flow.
func (r *reassembler) countCut(f *flow) {
	switch {
	case f.broken || !f.fromSYN:
	case f.held > 0:
		r.skip(SkipTCPGap)
	case f.pending():
		r.skip(SkipTCPCut)
	}
}

func (r *reassembler) add(key flowKey) *flow {
	if len(r.flows) >= maxFlows {
		r.evict()
	}
	f := new(flow)
	r.flows[key] = f
	return f
}

// evict makes room by dropping the eighth of the flows seen least
// recently. The order is the flows' own (not the map's, which is random),
// so that a replay stays deterministic.
func (r *reassembler) evict() {
	for _, k := range r.oldestFirst(false)[:len(r.flows)/8] {
		r.forget(k, r.flows[k])
	}
}

// shed brings the bytes held by all flows back under three quarters of
// maxHeldTotal, giving up the flows seen least recently that hold data. A
// flow given up stays known, as broken, so that its later segments are not
// read out of frame.
func (r *reassembler) shed() {
	for _, k := range r.oldestFirst(true) {
		if r.held <= maxHeldTotal/4*3 {
			return
		}
		f := r.flows[k]
		r.held -= f.bytes()
		if !f.pending() {
			f.buf = nil // a spare buffer alone: let it go, the stream is whole
			continue
		}
		r.breakFlow(f, SkipTCPOverflow)
	}
}

// oldestFirst returns the keys of the flows (of those holding data, if
// holding), seen least recently first, ties broken by the key.
func (r *reassembler) oldestFirst(holding bool) []flowKey {
	type seen struct {
		key flowKey
		at  time.Time
	}
	flows := make([]seen, 0, len(r.flows))
	for k, f := range r.flows {
		if !holding || f.bytes() > 0 {
			flows = append(flows, seen{k, f.lastSeen})
		}
	}
	slices.SortFunc(flows, func(a, b seen) int {
		return cmp.Or(a.at.Compare(b.at), a.key.client.Compare(b.key.client), a.key.server.Compare(b.key.server),
			boolCompare(a.key.fromServer, b.key.fromServer))
	})
	keys := make([]flowKey, len(flows))
	for i, f := range flows {
		keys[i] = f.key
	}
	return keys
}

func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// sweep forgets flows not seen since before.
func (r *reassembler) sweep(before time.Time) {
	for k, f := range r.flows {
		if f.lastSeen.Before(before) {
			r.forget(k, f)
		}
	}
}

func (r *reassembler) data(f *flow, s *tcpSegment) {
	if f.broken {
		return
	}
	if s.lost {
		r.breakFlow(f, SkipTCPGap)
		return
	}
	p := s.payload
	switch diff := int32(s.seq - f.next); {
	case diff < 0: // retransmitted, at least in part
		if int(-diff) >= len(p) {
			return
		}
		p = p[-diff:]
	case diff > 0: // ahead of a gap: hold it
		if len(f.ahead) >= maxOutOfOrder || f.held+len(p) > maxHeldBytes {
			r.breakFlow(f, SkipTCPGap)
			return
		}
		f.ahead = append(f.ahead, heldSegment{s.seq, append([]byte(nil), p...)})
		f.held += len(p)
		return
	}
	r.append(f, p, s)
	for len(f.ahead) > 0 && !f.broken {
		if !r.fillFromAhead(f, s) {
			break
		}
	}
}

// fillFromAhead appends the held segment that now continues the stream,
// dropping those wholly behind it, and reports whether it found one.
func (r *reassembler) fillFromAhead(f *flow, s *tcpSegment) bool {
	for i := 0; i < len(f.ahead); i++ {
		h := f.ahead[i]
		diff := int32(h.seq - f.next)
		if diff > 0 {
			continue
		}
		f.ahead = append(f.ahead[:i], f.ahead[i+1:]...)
		f.held -= len(h.data)
		if int(-diff) < len(h.data) {
			r.append(f, h.data[-diff:], s)
		}
		return true
	}
	return false
}

// breakFlow gives up the flow until its connection ends, for reason.
func (r *reassembler) breakFlow(f *flow, reason string) {
	r.skip(reason)
	f.broken, f.buf, f.ahead, f.held = true, nil, nil, 0
}

// append adds in-order stream data and emits each message it completes.
// Data is copied only when a message spans segments.
func (r *reassembler) append(f *flow, p []byte, s *tcpSegment) {
	f.next += uint32(len(p))
	if len(f.buf) > 0 {
		f.buf = append(f.buf, p...)
		p = f.buf
	}
	for len(p) >= 2 {
		n := int(binary.BigEndian.Uint16(p))
		if len(p) < 2+n {
			break
		}
		r.message(p[2:2+n], s)
		p = p[2+n:]
	}
	// What is left is less than one message: at most 65,536 bytes.
	if len(p) == 0 && cap(f.buf) > keepBuf {
		f.buf = nil // the large message is done: do not hold its buffer
		return
	}
	// Keep the incomplete rest; copy(f.buf, p) is safe when p lies in f.buf.
	f.buf = append(f.buf[:0], p...)
}

func (r *reassembler) message(wire []byte, s *tcpSegment) {
	if len(wire) < dnsHeaderLen {
		r.skip(SkipNotDNS)
		return
	}
	m := &r.msg
	*m = Message{Time: s.at, Client: s.client, Server: s.server, Response: s.fromServer, Wire: wire}
	r.emit(m)
}
