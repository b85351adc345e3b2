package miekgrrl

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/miekg/dns"
)

// ErrRequestRefused is what a reader made by DecorateReader returns from
// ReadTCP for a request its request limit refused: package dns then closes
// the connection, as Middleware closes one whose request it refuses.
var ErrRequestRefused = errors.New("miekgrrl: request refused by its request limit")

// errNoReader is what a reader made by DecorateReader for a nil Reader
// returns from every read.
var errNoReader = errors.New("miekgrrl: DecorateReader given a nil dns.Reader")

// headerLen is the length of a DNS message header (RFC 1035 section 4.1.1).
const headerLen = 12

// DecorateReader returns a dns.DecorateReader (dns.Server.DecorateReader)
// that charges each request to its request limit (requests-per-second, or
// proven-requests-per-second for a proven source) as the server reads it,
// with rrl.RRL.DebitRequestAddr, and refuses one over its limit before
// package dns unpacks it, starts a goroutine for it or asks the server's
// MsgAcceptFunc about it. Refusing a flood then costs a read and a debit per
// packet rather than a goroutine, an unpacked message and a call of the
// handler chain (see README.md for figures).
//
// Over UDP (ReadUDP, and ReadPacketConn for another net.PacketConn) a
// refused packet is discarded and the next one read, within the same call:
// each read is the decorated Reader's, which sets the read deadline as
// the server expects, so a timeout, or a Shutdown, returns to the server
// as it would without the decorator. The buffer of a refused packet is
// left to the garbage collector: the server's pool of buffers is its own.
// Over TCP (ReadTCP) the source is proven by the handshake and the request
// is charged as proven; a refused request makes ReadTCP return
// ErrRequestRefused, on which package dns closes the connection, as
// Middleware would, without answering.
//
// A request with a valid server cookie (Options.Cookies) is recognised
// without unpacking the message: the reader walks the header's counts
// past the question and the answer and authority records to the last OPT
// record of the additional section, as package dns finds it once it has
// unpacked the message, and checks its COOKIE option against the source
// address, as Cookies.Check does. Such a request is charged as proven. The
// walk reads each byte of the packet at most once; a packet it cannot walk
// (one that package dns would not unpack either) has no valid cookie and is
// charged as unproven. A packet too short for a DNS header is passed on
// uncharged: the server discards it, as it does without the decorator.
// Every other packet is charged, including those the server's
// MsgAcceptFunc would refuse or ignore and those that do not unpack, since
// the point is to spend nothing on them.
//
// A refused request is reported to Options.OnDecision, as Middleware
// reports the requests it refuses, with Decision.AtRead set and no
// Request (it was never unpacked); Options.Cookies and Options.Now are
// read as Middleware reads them. The source is read as Middleware reads it
// (rrl.Source): IPv4-mapped IPv6 addresses are made IPv4, and a source
// without an address is the zero Addr over UDP, limited in 0.0.0.0.
//
// Used with Middleware, each request must be charged once: give the
// Middleware the same Options with ChargedAtRead set, and serve every
// request it sees through servers decorated so, over UDP and TCP alike.
// In report-only mode (Options.ReportOnly) the decorator charges nothing
// and passes every packet on: the Middleware charges and reports as it
// does without it, with the whole request at hand. A nil limiter also
// makes the decorator pass everything on. The decorator never returns a
// nil Reader: given none, it returns one whose reads fail.
func DecorateReader(limiter *rrl.RRL, opts Options) dns.DecorateReader {
	if limiter == nil || opts.ReportOnly {
		return func(r dns.Reader) dns.Reader {
			if r == nil {
				return noReader{}
			}
			return r
		}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &readCharger{limiter: limiter, opts: opts}
	return func(r dns.Reader) dns.Reader {
		if r == nil {
			return noReader{}
		}
		rd := &chargingReader{c: c, inner: r}
		if pc, ok := r.(dns.PacketConnReader); ok {
			return &chargingPacketConnReader{chargingReader: rd, pc: pc}
		}
		return rd
	}
}

// readCharger charges the requests that the readers of one DecorateReader
// read.
type readCharger struct {
	limiter *rrl.RRL
	opts    Options
}

// admit charges the request m from src to its request limit and reports
// whether to pass it on; it reports a refused one to the hook.
func (c *readCharger) admit(m []byte, src net.Addr) bool {
	client, udp := clientAddr(src)
	var state CookieState
	if c.opts.Cookies != nil {
		state = c.opts.Cookies.packetState(m, client, c.opts.Now)
	}
	act, ipr, why := chargeRequest(c.limiter, &c.opts, client, udp, state == CookieValid)
	if act == rrl.Send {
		return true
	}
	if c.opts.OnDecision != nil {
		c.opts.OnDecision(Decision{Action: rrl.Drop, IPReason: ipr, RTReason: rrl.RTNotReached,
			RequestDropped: true, RequestLimit: why, AtRead: true, Limited: true, Client: client, UDP: udp, Cookie: state})
	}
	return false
}

// chargingReader is the Reader DecorateReader makes of one that does not
// read generic PacketConns.
type chargingReader struct {
	c     *readCharger
	inner dns.Reader
}

// ReadUDP reads packets until one is let through (or too short for a
// header), or a read fails.
func (r *chargingReader) ReadUDP(conn *net.UDPConn, timeout time.Duration) ([]byte, *dns.SessionUDP, error) {
	for {
		m, s, err := r.inner.ReadUDP(conn, timeout)
		if err != nil || len(m) < headerLen {
			return m, s, err
		}
		var src net.Addr
		if s != nil {
			src = s.RemoteAddr()
		}
		if r.c.admit(m, src) {
			return m, s, nil
		}
	}
}

// ReadTCP reads one message and charges it; a refused one fails the read.
func (r *chargingReader) ReadTCP(conn net.Conn, timeout time.Duration) ([]byte, error) {
	m, err := r.inner.ReadTCP(conn, timeout)
	if err != nil || len(m) < headerLen {
		return m, err
	}
	var src net.Addr
	if conn != nil {
		src = conn.RemoteAddr()
	}
	if !r.c.admit(m, src) {
		return nil, ErrRequestRefused
	}
	return m, nil
}

// chargingPacketConnReader is the Reader DecorateReader makes of a
// dns.PacketConnReader.
type chargingPacketConnReader struct {
	*chargingReader
	pc dns.PacketConnReader
}

// ReadPacketConn is ReadUDP for a generic net.PacketConn.
func (r *chargingPacketConnReader) ReadPacketConn(conn net.PacketConn, timeout time.Duration) ([]byte, net.Addr, error) {
	for {
		m, src, err := r.pc.ReadPacketConn(conn, timeout)
		if err != nil || len(m) < headerLen {
			return m, src, err
		}
		if r.c.admit(m, src) {
			return m, src, nil
		}
	}
}

// noReader is what DecorateReader makes of a nil Reader.
type noReader struct{}

func (noReader) ReadTCP(net.Conn, time.Duration) ([]byte, error) { return nil, errNoReader }
func (noReader) ReadUDP(*net.UDPConn, time.Duration) ([]byte, *dns.SessionUDP, error) {
	return nil, nil, errNoReader
}
func (noReader) ReadPacketConn(net.PacketConn, time.Duration) ([]byte, net.Addr, error) {
	return nil, nil, errNoReader
}

// packetState is Check for a request still packed, m, sent from client: it
// classifies the first COOKIE option of m's last OPT record (packetCookie).
// now is read only when the option holds a server cookie of this server's
// length.
func (c *Cookies) packetState(m []byte, client netip.Addr, now func() time.Time) CookieState {
	cookie, n := packetCookie(m)
	l := len(cookie)
	switch {
	case n == 0:
		return CookieNone
	case n > 1 || (l != clientCookieLen && (l < clientCookieLen+minServerCookieLen || l > clientCookieLen+maxServerCookieLen)):
		return CookieBad // malformed
	case l == clientCookieLen:
		return CookieClientOnly
	case c == nil || l != clientCookieLen+serverCookieLen || !client.IsValid():
		return CookieBad
	}
	if ok, _, _ := c.valid(cookie, client, now()); ok {
		return CookieValid
	}
	return CookieBad
}

// packetCookie finds the COOKIE options (RFC 7873) of the packed message m
// where Middleware finds them once package dns has unpacked it: in the last
// OPT record of the additional section. It returns the data of the first
// COOKIE option of that record and how many it holds: n is 0 when there is
// none, and when m cannot be walked (then package dns would not unpack it
// either). It walks the header's counts, skipping names (compression
// pointers are not followed: a pointer ends a name) and records by their
// lengths, and never reads a byte twice, nor panics. Like package dns it
// takes a message that ends where a record would begin as having no more
// records, whatever its counts say.
func packetCookie(m []byte) (cookie []byte, n int) {
	if len(m) < headerLen {
		return nil, 0
	}
	qd := int(binary.BigEndian.Uint16(m[4:]))
	rrs := int(binary.BigEndian.Uint16(m[6:])) + int(binary.BigEndian.Uint16(m[8:]))
	ar := int(binary.BigEndian.Uint16(m[10:]))
	off := headerLen
	for range qd {
		if off = skipName(m, off); off < 0 || off+4 > len(m) {
			return nil, 0
		}
		off += 4 // type, class
	}
	var opt []byte // rdata of the last OPT record so far
	found := false
	for i := range rrs + ar {
		if off == len(m) {
			break // the counts overstate the records, which package dns accepts
		}
		if off = skipName(m, off); off < 0 || off+10 > len(m) {
			return nil, 0
		}
		typ := binary.BigEndian.Uint16(m[off:])
		end := off + 10 + int(binary.BigEndian.Uint16(m[off+8:]))
		if end > len(m) {
			return nil, 0
		}
		if i >= rrs && typ == dns.TypeOPT {
			opt, found = m[off+10:end], true
		}
		off = end
	}
	if !found {
		return nil, 0
	}
	for len(opt) > 0 {
		if len(opt) < 4 {
			return nil, 0 // package dns does not unpack a cut option
		}
		code := binary.BigEndian.Uint16(opt)
		l := int(binary.BigEndian.Uint16(opt[2:]))
		if 4+l > len(opt) {
			return nil, 0
		}
		if code == dns.EDNS0COOKIE {
			if n == 0 {
				cookie = opt[4 : 4+l]
			}
			n++
		}
		opt = opt[4+l:]
	}
	return cookie, n
}

// skipName returns the offset just past the domain name at off in m, or -1
// if the name runs past the end of m or has a label type that RFC 1035 and
// its successors do not define (0x40, 0x80).
func skipName(m []byte, off int) int {
	for off < len(m) {
		c := int(m[off])
		switch c & 0xC0 {
		case 0x00:
			if c == 0 {
				return off + 1
			}
			off += 1 + c
		case 0xC0: // a compression pointer ends the name
			if off+2 > len(m) {
				return -1
			}
			return off + 2
		default:
			return -1
		}
	}
	return -1
}
