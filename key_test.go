package rrl

import (
	"strings"
	"testing"
)

// TestFoldLower checks the eight-bytes-at-a-time folding against
// strings.ToLower's ASCII rule for every byte value at every position.
func TestFoldLower(t *testing.T) {
	for c := range 256 {
		for pos := range 9 {
			for _, fill := range []byte{'a', 'Z', '@', '[', 0x80, 0xC1, 0xFF} {
				in := []byte(strings.Repeat(string(fill), 9))
				in[pos] = byte(c)
				want := make([]byte, len(in))
				for i, b := range in {
					if 'A' <= b && b <= 'Z' {
						b += 'a' - 'A'
					}
					want[i] = b
				}
				got := make([]byte, len(in))
				if n := foldLower(got, string(in)); n != len(in) || string(got) != string(want) {
					t.Fatalf("foldLower(%q) = %q, want %q", in, got[:n], want)
				}
			}
		}
	}
}

func TestFoldLowerLengths(t *testing.T) {
	const alphabet = "aZ.-Q9\x80\xffMz@["
	for n := 0; n <= 80; n++ {
		in := make([]byte, n)
		for i := range in {
			in[i] = alphabet[(i*7+n)%len(alphabet)]
		}
		wantBytes := make([]byte, n)
		for i, c := range in {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			wantBytes[i] = c
		}
		want := string(wantBytes)
		for _, room := range []int{n, n + 3, n / 2} {
			got := make([]byte, room)
			k := foldLower(got, string(in))
			if k != min(n, room) || string(got[:k]) != want[:k] {
				t.Fatalf("foldLower(%q) into %d bytes = %q (%d), want %q", in, room, got[:k], k, want[:min(n, room)])
			}
		}
	}
}
