package miekgrrl

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

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

// cookieResendAge is how old a valid server cookie made with the current
// secret may be and still be sent back to the client as it came rather than
// replaced by a fresh one: RFC 9018 section 4.3 asks for a new cookie once
// the old one is half an hour old, and allows re-sending a younger one.
const cookieResendAge = 30 * time.Minute

// Cookies makes and checks DNS server cookies in the interoperable format of
// RFC 9018 (version 1, SipHash-2-4), so that servers of one anycast set that
// share the secret accept each other's cookies, whatever their software. It
// is safe for concurrent use, including rollover while serving.
//
// An all-zero secret is never used: anyone could make cookies with it.
// NewCookies and Rotate given one, and a zero-value Cookies on first use,
// draw a random secret from crypto/rand instead (good for a single server,
// not for an anycast set, whose servers must share theirs); SetPrevious
// given one leaves no previous secret.
type Cookies struct {
	keys atomic.Pointer[cookieKeys] // read lock-free by Check
	mu   sync.Mutex                 // serialises rollovers
}

// cookieKeys is replaced whole on rollover so that a reader never sees a
// half-written secret. current is never all zero; previous is all zero
// exactly when there is no previous secret.
type cookieKeys struct {
	current     [2]uint64
	previous    [2]uint64
	hasPrevious bool
}

// ParseSecret reads a cookie secret as a configuration writes it: 32 hex
// digits. All zeros is refused: it is what a template placeholder looks
// like, and anyone can make valid cookies with it.
func ParseSecret(s string) ([16]byte, error) {
	var out [16]byte
	if len(s) != 2*len(out) {
		return out, fmt.Errorf("want exactly 32 hex digits, got %d characters", len(s))
	}
	if _, err := hex.Decode(out[:], []byte(s)); err != nil {
		return out, errors.New("want exactly 32 hex digits (0-9, a-f)")
	}
	if out == ([16]byte{}) {
		return out, errors.New("the secret is all zeros; draw a random one, such as with: openssl rand -hex 16")
	}
	return out, nil
}

// ParseSecrets reads the current cookie secret and, optionally, the
// previous one (see SetPrevious), each as ParseSecret reads it; the
// previous one must differ from the current one. It returns them in that
// order.
func ParseSecrets(vals []string) ([][16]byte, error) {
	if len(vals) < 1 || len(vals) > 2 {
		return nil, fmt.Errorf("takes one secret and optionally the previous one (32 hex digits each), got %d values", len(vals))
	}
	var out [][16]byte
	for i, v := range vals {
		s, err := ParseSecret(v)
		if err != nil {
			if i == 1 {
				err = fmt.Errorf("previous secret: %w", err)
			}
			return nil, err
		}
		out = append(out, s)
	}
	if len(out) == 2 && out[0] == out[1] {
		return nil, errors.New("the previous secret is the current one; give the secret being rotated out, or none")
	}
	return out, nil
}

// NewCookies returns Cookies that make server cookies with secret. The secret
// must be random (crypto/rand) and shared by every server of an anycast set.
// An all-zero secret is replaced by a random one.
func NewCookies(secret [16]byte) *Cookies {
	c := new(Cookies)
	c.keys.Store(&cookieKeys{current: currentKey(secret)})
	return c
}

// SetPrevious makes cookies made with secret, the secret used before the
// current one, keep validating during a rollover (RFC 9018 section 5).
// New cookies are always made with the current secret. An all-zero secret
// is taken as none: cookies made with it never validate.
func (c *Cookies) SetPrevious(secret [16]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := *c.load()
	k.previous = sipKey(secret)
	k.hasPrevious = k.previous != [2]uint64{}
	c.keys.Store(&k)
}

// Rotate makes secret the current secret and the current one the previous.
// An all-zero secret is replaced by a random one.
func (c *Cookies) Rotate(secret [16]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.load()
	c.keys.Store(&cookieKeys{current: currentKey(secret), previous: old.current, hasPrevious: true})
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

// load returns the keys. A Cookies not made by NewCookies gets a random
// secret the first time it is used.
func (c *Cookies) load() *cookieKeys {
	if k := c.keys.Load(); k != nil {
		return k
	}
	var secret [16]byte // all zero: currentKey draws a random one
	c.keys.CompareAndSwap(nil, &cookieKeys{current: currentKey(secret)})
	return c.keys.Load()
}

// currentKey returns the SipHash key for secret, or for a random secret
// when secret is all zero.
func currentKey(secret [16]byte) [2]uint64 {
	for secret == [16]byte{} {
		rand.Read(secret[:]) // never fails (it crashes the program instead)
	}
	return sipKey(secret)
}

func sipKey(secret [16]byte) [2]uint64 {
	return [2]uint64{binary.LittleEndian.Uint64(secret[:8]), binary.LittleEndian.Uint64(secret[8:])}
}

// Check classifies the COOKIE option of req sent from client. CookieValid
// means that the server cookie is 16 bytes of version 1, made by this server
// (current or previous secret) for this client cookie and client address, and
// stamped no more than MaxCookieAge before now and no more than
// MaxCookieFuture after it. A malformed option (see MalformedCookie) is
// CookieBad. A nil c, req or client never validates.
func (c *Cookies) Check(req *dns.Msg, client netip.Addr, now time.Time) CookieState {
	o, n := cookieOptions(req)
	if n == 0 {
		return CookieNone
	}
	return c.classify(o, n, client, now).state
}

// MalformedCookieReply is the reply to a request that MalformedCookie
// refuses: FORMERR, as RFC 7873 section 5.2.2 asks, with an OPT record
// without options if the request had one (the client's cookie cannot be
// read, so none is sent back).
func MalformedCookieReply(req *dns.Msg) *dns.Msg {
	return replyWithOPT(req, dns.RcodeFormatError)
}

// MalformedCookie reports whether req carries a COOKIE option that RFC 7873
// section 5.2.2 says to answer with FORMERR: one that is not 8 bytes long
// nor 16 to 40, or several COOKIE options. The middleware answers such
// requests so itself.
func MalformedCookie(req *dns.Msg) bool {
	o, n := cookieOptions(req)
	if n == 0 {
		return false
	}
	if n > 1 {
		return true
	}
	var buf [clientCookieLen + maxServerCookieLen]byte
	_, ok := decodeCookie(buf[:], o.Cookie)
	return !ok
}

// cookieInfo is what a request's COOKIE option amounts to, for the
// middleware, which decodes the option once.
type cookieInfo struct {
	opt       *dns.EDNS0_COOKIE // the request's option
	state     CookieState
	malformed bool                  // FORMERR (RFC 7873 section 5.2.2)
	cc        [clientCookieLen]byte // the client cookie, if hasCC
	hasCC     bool
	// resend is set when the option holds a valid server cookie made with
	// the current secret less than cookieResendAge ago: the response may
	// carry the option as it came (RFC 9018 section 4.3).
	resend bool
}

// classify is Check for the first of the n COOKIE options of a request.
func (c *Cookies) classify(o *dns.EDNS0_COOKIE, n int, client netip.Addr, now time.Time) (ci cookieInfo) {
	ci.opt = o
	var buf [clientCookieLen + maxServerCookieLen]byte
	l, ok := decodeCookie(buf[:], o.Cookie)
	if !ok || n > 1 {
		ci.state, ci.malformed = CookieBad, true
		return ci
	}
	copy(ci.cc[:], buf[:])
	ci.hasCC = true
	switch {
	case l == clientCookieLen:
		ci.state = CookieClientOnly
	case c == nil || l != clientCookieLen+serverCookieLen || !client.IsValid():
		ci.state = CookieBad // includes other servers' formats: we cannot check them
	default:
		ok, current, age := c.valid(buf[:l], client, now)
		if ok {
			ci.state = CookieValid
			ci.resend = current && age < int64(cookieResendAge/time.Second)
		} else {
			ci.state = CookieBad
		}
	}
	return ci
}

// valid checks a 24-byte cookie (client cookie, then server cookie). It
// reports whether the current secret made it, and its age in seconds
// (negative when stamped in the future).
func (c *Cookies) valid(cookie []byte, client netip.Addr, now time.Time) (ok, current bool, age int64) {
	server := cookie[clientCookieLen:]
	if server[0] != cookieVersion {
		return false, false, 0
	}
	stamp := binary.BigEndian.Uint32(server[4:8])
	// Serial number arithmetic (RFC 1982), as RFC 9018 prescribes: the
	// timestamp wraps in 2106.
	age = int64(int32(uint32(now.Unix()) - stamp))
	if age > int64(MaxCookieAge/time.Second) || -age > int64(MaxCookieFuture/time.Second) {
		return false, false, age
	}
	k := c.load()
	var want [8]byte
	// The hash covers the reserved bytes as received (RFC 9018 section 4.4).
	hashCookie(&want, k.current, cookie[:clientCookieLen], server[:8], client)
	if subtle.ConstantTimeCompare(want[:], server[8:]) == 1 {
		return true, true, age
	}
	if k.hasPrevious {
		hashCookie(&want, k.previous, cookie[:clientCookieLen], server[:8], client)
		if subtle.ConstantTimeCompare(want[:], server[8:]) == 1 {
			return true, false, age
		}
	}
	return false, false, age
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

// AddServerCookie puts into resp, the response to req, a COOKIE option with
// req's client cookie and a fresh server cookie, replacing any COOKIE option
// resp had, and adding an OPT record to resp if it has none (before a TSIG
// record that ends the additional section, where package dns looks for
// it). The messages come in the order of Tuple and SlipReply: request, then
// response. It changes resp's additional section, not the records in it: the
// OPT record that gets the cookie is a copy. It does nothing when c is nil or
// req has no usable client cookie.
func (c *Cookies) AddServerCookie(req, resp *dns.Msg, client netip.Addr, now time.Time) {
	if c == nil || resp == nil || !client.IsValid() {
		return
	}
	rc := c.Request(req, client, func() time.Time { return now })
	rc.resend = false // always a fresh cookie, as documented
	*resp = *rc.Reply(resp, false)
}

// cookieTextLen is the length of the hex text of a response's COOKIE option:
// the client cookie and a version 1 server cookie.
const cookieTextLen = 2 * (clientCookieLen + serverCookieLen)

// freshCookie fills o with a COOKIE option holding the client cookie cc
// and a fresh server cookie, its hex text (as package dns keeps it) written
// in text, which must not change afterwards; it returns o. Keeping the text
// next to the option saves an allocation per response.
func (c *Cookies) freshCookie(o *dns.EDNS0_COOKIE, text *[cookieTextLen]byte, cc *[clientCookieLen]byte, client netip.Addr, now time.Time) *dns.EDNS0_COOKIE {
	s := c.ServerCookie(cc[:], client, now)
	encodeHex(text[:2*clientCookieLen], cc[:])
	encodeHex(text[2*clientCookieLen:], s[:])
	*o = dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: unsafe.String(&text[0], len(text))}
	return o
}

// cookieOptions returns the first COOKIE option of m and how many m has.
func cookieOptions(m *dns.Msg) (first *dns.EDNS0_COOKIE, n int) {
	opt := findOPT(m)
	if opt == nil {
		return nil, 0
	}
	for _, o := range opt.Option {
		if c, ok := o.(*dns.EDNS0_COOKIE); ok && c != nil {
			if n == 0 {
				first = c
			}
			n++
		}
	}
	return first, n
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

// AcceptCookieOnly is a dns.MsgAcceptFunc that accepts what
// dns.DefaultMsgAcceptFunc accepts and, in addition, queries without a
// question, which RFC 7873 section 5.4 uses to learn a server cookie.
// Middleware answers those itself, without calling its handler; a handler
// served without Middleware must be ready for requests with no question.
func AcceptCookieOnly(dh dns.Header) dns.MsgAcceptAction {
	const qr, opcodeShift = 1 << 15, 11
	if dh.Qdcount == 0 && dh.Bits&qr == 0 && int(dh.Bits>>opcodeShift)&0xF == dns.OpcodeQuery &&
		dh.Ancount == 0 && dh.Nscount == 0 && dh.Arcount >= 1 && dh.Arcount <= 2 {
		return dns.MsgAccept
	}
	return dns.DefaultMsgAcceptFunc(dh)
}
