package replay

import "encoding/binary"

// Cookie presence in a query, judged from its wire form.
const (
	cookieNone      = iota // no COOKIE option
	cookieClient           // a client cookie alone
	cookieServer           // a client and a server cookie
	cookieMalformed        // a COOKIE option of a length RFC 7873 does not allow
)

// queryInfo is what the replay needs from a query, read straight from the
// wire so that queries cost no allocation: its ID, whether it has a
// question, where the question's name is, and its cookie.
type queryInfo struct {
	id       uint16
	question bool
	nameEnd  int // offset after the question's name, when question is set
	cookie   int
	optLen   int // length of the OPT record, 0 without one
}

// readQuery reads a query's header, question and OPT record. ok is false
// when the header or the question is malformed; like package dns, it reads
// the records that follow only as far as they are well formed.
func readQuery(w []byte) (q queryInfo, ok bool) {
	if len(w) < dnsHeaderLen {
		return q, false
	}
	q.id = binary.BigEndian.Uint16(w)
	qd := int(binary.BigEndian.Uint16(w[4:]))
	an := int(binary.BigEndian.Uint16(w[6:]))
	ns := int(binary.BigEndian.Uint16(w[8:]))
	ar := int(binary.BigEndian.Uint16(w[10:]))
	off := dnsHeaderLen
	for i := 0; i < qd; i++ {
		end, ok := skipName(w, off)
		if !ok {
			return q, i > 0
		}
		if end+4 > len(w) { // package dns reads a question cut short as type and class 0
			if i == 0 {
				q.question, q.nameEnd = true, end
			}
			return q, true
		}
		if i == 0 {
			q.question, q.nameEnd = true, end
		}
		off = end + 4
	}
	for i := 0; i < an+ns+ar; i++ {
		end, ok := skipName(w, off)
		if !ok || end+10 > len(w) {
			return q, true
		}
		typ := binary.BigEndian.Uint16(w[end:])
		rdlen := int(binary.BigEndian.Uint16(w[end+8:]))
		rdata := end + 10
		if rdata+rdlen > len(w) {
			return q, true
		}
		if typ == 41 && i >= an+ns && q.optLen == 0 {
			q.cookie = optCookie(w[rdata : rdata+rdlen])
			q.optLen = rdata + rdlen - off
		}
		off = rdata + rdlen
	}
	return q, true
}

// optCookie finds the COOKIE option (code 10) in the RDATA of an OPT record.
func optCookie(opts []byte) int {
	for len(opts) >= 4 {
		code := binary.BigEndian.Uint16(opts)
		n := int(binary.BigEndian.Uint16(opts[2:]))
		if 4+n > len(opts) {
			return cookieNone
		}
		if code == 10 {
			switch {
			case n == 8:
				return cookieClient
			case n >= 16 && n <= 40:
				return cookieServer
			}
			return cookieMalformed
		}
		opts = opts[4+n:]
	}
	return cookieNone
}

// skipName returns the offset after the name at off. A compression pointer
// ends a name.
func skipName(w []byte, off int) (int, bool) {
	for steps := 0; off < len(w) && steps < 128; steps++ {
		l := int(w[off])
		switch {
		case l == 0:
			return off + 1, true
		case l&0xc0 == 0xc0:
			if off+2 > len(w) {
				return 0, false
			}
			return off + 2, true
		case l&0xc0 != 0:
			return 0, false
		}
		off += 1 + l
	}
	return 0, false
}

// appendName appends the name at off in w to dst in lower case, with a
// trailing dot, following compression pointers; "." for the root. It
// reports false for a malformed name.
func appendName(dst, w []byte, off int) ([]byte, bool) {
	start := len(dst)
	for hops := 0; hops < 64; {
		if off >= len(w) {
			return dst, false
		}
		l := int(w[off])
		switch {
		case l == 0:
			if len(dst) == start {
				dst = append(dst, '.')
			}
			return dst, true
		case l&0xc0 == 0xc0:
			if off+2 > len(w) {
				return dst, false
			}
			off = int(binary.BigEndian.Uint16(w[off:]) & 0x3fff)
			hops++
			continue
		case l&0xc0 != 0 || off+1+l > len(w):
			return dst, false
		}
		for _, c := range w[off+1 : off+1+l] {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
		}
		dst = append(dst, '.')
		if len(dst)-start > 255 {
			return dst, false
		}
		off += 1 + l
	}
	return dst, false
}
