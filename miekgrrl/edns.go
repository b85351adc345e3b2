package miekgrrl

import "github.com/miekg/dns"

// EDNS (RFC 6891) editing: finding a message's OPT record, and making a
// response's copy with an OPT record of its own, without writing into the
// messages, records or option arrays that the request or the handler own.

// defaultUDPSize is the payload size advertised in an OPT record this package
// has to add: the size recommended by DNS Flag Day 2020 to avoid
// fragmentation.
const defaultUDPSize = 1232

// cookieReply holds a copy of a response with a COOKIE option, and what
// the copy needs of its own, so that attaching a cookie costs a single
// allocation in the usual cases (a few additional records and options).
type cookieReply struct {
	msg    dns.Msg
	opt    dns.OPT
	cookie dns.EDNS0_COOKIE
	text   [cookieTextLen]byte // cookie's text, when fresh
	extra  [3]dns.RR
	opts   [2]dns.EDNS0
}

// attach makes r.msg a copy of the response m whose OPT record, a copy of
// m's or a new one, has cookie as its only COOKIE option, and returns it. m,
// its records, its sections' arrays and its options are left as they were,
// so that a handler may send one prebuilt message to every client; the OPT
// record of the request req (which may be nil) gives the DO bit of a new OPT
// record, which goes before a TSIG record ending the additional section.
func (r *cookieReply) attach(req, m *dns.Msg, cookie *dns.EDNS0_COOKIE) *dns.Msg {
	r.msg = *m
	src := findOPT(m)
	var options []dns.EDNS0
	if src != nil {
		r.opt = *src
		options = src.Option
	} else {
		r.opt = newOPT(findOPT(req))
	}
	r.opt.Option = withCookie(options, cookie, r.opts[:0])

	n := len(m.Extra)
	if src == nil {
		n++
	}
	extra := r.extra[:0]
	if n > len(r.extra) {
		extra = make([]dns.RR, 0, n)
	}
	for _, rr := range m.Extra {
		if src != nil && rr == dns.RR(src) {
			rr = &r.opt
		}
		extra = append(extra, rr)
	}
	if src == nil {
		i := len(extra)
		if i > 0 && extra[i-1] != nil && extra[i-1].Header().Rrtype == dns.TypeTSIG {
			i--
		}
		extra = append(extra, nil)
		copy(extra[i+1:], extra[i:])
		extra[i] = &r.opt
	}
	r.msg.Extra = extra
	return &r.msg
}

// withCookie returns options without any COOKIE option and with c at the
// end, in spare when it has room and in a new array otherwise, so that an
// array shared with the request or the handler is never written.
func withCookie(options []dns.EDNS0, c *dns.EDNS0_COOKIE, spare []dns.EDNS0) []dns.EDNS0 {
	n := 1
	for _, o := range options {
		if _, ok := o.(*dns.EDNS0_COOKIE); !ok {
			n++
		}
	}
	out := spare[:0]
	if n > cap(spare) {
		out = make([]dns.EDNS0, 0, n)
	}
	for _, o := range options {
		if _, ok := o.(*dns.EDNS0_COOKIE); !ok {
			out = append(out, o)
		}
	}
	return append(out, c)
}

// newOPT returns an OPT record for a response to a request with reqOPT
// (which may be nil): our UDP size and the request's DO bit.
func newOPT(reqOPT *dns.OPT) dns.OPT {
	opt := dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	opt.SetUDPSize(defaultUDPSize)
	if reqOPT != nil && reqOPT.Do() {
		opt.SetDo()
	}
	return opt
}

// udpSize is the largest UDP response the sender of req takes: its EDNS
// payload size, at least 512 bytes, or 512 bytes without EDNS.
func udpSize(req *dns.Msg) int {
	if opt := findOPT(req); opt != nil {
		return max(int(opt.UDPSize()), dns.MinMsgSize)
	}
	return dns.MinMsgSize
}

// findOPT is Msg.IsEdns0 for a message that may be nil or hold nil records.
func findOPT(m *dns.Msg) *dns.OPT {
	if m == nil {
		return nil
	}
	for i := len(m.Extra) - 1; i >= 0; i-- {
		if opt, ok := m.Extra[i].(*dns.OPT); ok && opt != nil {
			return opt
		}
	}
	return nil
}

// replyWithOPT returns a reply to req with rcode, and an OPT record without
// options if req has one, for the requests the middleware answers itself.
func replyWithOPT(req *dns.Msg, rcode int) *dns.Msg {
	m := new(dns.Msg).SetRcode(req, rcode)
	if reqOPT := findOPT(req); reqOPT != nil {
		opt := newOPT(reqOPT)
		m.Extra = []dns.RR{&opt}
	}
	return m
}

// uncompressedLen is the length of m packed without compression, as
// dns.Msg.Truncate first measures it, but without packing the COOKIE option
// that ends opt, which dns.Msg.Len would do (allocating) to learn its length.
func uncompressedLen(m *dns.Msg, opt *dns.OPT) int {
	options := opt.Option
	cookie := options[len(options)-1].(*dns.EDNS0_COOKIE)
	opt.Option = options[:len(options)-1]
	compress := m.Compress
	m.Compress = false
	l := m.Len()
	m.Compress, opt.Option = compress, options
	return l + 4 + len(cookie.Cookie)/2 // code, length, data
}
