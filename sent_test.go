package rrl

import (
	"fmt"
	"net/netip"
	"testing"
)

// TestDebitSentBytes: the bytes a server adds after the decision, charged
// with DebitSentBytes, count against all-bytes-per-second, so that what
// goes out stays within the budget; without them the same traffic sends
// more than the budget.
func TestDebitSentBytes(t *testing.T) {
	const budget, decided, added = 3000, 300, 60 // the nsid plugin adds 60 bytes after the decision
	wire := func(correct bool) int {
		r := newTestRRL(t, newTestClock(), "all-bytes-per-second", fmt.Sprint(budget))
		src := netip.MustParseAddr("192.0.2.1")
		sent := 0
		for i := range 60 {
			tu := answer(fmt.Sprintf("n%d.example.", i))
			tu.Size = decided
			if a, _, _ := r.DebitAddr(src, true, tu); a != Send {
				continue
			}
			sent += decided + added
			if correct {
				r.DebitSentBytes(src, added)
			}
		}
		return sent
	}
	if got := wire(true); got > budget {
		t.Errorf("with the added bytes charged, %d bytes went out, want at most %d", got, budget)
	}
	if got := wire(false); got <= budget {
		t.Errorf("without the charge %d bytes went out: the test shows nothing", got)
	}
}

// TestDebitSentBytesChargesOnlyWhereItShould: nothing for a nil RRL, a
// zero or negative count, all-bytes-per-second off, or an exempt client.
func TestDebitSentBytesChargesOnlyWhereItShould(t *testing.T) {
	var none *RRL
	none.DebitSentBytes(netip.MustParseAddr("192.0.2.1"), 100) // no panic
	tu := answer("a.example.")
	tu.Size = 1000
	for _, tc := range []struct {
		name  string
		kv    []string
		src   string
		extra int
	}{
		{"negative", []string{"all-bytes-per-second", "1000"}, "192.0.2.1", -5000},
		{"zero", []string{"all-bytes-per-second", "1000"}, "192.0.2.1", 0},
		{"off", []string{"responses-per-second", "100"}, "192.0.2.1", 5000},
		{"exempt", []string{"all-bytes-per-second", "1000", "exempt-clients", "192.0.2.0/24"}, "192.0.2.1", 5000},
	} {
		r := newTestRRL(t, newTestClock(), tc.kv...)
		src := netip.MustParseAddr(tc.src)
		r.DebitSentBytes(src, tc.extra)
		if a, _, rtr := r.DebitAddr(src, true, tu); a != Send {
			t.Errorf("%s: after DebitSentBytes(%d) a full account said %v %v", tc.name, tc.extra, a, rtr)
		}
	}
	r := newTestRRL(t, newTestClock(), "all-bytes-per-second", "1000")
	src := netip.MustParseAddr("192.0.2.1")
	r.DebitSentBytes(src, 5000)
	if a, _, rtr := r.DebitAddr(src, true, tu); a != Drop || rtr != RTAllBytesLimit {
		t.Errorf("after 5000 bytes sent against 1000 a second: %v %v, want Drop RTAllBytesLimit", a, rtr)
	}
}
