package rrl

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
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
	want := `coredns_rrl_table_max_size{server="",zone="table.example.org."} 10
coredns_rrl_table_max_size{server="dns://127.0.0.1:5353",zone="table.example.org."} 10
`
	if got := zoneSeries(t, "coredns_rrl_table_max_size", "table.example.org."); got != want {
		t.Errorf("table_max_size series:\n%s\nwant:\n%s", got, want)
	}
	st := h.limiter.GetStats(false)
	if st.CacheLength > 10 || st.Evictions == 0 {
		t.Errorf("after 50 networks into 10 accounts: %d accounts, %d evictions", st.CacheLength, st.Evictions)
	}
	liveInstances.remove(h.stats)
	if got := zoneSeries(t, "coredns_rrl_table_size", "table.example.org."); got != "" {
		t.Errorf("table_size series after the block shut down:\n%s", got)
	}
}

// zoneSeries is what a scrape of the running blocks gives of one metric for
// one zone, a series a line in the text format. Other blocks can be running
// in the same test binary (the integration tests' CoreDNS, another -count
// round's), so the lines of other zones are left out.
func zoneSeries(t *testing.T, metric, zone string) string {
	t.Helper()
	text, err := testutil.CollectAndFormat(liveInstances, expfmt.TypeTextPlain, metric)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for line := range strings.Lines(string(text)) {
		if strings.HasPrefix(line, metric+"{") && strings.Contains(line, `zone="`+zone+`"`) {
			b.WriteString(line)
		}
	}
	return b.String()
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
