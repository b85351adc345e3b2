package kerneldrop

import (
	"encoding/binary"
	"net/netip"
)

// The maps' sizes and layouts, shared by the program and user space.
const (
	// listenerKeySize: address (16, IPv4 mapped), port (2, network
	// order), zero (2), interface index (4, host order).
	listenerKeySize = 24
	// blockedKeySize: prefix length (4, host order, counting the tag's 32
	// bits), tag (4, host order: group<<1 | family), address (16; IPv4 in
	// the first 4 bytes).
	blockedKeySize = 24

	// maxGroups is how many Lists a process can have open at once: each
	// has a group, its listeners point to it and its networks are tagged
	// with it.
	maxGroups = 1024
	// maxNetworksLimit is the largest MaxNetworks.
	maxNetworksLimit = 1 << 16
)

// normalize returns the network p names as the kernel keys it: masked,
// an IPv4-mapped IPv6 prefix of at least 96 bits as the IPv4 prefix it
// maps, and ok false for an invalid prefix. (A netip.Prefix has no zone.)
func normalize(p netip.Prefix) (netip.Prefix, bool) {
	if !p.IsValid() {
		return netip.Prefix{}, false
	}
	a, bits := p.Addr(), p.Bits()
	if a.Is4In6() && bits >= 96 {
		a, bits = a.Unmap(), bits-96
	}
	p, err := a.Prefix(bits)
	return p, err == nil
}

// blockedKey returns the blocked map's key for network p (normalized)
// under group.
func blockedKey(group uint32, p netip.Prefix) [blockedKeySize]byte {
	var k [blockedKeySize]byte
	a := p.Addr()
	family, bits := uint32(familyIPv6Key), uint32(p.Bits())
	if a.Is4() {
		family = familyIPv4Key
		b := a.As4()
		copy(k[8:], b[:])
	} else {
		b := a.As16()
		copy(k[8:], b[:])
	}
	binary.NativeEndian.PutUint32(k[0:], 32+bits)
	binary.NativeEndian.PutUint32(k[4:], group<<1|family)
	return k
}

const (
	familyIPv4Key = 0
	familyIPv6Key = 1
)

// listenerAddr returns ap as a listener: the address unmapped and without
// a zone, ok false for an invalid address or port 0.
func listenerAddr(ap netip.AddrPort) (netip.AddrPort, bool) {
	if !ap.IsValid() || ap.Port() == 0 {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port()), true
}

// listenerKeys returns the listener map's keys for ap (from listenerAddr)
// on the interface ifindex: one, or for [::] two, since a socket bound to
// [::] (as Go's ":53" is) receives IPv4 too, addressed ::ffff:0.0.0.0 in
// the map.
func listenerKeys(ap netip.AddrPort, ifindex uint32) [][listenerKeySize]byte {
	key := func(a netip.Addr) [listenerKeySize]byte {
		var k [listenerKeySize]byte
		b := a.As16() // IPv4 comes out mapped
		copy(k[:16], b[:])
		binary.BigEndian.PutUint16(k[16:], ap.Port())
		binary.NativeEndian.PutUint32(k[20:], ifindex)
		return k
	}
	a := ap.Addr()
	if a == netip.IPv6Unspecified() {
		return [][listenerKeySize]byte{key(a), key(netip.IPv4Unspecified())}
	}
	return [][listenerKeySize]byte{key(a)}
}
