package kerneldrop

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// decodeBlocked is blockedKey's inverse.
func decodeBlocked(k [blockedKeySize]byte) (group uint32, p netip.Prefix) {
	bits := int(binary.NativeEndian.Uint32(k[0:])) - 32
	tag := binary.NativeEndian.Uint32(k[4:])
	if tag&1 == familyIPv4Key {
		return tag >> 1, netip.PrefixFrom(netip.AddrFrom4([4]byte(k[8:12])), bits)
	}
	return tag >> 1, netip.PrefixFrom(netip.AddrFrom16([16]byte(k[8:24])), bits)
}

// matches reports whether the LPM trie would find key entry for key
// packet: the first prefixlen bits of the data agree.
func matches(entry, packet [blockedKeySize]byte) bool {
	n := int(binary.NativeEndian.Uint32(entry[0:]))
	for i := range n {
		if (entry[4+i/8]^packet[4+i/8])&(0x80>>(i%8)) != 0 {
			return false
		}
	}
	return true
}

func TestBlockedKey(t *testing.T) {
	for _, tc := range []struct {
		p, in, out string
	}{
		{"192.0.2.0/24", "192.0.2.200/32", "192.0.3.1/32"},
		{"::ffff:192.0.2.0/120", "::ffff:192.0.2.1/128", "192.0.3.1/32"},
		{"2001:db8::/56", "2001:db8:0:ff::1/128", "2001:db8:0:100::1/128"},
		{"0.0.0.0/0", "255.255.255.255/32", "::/128"},
		{"::/0", "2001:db8::1/128", "::ffff:1.2.3.4/128"}, // IPv6 prefixes do not cover IPv4
	} {
		p, _ := normalize(netip.MustParsePrefix(tc.p))
		in, _ := normalize(netip.MustParsePrefix(tc.in))
		out, _ := normalize(netip.MustParsePrefix(tc.out))
		k := blockedKey(5, p)
		if !matches(k, blockedKey(5, in)) {
			t.Errorf("%s does not match %s", tc.p, tc.in)
		}
		if matches(k, blockedKey(5, out)) {
			t.Errorf("%s matches %s", tc.p, tc.out)
		}
		if matches(k, blockedKey(4, in)) {
			t.Errorf("%s of group 5 matches %s of group 4", tc.p, tc.in)
		}
	}
}

func TestListenerKeys(t *testing.T) {
	ks := listenerKeys(netip.MustParseAddrPort("[::]:53"), 1)
	if len(ks) != 2 || ks[0][15] != 0 || ks[1][10] != 0xff || ks[1][11] != 0xff || ks[1][12] != 0 {
		t.Errorf("[::]:53: %x", ks)
	}
	ks = listenerKeys(netip.MustParseAddrPort("127.0.0.1:5353"), 7)
	want := [listenerKeySize]byte{10: 0xff, 11: 0xff, 12: 127, 15: 1, 16: 0x14, 17: 0xe9}
	binary.NativeEndian.PutUint32(want[20:], 7)
	if len(ks) != 1 || ks[0] != want {
		t.Errorf("127.0.0.1:5353: %x, want %x", ks, want)
	}
}

// FuzzKeys: any prefix normalizes to a masked one or is refused, and its
// key holds it whole and matches every address inside it; any listener is
// refused or keyed with its port and interface.
func FuzzKeys(f *testing.F) {
	f.Add([]byte{192, 0, 2, 1}, 24, uint16(53), uint32(1), uint32(3))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3}, 104, uint16(0), uint32(0), uint32(1023))
	f.Add([]byte{0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 56, uint16(853), uint32(2), uint32(0))
	f.Add([]byte{}, -1, uint16(1), uint32(0), uint32(0))
	f.Fuzz(func(t *testing.T, addr []byte, bits int, port uint16, ifindex, group uint32) {
		a, _ := netip.AddrFromSlice(addr)
		group %= maxGroups
		p, ok := normalize(netip.PrefixFrom(a, bits))
		if !ok {
			if a.IsValid() && bits >= 0 && bits <= a.BitLen() {
				t.Fatalf("%v/%d refused", a, bits)
			}
		} else {
			if p != p.Masked() || (p.Addr().Is4In6() && p.Bits() >= 96) {
				t.Fatalf("%v/%d normalized to %v", a, bits, p)
			}
			k := blockedKey(group, p)
			if g, back := decodeBlocked(k); g != group || back != p {
				t.Fatalf("%v under %d: key %x decodes to %v under %d", p, group, k, back, g)
			}
			host, _ := normalize(netip.PrefixFrom(a, a.BitLen()))
			if a.Is4In6() && bits < 96 {
				host = netip.PrefixFrom(a, 128)
			}
			if !matches(k, blockedKey(group, host)) {
				t.Fatalf("%v does not match %v inside it", p, host)
			}
		}
		ap, ok := listenerAddr(netip.AddrPortFrom(a, port))
		if ok != (a.IsValid() && port != 0) {
			t.Fatalf("listener %v:%d: ok %v", a, port, ok)
		}
		if !ok {
			return
		}
		for _, k := range listenerKeys(ap, ifindex) {
			if binary.BigEndian.Uint16(k[16:]) != port || binary.NativeEndian.Uint32(k[20:]) != ifindex || k[18] != 0 || k[19] != 0 {
				t.Fatalf("listener %v on %d: key %x", ap, ifindex, k)
			}
			if got := netip.AddrFrom16([16]byte(k[:16])).Unmap(); got != ap.Addr() && !ap.Addr().IsUnspecified() {
				t.Fatalf("listener %v: key's address %v", ap, got)
			}
		}
	})
}
