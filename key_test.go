package rrl

import (
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
	n := NewRRL(nil).networkOf(netip.MustParseAddr("192.0.2.1"))
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
	other := NewRRL(nil).networkOf(netip.MustParseAddr("192.0.3.1"))
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
