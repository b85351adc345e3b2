package rrl

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// lowerASCII lower-cases ASCII capitals only, byte by byte.
func lowerASCII(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// TestFoldWord checks the eight-bytes-at-a-time folding against the ASCII
// rule for every byte value at every position.
func TestFoldWord(t *testing.T) {
	for c := range 256 {
		for pos := range 8 {
			for _, fill := range []byte{0, 'a', 'Z', '@', '[', 0x80, 0xC1, 0xFF} {
				in := []byte(strings.Repeat(string(fill), 8))
				in[pos] = byte(c)
				want := load64(string(lowerASCII(in)))
				if got := foldWord(load64(string(in))); got != want {
					t.Fatalf("foldWord(%q) = %#x, want %#x", in, got, want)
				}
			}
		}
	}
}

func TestAccountHash(t *testing.T) {
	k := newHashKey()
	n := NewRRL(nil).nets.networkOf(netip.MustParseAddr("192.0.2.1"))
	hash := func(name string) uint64 { return k.account(n, 0, 1, 1, name) }
	const alphabet = "aZ.-Q9\\x80\xffMz@[\x00"
	seen := map[uint64]string{}
	for length := 0; length <= 80; length++ {
		in := make([]byte, length)
		for i := range in {
			in[i] = alphabet[(i*7+length)%len(alphabet)]
		}
		name := string(in)
		h := hash(name)
		if other, dup := seen[h]; dup {
			t.Fatalf("%q and %q hash alike", name, other)
		}
		seen[h] = name
		// The same name in any case, with or without a trailing dot.
		if got := hash(string(lowerASCII(in)) + "."); got != h {
			t.Errorf("%q: lower case with a trailing dot hashes differently", name)
		}
		if got := hash(string(toUpperASCII(in))); got != h {
			t.Errorf("%q: upper case hashes differently", name)
		}
		// Any other byte anywhere makes another key.
		for pos := range in {
			changed := append([]byte(nil), in...)
			changed[pos] ^= 0x01
			if string(lowerASCII(changed)) == string(lowerASCII(in)) {
				continue
			}
			if hash(string(changed)) == h {
				t.Errorf("%q and %q hash alike", name, changed)
			}
		}
	}
	// The rest of the identity counts too.
	base := k.account(n, 0, 1, 1, "x.")
	k2 := newHashKey()
	other := NewRRL(nil).nets.networkOf(netip.MustParseAddr("192.0.3.1"))
	for what, h := range map[string]uint64{
		"kind": k.account(n, 2, 1, 1, "x."), "class": k.account(n, 0, 3, 1, "x."),
		"type": k.account(n, 0, 1, 28, "x."), "network": k.account(other, 0, 1, 1, "x."),
		"secrets": k2.account(n, 0, 1, 1, "x."),
	} {
		if h == base {
			t.Errorf("a different %s hashes alike", what)
		}
	}
}

func toUpperASCII(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// TestNetworks checks client networks against netip's own masking, for
// netip.Addr sources and for both lengths of net.IP, at prefix lengths on
// either side of the 64-bit halves; and that a net.IP of any other length
// is 0.0.0.0, as it is for a netip.Addr.
func TestNetworks(t *testing.T) {
	addrs := []string{"192.0.2.255", "255.255.255.255", "0.0.0.0", "::ffff:198.51.100.7",
		"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "::", "::1", "fe80::1%eth0"}
	for _, lengths := range [][2]int{{1, 1}, {8, 56}, {24, 63}, {31, 64}, {32, 65}, {16, 127}, {24, 128}} {
		r := newTestRRL(t, nil, "ipv4-prefix-length", fmt.Sprint(lengths[0]), "ipv6-prefix-length", fmt.Sprint(lengths[1]))
		for _, s := range addrs {
			a := netip.MustParseAddr(s).Unmap().WithZone("")
			bits := lengths[1]
			if a.Is4() {
				bits = lengths[0]
			}
			want := netip.PrefixFrom(a, bits).Masked()
			if got := r.nets.networkOf(netip.MustParseAddr(s)).prefix(); got != want {
				t.Errorf("/%d, /%d: %s is in %s, want %s", lengths[0], lengths[1], s, got, want)
			}
			ip := net.IP(a.AsSlice())
			for _, ip := range []net.IP{ip, ip.To16()} {
				if got := r.nets.networkOfIP(ip).prefix(); got != want {
					t.Errorf("/%d, /%d: net.IP %v (%d bytes) is in %s, want %s", lengths[0], lengths[1], ip, len(ip), got, want)
				}
			}
		}
		zero := r.nets.networkOf(netip.Addr{})
		for _, ip := range []net.IP{nil, {}, {192, 0, 2}, {192, 0, 2, 1, 0}} {
			if got := r.nets.networkOfIP(ip); got != zero || !got.v4 {
				t.Errorf("net.IP of %d bytes is in %s, want %s", len(ip), got.prefix(), zero.prefix())
			}
		}
	}
}

// TestPrefixKeysHoldTheLength: the accounts of one address masked to two
// lengths that leave it unchanged (10.0.0.0/8 and 10.0.0.0/16) have keys
// of their own, in both hashes.
func TestPrefixKeysHoldTheLength(t *testing.T) {
	r := newTestRRL(t, nil)
	whole := wholeNetwork(netip.MustParseAddr("10.0.0.0"))
	a, b := whole.masked(8), whole.masked(16)
	if a.lo != b.lo || a.bits == b.bits {
		t.Fatalf("masks %s %s", a.prefix(), b.prefix())
	}
	if r.hash.prefixOf(a.hi, a.lo, prefixMeta(LimitIPv4RequestPrefixes, a.bits)) == r.hash.prefixOf(b.hi, b.lo, prefixMeta(LimitIPv4RequestPrefixes, b.bits)) {
		t.Error("prefix keys of /8 and /16 collide")
	}
	if r.hash.account(a, LimitRequests, 0, 0, "") == r.hash.account(b, LimitRequests, 0, 0, "") {
		t.Error("account keys of /8 and /16 collide")
	}
	v6 := wholeNetwork(netip.MustParseAddr("2001:db8::1"))
	if got := v6.masked(48).prefix(); got != netip.MustParsePrefix("2001:db8::/48") {
		t.Errorf("2001:db8::1 masked to 48: %s", got)
	}
	if got := wholeNetwork(netip.MustParseAddr("::ffff:192.0.2.9")).masked(24).prefix(); got != netip.MustParsePrefix("192.0.2.0/24") {
		t.Errorf("IPv4-mapped masked to 24: %s", got)
	}
	if got := wholeNetwork(netip.Addr{}).prefix(); got != netip.MustParsePrefix("0.0.0.0/32") {
		t.Errorf("the zero Addr: %s", got)
	}
}
