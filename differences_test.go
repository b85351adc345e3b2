package rrl

import (
	"strings"
	"testing"
)

// TestDocumentedDifferences holds the differences from the established
// package that the README lists and that no other test names.
func TestDocumentedDifferences(t *testing.T) {
	t.Run("a source without a port is that address", func(t *testing.T) {
		r := newTestRRL(t, newTestClock(), "responses-per-second", "1", "slip-ratio", "0")
		a := answer("www.example.")
		debitN(r, otherAddr{"udp", "not an address"}, a, 5) // the shared 0.0.0.0/24 account, in debt
		if got := actions(r, otherAddr{"udp", "192.0.2.9"}, a, 2); got != "SD" {
			t.Errorf("port-less 192.0.2.9: %s, want SD, its own account (not the shared one of unparsable sources)", got)
		}
		if got := actions(r, udp("192.0.2.10"), a, 1); got != "D" {
			t.Errorf("192.0.2.10 after port-less 192.0.2.9: %s, want D (one /24)", got)
		}
	})
	t.Run("slip-ratio is 2 unless set", func(t *testing.T) {
		cfg := NewConfig()
		if v, _ := cfg.Value("slip-ratio"); v != "2" {
			t.Errorf("default slip-ratio %q, want 2", v)
		}
		r := newTestRRL(t, newTestClock(), "responses-per-second", "1")
		if got := actions(r, udp("192.0.2.1"), answer("www.example."), 5); got != "STDTD" {
			t.Errorf("default slip-ratio: %s, want STDTD (send, then slip (T) every second limited response, beginning with the first)", got)
		}
	})
	t.Run("SetValue's errors name keyword, value and range", func(t *testing.T) {
		err := NewConfig().SetValue("window", "0")
		if err == nil {
			t.Fatal("window 0 accepted")
		}
		for _, part := range []string{"window", `"0"`, "1 to 3600"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("error %q lacks %s", err, part)
			}
		}
	})
}
