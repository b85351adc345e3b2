package rrl

import (
	"crypto/rand"
	"encoding/binary"
	"math/bits"
	"net"
	"net/netip"
	"strings"
)

// An account is found by a 64-bit hash of what identifies it: the client
// network, the kind of account and, for response accounts, the parts of the
// tuple that BIND compares. The hash is built like wyhash, the construction
// Go's runtime uses for map keys on machines without AES: 64-bit words
// combined in pairs by a 128-bit multiplication whose halves are xored,
// each word first xored with one of four secrets drawn at random for each
// RRL. An attacker sees no hash and cannot learn the secrets, so cannot
// choose sources or names that collide. The table keeps part of the key
// (see table.go and the package documentation for the chance that two
// accounts merge). Everything stays in registers: hashing is a few
// multiplications, with no buffer to fill.

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
func (m *netMasks) networkOf(a netip.Addr) network {
	switch {
	case a.Is4():
		b := a.As4()
		return m.mask(0, mapped|uint64(binary.BigEndian.Uint32(b[:])))
	case !a.IsValid():
		return m.mask(0, mapped)
	}
	b := a.As16() // IPv4-mapped as IPv4, without the zone: mask tells the families apart
	return m.mask(binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:]))
}

// networkOfIP is networkOf for the bytes of a net.IP, read without making
// a netip.Addr, which takes longer. An IP of any length but 4 and 16 is
// 0.0.0.0, as netip.AddrFromSlice would have it.
func (m *netMasks) networkOfIP(ip net.IP) network {
	switch len(ip) {
	case 4:
		return m.mask(0, mapped|uint64(binary.BigEndian.Uint32(ip)))
	case 16:
		return m.mask(binary.BigEndian.Uint64(ip[:8]), binary.BigEndian.Uint64(ip[8:]))
	}
	return m.mask(0, mapped)
}

// mapped is the second half of an IPv4-mapped IPv6 address with the IPv4
// address 0.0.0.0.
const mapped = 0xffff << 32

// mask returns the network of the 16-byte address hi, lo (IPv4 addresses
// IPv4-mapped), masked to the prefix length of its family.
func (m *netMasks) mask(hi, lo uint64) network {
	if hi == 0 && lo>>32 == mapped>>32 {
		return network{lo: lo & m.v4, v4: true, bits: m.v4Bits}
	}
	return network{hi: hi & m.v6hi, lo: lo & m.v6lo, bits: m.v6Bits}
}

// netMasks are the masks of ipv4-prefix-length and ipv6-prefix-length,
// made once for an RRL.
type netMasks struct {
	v4, v6hi, v6lo uint64 // of the 16-byte address (IPv4-mapped for IPv4)
	v4Bits, v6Bits uint8
}

// netMasksOf returns the masks of the prefix lengths v4 (1 to 32) and v6
// (1 to 128).
func netMasksOf(v4, v6 int) netMasks {
	b4, b6 := uint(v4), uint(v6) // shifts by 64 give 0
	return netMasks{
		v4:     ^uint64(0) &^ (1<<(32-b4) - 1),
		v6hi:   ^uint64(0) &^ (1<<(64-min(b6, 64)) - 1),
		v6lo:   ^uint64(0) &^ (1<<(128-max(b6, 64)) - 1),
		v4Bits: uint8(v4), v6Bits: uint8(v6),
	}
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

// hashKey is the secrets of an RRL's account hash.
type hashKey [4]uint64

func newHashKey() hashKey {
	var b [32]byte
	rand.Read(b[:]) // never fails (it would crash the program)
	var k hashKey
	for i := range k {
		k[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return k
}

// mum multiplies two words into 128 bits and folds the halves together.
func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// account hashes an account's identity into its key: the client network
// and its prefix length, the kind of account, class, type and name, the name folded to lower case
// (ASCII) and without its trailing dot, so that "Example.COM." and
// "example.com" match. The name is read eight bytes at a time; the last
// word of a name whose length is not a multiple of eight overlaps the one
// before, which the length (hashed too) makes unambiguous. The network, the
// name's last 16 bytes, and the rest are hashed apart and then together,
// so that the multiplications of a short key overlap in time.
func (k *hashKey) account(n network, kind LimitKind, class, qtype uint16, name string) uint64 {
	return k.accountOf(n, uint64(kind)<<56|uint64(class)<<32|uint64(qtype)<<16, name)
}

// accountOf is account with kind, class and type in one word, as account
// puts them, so that its arguments fit in registers.
func (k *hashKey) accountOf(n network, meta uint64, name string) uint64 {
	name = strings.TrimSuffix(name, ".")
	family := uint64(6)
	if n.v4 {
		family = 4
	}
	meta |= family<<48 | uint64(n.bits)
	net := mum(n.hi^k[0], n.lo^k[1])
	head := mum(meta^k[2], uint64(len(name))^k[3])
	for len(name) > 16 {
		head = mum(foldWord(load64(name))^k[1]^head, foldWord(load64(name[8:]))^k[2])
		name = name[16:]
	}
	var a, b uint64
	switch {
	case len(name) > 8:
		a, b = load64(name), load64(name[len(name)-8:])
	case len(name) == 8:
		a = load64(name)
	default:
		for i := range len(name) {
			a |= uint64(name[i]) << (8 * i)
		}
	}
	tail := mum(foldWord(a)^k[0], foldWord(b)^k[3])
	return mum(net^tail^k[2], head^k[1])
}

// prefixOf hashes the key of a request prefix's account: the halves of
// the network, already masked, and prefixMeta of its kind and prefix
// length (so that the accounts of 10.0.0.0/8 and 10.0.0.0/16 differ),
// which a request's debit has ready. It is account for a key without
// class, type and name, in two multiplications rather than four.
func (k *hashKey) prefixOf(hi, lo, meta uint64) uint64 {
	return mum(mum(hi^k[0], lo^k[1])^k[2], meta^k[3])
}

// prefixMeta is the word of a request prefix's key that holds its kind
// and length.
func prefixMeta(kind LimitKind, bits uint8) uint64 { return uint64(kind)<<56 | uint64(bits) }

// foldWord lower-cases the ASCII capitals among the eight bytes of w.
func foldWord(w uint64) uint64 { return w | upperBytes(w)>>2 } // 0x80>>2 is the case bit

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

// masked returns n masked to bits prefix bits (of its 32 for IPv4); bits
// no shorter than n's leave it as it is.
func (n network) masked(bits uint8) network {
	if bits >= n.bits {
		return n
	}
	b := uint(bits)
	if n.v4 {
		return network{lo: n.lo &^ (1<<(32-b) - 1), v4: true, bits: bits}
	}
	return network{hi: n.hi &^ (1<<(64-min(b, 64)) - 1), lo: n.lo &^ (1<<(128-max(b, 64)) - 1), bits: bits}
}
