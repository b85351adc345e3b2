package rrl

import (
	"strings"
	"testing"
)

// TestStatsStringNamesPrefixLengths: each place of RequestPrefixDrops is
// written after the length of its pair, as configured (a pair off keeps
// its place), so that a reader can tell which prefix refused what.
func TestStatsStringNamesPrefixLengths(t *testing.T) {
	r := newTestRRL(t, newTestClock(), "ipv4-request-prefixes", "24:0 18:2", "ipv6-request-prefixes", "48:1")
	src := v4src(1, 2)
	for range 5 {
		r.DebitRequestAddr(src, true, false) // 2 served, 3 refused by the /18
	}
	st := r.GetStats(false)
	if want := "RequestPrefixDrops IPv4 [/24 0 /18 3] IPv6 [/48 0];"; !strings.Contains(st.String(), want) {
		t.Errorf("String() = %s\nwant it to contain %q", st, want)
	}
	// Summed with the Stats of an RRL whose pairs differ, a place whose
	// lengths disagree is unknown; one set on one side only keeps it.
	other := newTestRRL(t, nil, "ipv4-request-prefixes", "24:1 20:1 16:1").GetStats(false)
	var sum Stats
	sum.Add(&st)
	sum.Add(&other)
	if want := "RequestPrefixDrops IPv4 [/24 0 /? 3 /16 0] IPv6 [/48 0];"; !strings.Contains(sum.String(), want) {
		t.Errorf("sum: String() = %s\nwant it to contain %q", sum, want)
	}
}
