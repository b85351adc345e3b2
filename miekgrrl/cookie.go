package miekgrrl

import (
	"crypto/subtle"
	"encoding/binary"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dchest/siphash"
	"github.com/miekg/dns"
)

// CookieState is what the DNS COOKIE option of a request amounts to.
type CookieState uint8

const (
	CookieNone       CookieState = iota // no COOKIE option (or no OPT record)
	CookieClientOnly                    // a client cookie and no server cookie
	CookieValid                         // a server cookie this server made for this client, fresh enough
	CookieBad                           // a malformed option, or a server cookie that is wrong, foreign or expired
)

var cookieStateNames = [...]string{"CookieNone", "CookieClientOnly", "CookieValid", "CookieBad"}

// String returns the identifier of s, such as "CookieValid".
func (s CookieState) String() string {
	if int(s) < len(cookieStateNames) {
		return cookieStateNames[s]
	}
	return "CookieState(?)"
}

// Lengths from RFC 7873 section 4 and RFC 9018 section 4.
const (
	clientCookieLen    = 8
	minServerCookieLen = 8
	maxServerCookieLen = 32
	serverCookieLen    = 16 // version 1: version, 3 reserved, timestamp, hash
	cookieVersion      = 1
)

// How far a server cookie's timestamp may lie from now (RFC 9018 section
// 4.3): an hour in the past, five minutes in the future for clock skew
// between the servers of an anycast set.
const (
	MaxCookieAge    = time.Hour
	MaxCookieFuture = 5 * time.Minute
)

// Cookies makes and checks DNS server cookies in the interoperable format of
// RFC 9018 (version 1, SipHash-2-4), so that servers of one anycast set that
// share the secret accept each other's cookies, whatever their software. It
// is safe for concurrent use, including rollover while serving. Make it with
// NewCookies: the zero value works, but with an all-zero secret.
type Cookies struct {
	keys atomic.Pointer[cookieKeys] // read lock-free by Check
	mu   sync.Mutex                 // serialises rollovers
}

// cookieKeys is replaced whole on rollover so that a reader never sees a
// half-written secret.
type cookieKeys struct {
	current     [2]uint64
	previous    [2]uint64
	hasPrevious bool
}

// NewCookies returns Cookies that make server cookies with secret. The secret
// must be random (crypto/rand) and shared by every server of an anycast set.
func NewCookies(secret [16]byte) *Cookies {
	c := new(Cookies)
	c.keys.Store(&cookieKeys{current: sipKey(secret)})
	return c
}

// SetPrevious makes cookies made with secret, the secret used before the
// current one, keep validating during a rollover (RFC 9018 section 5).
// New cookies are always made with the current secret.
func (c *Cookies) SetPrevious(secret [16]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := *c.load()
	k.previous, k.hasPrevious = sipKey(secret), true
	c.keys.Store(&k)
}

// Rotate makes secret the current secret and the current one the previous.
func (c *Cookies) Rotate(secret [16]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.load()
	c.keys.Store(&cookieKeys{current: sipKey(secret), previous: old.current, hasPrevious: true})
}

// ForgetPrevious ends a rollover: cookies made with the previous secret no
// longer validate.
func (c *Cookies) ForgetPrevious() {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := *c.load()
	k.previous, k.hasPrevious = [2]uint64{}, false
	c.keys.Store(&k)
}

var zeroKeys cookieKeys

// load returns the keys, all zero for a Cookies not made by NewCookies.
func (c *Cookies) load() *cookieKeys {
	if k := c.keys.Load(); k != nil {
		return k
	}
	return &zeroKeys
}

func sipKey(secret [16]byte) [2]uint64 {
	return [2]uint64{binary.LittleEndian.Uint64(secret[:8]), binary.LittleEndian.Uint64(secret[8:])}
}

// Check classifies the COOKIE option of req sent from client. CookieValid
// means that the server cookie is 16 bytes of version 1, made by this server
// (current or previous secret) for this client cookie and client address, and
// stamped no more than MaxCookieAge before now and no more than
// MaxCookieFuture after it. A nil c, req or client never validates.
func (c *Cookies) Check(req *dns.Msg, client netip.Addr, now time.Time) CookieState {
	st, _, _ := c.check(req, client, now)
	return st
}

// check is Check that also returns the client cookie, when there is one, for
// the response's cookie: the middleware decodes the option once.
func (c *Cookies) check(req *dns.Msg, client netip.Addr, now time.Time) (st CookieState, cc [clientCookieLen]byte, hasCC bool) {
	raw, ok := requestCookie(req)
	if !ok {
		return CookieNone, cc, false
	}
	var buf [clientCookieLen + maxServerCookieLen]byte
	n, ok := decodeCookie(buf[:], raw)
	if !ok {
		return CookieBad, cc, false
	}
	copy(cc[:], buf[:])
	switch {
	case n == clientCookieLen:
		st = CookieClientOnly
	case c == nil || n != clientCookieLen+serverCookieLen || !client.IsValid():
		st = CookieBad // includes other servers' formats: we cannot check them
	case c.valid(buf[:n], client, now):
		st = CookieValid
	default:
		st = CookieBad
	}
	return st, cc, true
}

// valid checks a 24-byte cookie (client cookie, then server cookie).
func (c *Cookies) valid(cookie []byte, client netip.Addr, now time.Time) bool {
	server := cookie[clientCookieLen:]
	if server[0] != cookieVersion {
		return false
	}
	stamp := binary.BigEndian.Uint32(server[4:8])
	// Serial number arithmetic (RFC 1982), as RFC 9018 prescribes: the
	// timestamp wraps in 2106.
	age := int64(int32(uint32(now.Unix()) - stamp))
	if age > int64(MaxCookieAge/time.Second) || -age > int64(MaxCookieFuture/time.Second) {
		return false
	}
	k := c.load()
	var want [8]byte
	// The hash covers the reserved bytes as received (RFC 9018 section 4.4).
	hashCookie(&want, k.current, cookie[:clientCookieLen], server[:8], client)
	ok := subtle.ConstantTimeCompare(want[:], server[8:]) == 1
	if k.hasPrevious {
		hashCookie(&want, k.previous, cookie[:clientCookieLen], server[:8], client)
		ok = subtle.ConstantTimeCompare(want[:], server[8:]) == 1 || ok
	}
	return ok
}

// hashCookie computes SipHash-2-4 over client cookie | version | reserved |
// timestamp | client address (4 bytes for IPv4, 16 for IPv6) and stores it
// as the hash field is sent: the 64-bit result, little-endian, as the
// reference implementation of SipHash outputs it.
func hashCookie(out *[8]byte, key [2]uint64, clientCookie, head []byte, client netip.Addr) {
	var in [clientCookieLen + 8 + 16]byte
	n := copy(in[:], clientCookie)
	n += copy(in[n:], head)
	// An IPv4 client seen through a dual-stack socket is still an IPv4
	// client: other servers of the anycast set see it as one.
	client = client.Unmap()
	if client.Is4() {
		a := client.As4()
		n += copy(in[n:], a[:])
	} else {
		a := client.As16()
		n += copy(in[n:], a[:])
	}
	binary.LittleEndian.PutUint64(out[:], siphash.Hash(key[0], key[1], in[:n]))
}

// ServerCookie returns a fresh version 1 server cookie for clientCookie and
// client, stamped now, made with the current secret. A client cookie is 8
// bytes; a longer one is cut and a shorter one padded with zeros.
func (c *Cookies) ServerCookie(clientCookie []byte, client netip.Addr, now time.Time) [16]byte {
	var cc [clientCookieLen]byte
	copy(cc[:], clientCookie)
	var s [serverCookieLen]byte
	s[0] = cookieVersion
	binary.BigEndian.PutUint32(s[4:8], uint32(now.Unix()))
	var h [8]byte
	hashCookie(&h, c.load().current, cc[:], s[:8], client)
	copy(s[8:], h[:])
	return s
}

// AddServerCookie puts into resp's OPT record a COOKIE option with req's
// client cookie and a fresh server cookie, replacing any COOKIE option resp
// had, and adding an OPT record to resp if it has none. It does nothing when
// c is nil or req has no usable client cookie.
func (c *Cookies) AddServerCookie(resp, req *dns.Msg, client netip.Addr, now time.Time) {
	if c == nil || resp == nil || !client.IsValid() {
		return
	}
	if cc, ok := clientCookie(req); ok {
		c.addServerCookie(resp, req, &cc, client, now)
	}
}

// addServerCookie is AddServerCookie with the client cookie already decoded.
func (c *Cookies) addServerCookie(resp, req *dns.Msg, cc *[clientCookieLen]byte, client netip.Addr, now time.Time) {
	setCookie(resp, req, c.cookieText(cc, client, now))
}

// cookieText returns the COOKIE option text for a response: the client
// cookie then a fresh server cookie, in hex as package dns keeps it.
func (c *Cookies) cookieText(cc *[clientCookieLen]byte, client netip.Addr, now time.Time) string {
	s := c.ServerCookie(cc[:], client, now)
	var text [2 * (clientCookieLen + serverCookieLen)]byte
	encodeHex(text[:2*clientCookieLen], cc[:])
	encodeHex(text[2*clientCookieLen:], s[:])
	return string(text[:])
}

// clientCookie returns the client cookie of req, when req's COOKIE option is
// well-formed enough to have one.
func clientCookie(req *dns.Msg) (cc [clientCookieLen]byte, ok bool) {
	raw, ok := requestCookie(req)
	if !ok {
		return cc, false
	}
	var buf [clientCookieLen + maxServerCookieLen]byte
	if _, ok := decodeCookie(buf[:], raw); !ok {
		return cc, false
	}
	copy(cc[:], buf[:clientCookieLen])
	return cc, true
}

// requestCookie returns the hex text of the first COOKIE option of m.
func requestCookie(m *dns.Msg) (string, bool) {
	opt := findOPT(m)
	if opt == nil {
		return "", false
	}
	for _, o := range opt.Option {
		if c, ok := o.(*dns.EDNS0_COOKIE); ok && c != nil {
			return c.Cookie, true
		}
	}
	return "", false
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

// decodeCookie decodes the hex text of a COOKIE option into buf and returns
// its length, checking the lengths RFC 7873 allows: a client cookie of 8
// bytes, alone or followed by a server cookie of 8 to 32 bytes.
func decodeCookie(buf []byte, text string) (int, bool) {
	if len(text)%2 != 0 {
		return 0, false
	}
	n := len(text) / 2
	if n != clientCookieLen && (n < clientCookieLen+minServerCookieLen || n > clientCookieLen+maxServerCookieLen) {
		return 0, false
	}
	var bad byte
	for i := 0; i < n; i++ {
		hi, lo := unhex[text[2*i]], unhex[text[2*i+1]]
		bad |= hi | lo
		buf[i] = hi<<4 | lo&0xf
	}
	return n, bad&0xf0 == 0
}

// unhex maps a hex digit to its value and anything else to 0xff.
var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := byte(0); i < 10; i++ {
		t['0'+i] = i
	}
	for i := byte(0); i < 6; i++ {
		t['a'+i], t['A'+i] = 10+i, 10+i
	}
	return t
}()

const hexDigits = "0123456789abcdef"

func encodeHex(dst, src []byte) {
	for i, b := range src {
		dst[2*i], dst[2*i+1] = hexDigits[b>>4], hexDigits[b&0xf]
	}
}

// defaultUDPSize is the payload size advertised in an OPT record this package
// has to add: the size recommended by DNS Flag Day 2020 to avoid
// fragmentation.
const defaultUDPSize = 1232

// cookieOption holds a COOKIE option and what it may need around it, so
// that attaching it costs one allocation (plus the text) in the usual cases.
type cookieOption struct {
	cookie dns.EDNS0_COOKIE
	opts   [1]dns.EDNS0
}

// setCookie stores the hex text cookie in resp's COOKIE option, replacing any.
// It never writes into the request's OPT record or option array, which a
// handler may have copied into resp.
func setCookie(resp, req *dns.Msg, text string) {
	b := &cookieOption{cookie: dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: text}}
	reqOPT, opt := findOPT(req), findOPT(resp)
	switch {
	case opt == nil:
		opt = newOPT(reqOPT)
		resp.Extra = append(resp.Extra, opt)
	case opt == reqOPT:
		cp := *opt
		for i, rr := range resp.Extra {
			if rr == reqOPT {
				resp.Extra[i] = &cp
			}
		}
		opt = &cp
	}
	opt.Option = withCookie(opt.Option, &b.cookie, b.opts[:0])
}

// withCookie returns options without any COOKIE option and with c at the
// end, in spare (capacity 1) when options is empty and in a new array
// otherwise, so that an array shared with the request is never written.
func withCookie(options []dns.EDNS0, c *dns.EDNS0_COOKIE, spare []dns.EDNS0) []dns.EDNS0 {
	if len(options) == 0 {
		return append(spare, c)
	}
	out := make([]dns.EDNS0, 0, len(options)+1)
	for _, o := range options {
		if _, ok := o.(*dns.EDNS0_COOKIE); !ok {
			out = append(out, o)
		}
	}
	return append(out, c)
}

// newOPT returns an OPT record for a response to a request with reqOPT
// (which may be nil): our UDP size and the request's DO bit.
func newOPT(reqOPT *dns.OPT) *dns.OPT {
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	opt.SetUDPSize(defaultUDPSize)
	if reqOPT != nil && reqOPT.Do() {
		opt.SetDo()
	}
	return opt
}

// AcceptCookieOnly is a dns.MsgAcceptFunc that accepts what
// dns.DefaultMsgAcceptFunc accepts and, in addition, queries without a
// question, which RFC 7873 section 5.4 uses to learn a server cookie. The
// handler must be ready for requests with no question.
func AcceptCookieOnly(dh dns.Header) dns.MsgAcceptAction {
	const qr, opcodeShift = 1 << 15, 11
	if dh.Qdcount == 0 && dh.Bits&qr == 0 && int(dh.Bits>>opcodeShift)&0xF == dns.OpcodeQuery &&
		dh.Ancount == 0 && dh.Nscount == 0 && dh.Arcount >= 1 && dh.Arcount <= 2 {
		return dns.MsgAccept
	}
	return dns.DefaultMsgAcceptFunc(dh)
}
