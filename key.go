package rrl

import (
	"encoding/binary"
	"hash/maphash"
	"net"
	"net/netip"
	"strings"
)

// An account is found by a 64-bit keyed hash of what identifies it: the
// client network, the kind of account and, for response accounts, the parts
// of the tuple that BIND compares. The seed is random per RRL, so an attacker
// cannot choose sources or names that collide. Two different keys share an
// account only if their hashes collide, with probability 2^-64 per pair.

// kind is the first byte hashed: a category, or one of the two per-network
// accounts.
const (
	kindRequests = byte(AllowanceLast) + iota
	kindAll
)

// keyHeaderLen is the fixed part of a hashed key: the network (16 bytes),
// kind, family, class and type. The name follows, if it is at most
// shortName bytes long, or else the name's own hash; longNameKind marks
// the second form in the kind byte so that the two cannot meet.
const (
	keyHeaderLen = 16 + 1 + 1 + 2 + 2
	shortName    = 64
	longNameKind = 0x80
)

// network is a client network: the source address masked to the prefix
// length, held as the two halves of its 16-byte (IPv4-mapped for IPv4) form.
type network struct {
	hi, lo uint64
	v4     bool
	bits   uint8
}

// networkOf masks a to the configured prefix length. IPv4-mapped IPv6
// addresses count as IPv4 and zones are ignored. The zero Addr (from a nil or
// unparsable source) becomes 0.0.0.0, whose network all such sources share.
func (r *RRL) networkOf(a netip.Addr) network {
	if !a.IsValid() {
		a = netip.IPv4Unspecified()
	}
	if a.Is4() {
		v4 := a.As4()
		n := network{lo: 0xffff<<32 | uint64(binary.BigEndian.Uint32(v4[:])), v4: true, bits: uint8(r.cfg.ipv4PrefixLength)}
		n.lo &^= 1<<(32-n.bits) - 1
		return n
	}
	b := a.As16()
	n := network{hi: binary.BigEndian.Uint64(b[:8]), lo: binary.BigEndian.Uint64(b[8:]), v4: a.Is4In6()}
	if n.v4 {
		n.bits = uint8(r.cfg.ipv4PrefixLength)
		n.lo &^= 1<<(32-n.bits) - 1
		return n
	}
	n.bits = uint8(r.cfg.ipv6PrefixLength)
	if n.bits <= 64 {
		n.hi &^= 1<<(64-n.bits) - 1
		n.lo = 0
	} else {
		n.lo &^= 1<<(128-n.bits) - 1
	}
	return n
}

func (n network) prefix() netip.Prefix {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], n.hi)
	binary.BigEndian.PutUint64(b[8:], n.lo)
	a := netip.AddrFrom16(b)
	if n.v4 {
		a = a.Unmap()
	}
	return netip.PrefixFrom(a, int(n.bits))
}

// header writes the fixed part of a key into b.
func (n network) header(b []byte, kind byte, class, qtype uint16) {
	_ = b[keyHeaderLen-1]
	binary.BigEndian.PutUint64(b[0:], n.hi)
	binary.BigEndian.PutUint64(b[8:], n.lo)
	b[16] = kind
	b[17] = 6
	if n.v4 {
		b[17] = 4
	}
	binary.BigEndian.PutUint16(b[18:], class)
	binary.BigEndian.PutUint16(b[20:], qtype)
}

// key hashes an account's identity into its key: the client network, the
// kind of account, class, type and name, the name folded to lower case
// (ASCII) and without its trailing dot, so that "Example.COM." and
// "example.com" match. The header and a short name are written straight
// into one buffer and hashed in one call.
func (r *RRL) key(n network, kind byte, class, qtype uint16, name string) uint64 {
	name = strings.TrimSuffix(name, ".")
	var buf [keyHeaderLen + shortName]byte
	if len(name) <= shortName {
		n.header(buf[:], kind, class, qtype)
		foldLower(buf[keyHeaderLen:], name)
		return maphash.Bytes(r.seed, buf[:keyHeaderLen+len(name)])
	}
	n.header(buf[:], kind|longNameKind, class, qtype)
	binary.BigEndian.PutUint64(buf[keyHeaderLen:], r.nameHash(name))
	return maphash.Bytes(r.seed, buf[:keyHeaderLen+8])
}

// nameHash hashes a long name in pieces, which gives the same value as
// hashing it whole.
func (r *RRL) nameHash(name string) uint64 {
	var h maphash.Hash
	h.SetSeed(r.seed)
	var buf [shortName]byte
	for len(name) > 0 {
		n := foldLower(buf[:], name)
		h.Write(buf[:n])
		name = name[n:]
	}
	return h.Sum64()
}

// upperBytes returns 0x80 in each byte of w that is an ASCII capital and 0
// in the others. Clearing the top bits first keeps the additions from
// carrying between bytes.
func upperBytes(w uint64) uint64 {
	const ones, high = 0x0101010101010101, 0x8080808080808080
	low := w &^ high
	atLeastA := low + (0x80-'A')*ones
	pastZ := low + (0x80-'Z'-1)*ones
	return atLeastA &^ pastZ &^ w & high
}

// foldLower copies as much of s into dst as fits, lower-casing ASCII
// letters eight bytes at a time, and returns the number of bytes copied.
// Folding twice changes nothing, so the last eight bytes are folded as one
// word even where they overlap the word before.
func foldLower(dst []byte, s string) int {
	n := min(len(dst), len(s))
	if n < 8 {
		for i := range n {
			c := s[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst[i] = c
		}
		return n
	}
	for i := 0; i < n-8; i += 8 {
		foldWord(dst[i:], s[i:])
	}
	foldWord(dst[n-8:], s[n-8:])
	return n
}

// foldWord lower-cases the first eight bytes of s into dst.
func foldWord(dst []byte, s string) {
	w := load64(s[:8])
	binary.LittleEndian.PutUint64(dst, w|upperBytes(w)>>2) // 0x80>>2 is the case bit
}

// load64 reads eight bytes of a string as a little-endian word (the
// compiler turns this into one load).
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// Source returns the client address and whether the transport is UDP, as
// Debit reads them from src, so that an integration holding a net.Addr can
// read it once and call DebitAddr. See addrOf.
func Source(src net.Addr) (addr netip.Addr, udp bool) { return addrOf(src) }

// addrOf extracts the client address and transport from a net.Addr without
// allocating for the standard types. For other implementations it parses
// String() and asks Network() whether it is UDP. A source whose address
// cannot be had (nil, typed nil, unparsable) yields the zero Addr (see
// networkOf) and is taken as UDP, so that it is limited rather than let
// through.
func addrOf(src net.Addr) (netip.Addr, bool) {
	switch a := src.(type) {
	case nil:
		return netip.Addr{}, true
	case *net.UDPAddr:
		if a == nil {
			return netip.Addr{}, true
		}
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip, true
	case *net.TCPAddr:
		if a == nil {
			return netip.Addr{}, true
		}
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip, !ip.IsValid()
	}
	return parseAddr(src)
}

// parseAddr handles net.Addr implementations other than *net.UDPAddr and
// *net.TCPAddr, including typed nils whose methods panic.
func parseAddr(src net.Addr) (ip netip.Addr, udp bool) {
	defer func() {
		if recover() != nil {
			ip, udp = netip.Addr{}, true
		}
	}()
	s := src.String()
	if ap, err := netip.ParseAddrPort(s); err == nil {
		ip = ap.Addr()
	} else if ip, err = netip.ParseAddr(s); err != nil {
		return netip.Addr{}, true
	}
	network := src.Network()
	return ip, network == "" || strings.HasPrefix(network, "udp")
}
