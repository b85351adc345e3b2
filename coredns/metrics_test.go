package rrl

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestTableMetrics reads the table metrics as a scrape would: per server
// block, never above max-table-size, gone when the block shuts down.
func TestTableMetrics(t *testing.T) {
	clk := newClock()
	h := testHandler(t, "table.example.org {\n responses-per-second 1\n max-table-size 10\n}", zoneNext, clk)
	h.stats.addServer("dns://127.0.0.1:5353")
	liveInstances.add(h.stats)
	for i := range 50 {
		ask(t, h, "127.1."+strconv.Itoa(i)+".1", false, query("www.table.example.org.", dns.TypeA))
	}
	// The server is learnt from the requests too: these carry none ("").
	want := `
# HELP coredns_rrl_table_max_size The server block's max-table-size.
# TYPE coredns_rrl_table_max_size gauge
coredns_rrl_table_max_size{server="",zone="table.example.org."} 10
coredns_rrl_table_max_size{server="dns://127.0.0.1:5353",zone="table.example.org."} 10
`
	if err := testutil.CollectAndCompare(liveInstances, strings.NewReader(want), "coredns_rrl_table_max_size"); err != nil {
		t.Error(err)
	}
	st := h.limiter.GetStats(false)
	if st.CacheLength > 10 || st.Evictions == 0 {
		t.Errorf("after 50 networks into 10 accounts: %d accounts, %d evictions", st.CacheLength, st.Evictions)
	}
	liveInstances.remove(h.stats)
	if n := testutil.CollectAndCount(liveInstances, "coredns_rrl_table_size"); n != 0 {
		// Other tests' blocks are never added, so nothing should be left.
		t.Errorf("%d table_size series after the block shut down", n)
	}
}

// TestLimitedAccounts follows an episode through the limited_accounts gauge.
func TestLimitedAccounts(t *testing.T) {
	clk := newClock()
	h := testHandler(t, "{\n responses-per-second 1\n}", zoneNext, clk)
	tally(t, h, "127.0.1.1", false, 5, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
	if n := h.stats.limited.value(); n != 1 {
		t.Errorf("%d accounts limited during a flood, want 1", n)
	}
	clk.advance(time.Minute)
	ask(t, h, "127.0.1.1", false, query("www.example.org.", dns.TypeA))
	if n := h.stats.limited.value(); n != 0 {
		t.Errorf("%d accounts limited after the flood, want 0", n)
	}
	h.stats.limited.add(-1)
	if n := h.stats.limited.value(); n != 0 {
		t.Errorf("gauge went to %d, want it held at 0", n)
	}
}
