package rrl

import (
	"bytes"
	"context"
	"fmt"
	stdlog "log"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// logBuffer captures what the plugin logs for the rest of the test.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func captureLog(t *testing.T) *logBuffer {
	t.Helper()
	lb := new(logBuffer)
	old := stdlog.Writer()
	stdlog.SetOutput(lb)
	t.Cleanup(func() { stdlog.SetOutput(old) })
	return lb
}

// TestTickEndsQuietEpisodes: a client that floods and then goes silent is
// never asked about again, yet the tick ends its episode after the quiet
// period: the stop line names its network and tuple, the gauge returns to 0.
func TestTickEndsQuietEpisodes(t *testing.T) {
	lb := captureLog(t)
	clk := newClock()
	h := testHandler(t, "{\n responses-per-second 1\n}", zoneNext, clk)
	tally(t, h, "127.0.1.1", false, 5, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
	if n := h.stats.limited.value(); n != 1 {
		t.Fatalf("%d accounts limited during the flood, want 1", n)
	}
	h.tick()
	if n := h.stats.limited.value(); n != 1 {
		t.Errorf("episode ended at once: %d limited", n)
	}
	clk.advance(quietPeriod + 16*time.Second) // out of debt (window 15) and quiet
	h.tick()
	if n := h.stats.limited.value(); n != 0 {
		t.Errorf("%d accounts limited after the quiet period, want 0", n)
	}
	want := "stop limiting responses to 127.0.1.0/24 for www.example.org. IN A (responses-per-second)"
	if !strings.Contains(lb.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, lb)
	}
	if episodeCount(&h.stats.episodes) != 0 {
		t.Errorf("%d episodes still remembered", episodeCount(&h.stats.episodes))
	}
}

// TestTickerRunsAndStops: started, the ticker ends quiet episodes on its own;
// stopped, its goroutine is gone; stop is safe twice.
func TestTickerRunsAndStops(t *testing.T) {
	defer func(i time.Duration) { tickInterval = i }(tickInterval)
	tickInterval = time.Millisecond
	base := RunningTickers()
	clk := newClock()
	h := testHandler(t, "{\n responses-per-second 1\n}", zoneNext, clk)
	tally(t, h, "127.0.1.1", false, 5, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
	clk.advance(quietPeriod + 16*time.Second)
	h.start()
	if n := WaitTickers(base + 1); n != base+1 {
		t.Fatalf("%d tickers running, want %d", n, base+1)
	}
	for i := 0; i < 5000 && h.stats.limited.value() != 0; i++ {
		time.Sleep(time.Millisecond) // polling, bounded; nothing is asserted on time
	}
	if n := h.stats.limited.value(); n != 0 {
		t.Errorf("the ticker did not end the quiet episode: %d limited", n)
	}
	h.stop()
	h.stop()
	if n := WaitTickers(base); n != base {
		t.Errorf("%d tickers running after stop, want %d", n, base)
	}
}

// TestStopLinesHaveTheirOwnBudget: a flood of start lines uses up the start
// budget, but stop lines are still logged, and the tick reports how many
// start lines were left out.
func TestStopLinesHaveTheirOwnBudget(t *testing.T) {
	lb := captureLog(t)
	clk := newClock()
	h := testHandler(t, "{\n responses-per-second 1\n slip-ratio 0\n}", zoneNext, clk)
	const networks = maxLogLinesPerSecond + 10
	for n := range networks {
		tally(t, h, "127.2."+itoa(n)+".1", false, 3, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
	}
	if n := h.stats.limited.value(); n != networks {
		t.Fatalf("%d limited, want %d", n, networks)
	}
	h.stats.flushSuppressed()
	if want := "10 lines about accounts starting to be limited suppressed"; !strings.Contains(lb.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, lb)
	}
	clk.advance(quietPeriod + 16*time.Second)
	h.tick()
	// The stops come within a second or two of the starts, whose budget
	// is spent; with a budget of their own they are logged all the same.
	if got := strings.Count(lb.String(), "stop limiting"); got < maxLogLinesPerSecond {
		t.Errorf("%d stop lines logged, want at least %d despite the start lines", got, maxLogLinesPerSecond)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestEpisodesBounded: once the table of episodes is full a stop is logged
// without the details it would have had.
func TestEpisodesBounded(t *testing.T) {
	defer func(n int) { maxEpisodes = n }(maxEpisodes)
	maxEpisodes = 1
	lb := captureLog(t)
	clk := newClock()
	h := testHandler(t, "{\n responses-per-second 1\n slip-ratio 0\n}", zoneNext, clk)
	tally(t, h, "127.0.1.1", false, 3, func(int) *dns.Msg { return query("a.example.org.", dns.TypeA) })
	tally(t, h, "127.0.2.1", false, 3, func(int) *dns.Msg { return query("b.example.org.", dns.TypeA) })
	if n := episodeCount(&h.stats.episodes); n != 1 {
		t.Fatalf("%d episodes kept, want the bound, 1", n)
	}
	clk.advance(quietPeriod + 16*time.Second)
	h.tick()
	log := lb.String()
	if !strings.Contains(log, "stop limiting responses to 127.0.1.0/24 for a.example.org. IN A") {
		t.Errorf("the kept episode's stop is not named:\n%s", log)
	}
	if !strings.Contains(log, "(network not recorded) (responses-per-second)") {
		t.Errorf("the other stop is not logged without details:\n%s", log)
	}
}

// TestWildcardAccountName: the account of a wildcard answer is named after
// the wildcard itself, as the README says.
func TestWildcardAccountName(t *testing.T) {
	lb := captureLog(t)
	h := testHandler(t, "{\n responses-per-second 1\n}", zoneNext, newClock())
	tally(t, h, "127.0.1.1", false, 5, func(int) *dns.Msg { return query("x.wild.example.org.", dns.TypeA) })
	if want := "limit responses to 127.0.1.0/24 for *.wild.example.org. IN A"; !strings.Contains(lb.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, lb)
	}
}

// TestDuplicateTableSeries: two live blocks with the same labels (as during
// a reload) must not make the scrape fail; the newer one reports.
func TestDuplicateTableSeries(t *testing.T) {
	a := testHandler(t, "dup.example.org {\n errors-per-second 5\n max-table-size 11\n}", nil, nil)
	b := testHandler(t, "dup.example.org {\n errors-per-second 5\n max-table-size 22\n}", nil, nil)
	a.stats.addServer("dns://:53")
	b.stats.addServer("dns://:53")
	a.start()
	b.start()
	defer a.stop()
	defer b.stop()
	if _, err := prometheus.DefaultGatherer.Gather(); err != nil {
		t.Fatalf("scrape with two blocks of the same labels: %v", err)
	}
	want := `coredns_rrl_table_max_size{server="dns://:53",zone="dup.example.org."} 22
`
	if got := zoneSeries(t, "coredns_rrl_table_max_size", "dup.example.org."); got != want {
		t.Errorf("table_max_size series:\n%s\nwant:\n%s", got, want)
	}
}

// TestReleaseDeletesOnlyUnsharedSeries: a block's counter series go when it
// is released, unless another block (its replacement) has them too.
func TestReleaseDeletesOnlyUnsharedSeries(t *testing.T) {
	oldStats := newInstanceStats([]string{"kept.example.org.", "gone.example.org."}, false)
	oldStats.addServer("dns://:5300")
	newStats := newInstanceStats([]string{"kept.example.org."}, false)
	newStats.addServer("dns://:5300")
	oldStats.release()
	oldStats.release() // twice: no double decrement
	if n := seriesOf(t, "dns://:5300", "kept.example.org."); n == 0 {
		t.Error("a series the new block has was deleted")
	}
	if n := seriesOf(t, "dns://:5300", "gone.example.org."); n != 0 {
		t.Errorf("%d series of a zone no block has are left", n)
	}
	newStats.release()
	if n := seriesOf(t, "dns://:5300", "kept.example.org."); n != 0 {
		t.Errorf("%d series left after the last block was released", n)
	}
}

// seriesOf counts the counter series of a server and zone.
func seriesOf(t *testing.T, server, zone string) int {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "coredns_rrl_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			var s, z string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "server":
					s = l.GetValue()
				case "zone":
					z = l.GetValue()
				}
			}
			if s == server && z == zone {
				n++
			}
		}
	}
	return n
}

// TestCookieLeavesSharedMessageAlone: adding the server cookie must not
// change the message the next plugin wrote, which it may send to others.
func TestCookieLeavesSharedMessageAlone(t *testing.T) {
	shared := query("www.example.org.", dns.TypeA)
	shared.Response = true
	shared.SetEdns0(1232, false)
	shared.Answer = []dns.RR{test.A("www.example.org. 300 IN A 192.0.2.1")}
	next := plugin.HandlerFunc(func(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
		w.WriteMsg(shared) // the same message for every client
		return dns.RcodeSuccess, nil
	})
	h := testHandler(t, "{\n responses-per-second 1000000\n}", next, nil)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				_, m := ask(t, h, "127.0."+itoa(g)+".1", false, withCookie(query("www.example.org.", dns.TypeA), fmt.Sprintf("01020304050607%02x", i)))
				if m == nil || len(cookieOf(m)) != 48 {
					t.Errorf("no server cookie in the response")
					return
				}
			}
		})
	}
	wg.Wait()
	if c := cookieOf(shared); c != "" || len(shared.Extra) != 1 || len(shared.IsEdns0().Option) != 0 {
		t.Errorf("the shared message was changed: cookie %q, extra %v", c, shared.Extra)
	}
}

// TestTransportPerQuery: whether a query is limited as UDP is decided by
// its own server and address, never by the block's first key.
func TestTransportPerQuery(t *testing.T) {
	udp := &test.ResponseWriter{RemoteIP: "192.0.2.1"}
	tcp := &test.ResponseWriter{RemoteIP: "192.0.2.1", TCP: true}
	for _, tc := range []struct {
		w      dns.ResponseWriter
		server string
		want   bool
	}{
		{udp, "dns://:53", true},
		{udp, "", true},
		{tcp, "dns://:53", false},
		{udp, "quic://:853", false}, // DoQ's addresses are UDP ones
		{tcp, "grpc://:443", false},
		{tcp, "tls://:853", false},
	} {
		if _, got := transport(tc.w, tc.server); got != tc.want {
			t.Errorf("%s over %s: udp %v, want %v", tc.w.RemoteAddr(), tc.server, got, tc.want)
		}
	}
}

// TestMatchZoneIndexed: with many zones the suffix map finds the longest
// zone, as the linear match does.
func TestMatchZoneIndexed(t *testing.T) {
	c := caddy.NewTestController("dns", "rrl 10.0.0.0/9 example.org sub.example.org {\n responses-per-second 5\n}")
	c.ServerBlockKeys = []string{"10.in-addr.arpa.:53", "example.org.:53"}
	h, err := parse(c)
	if err != nil {
		t.Fatal(err)
	}
	if h.zoneIndex == nil || len(h.Zones) != 130 {
		t.Fatalf("%d zones, index %v", len(h.Zones), h.zoneIndex != nil)
	}
	linear := &RRL{Zones: h.Zones}
	for _, name := range []string{"1.2.3.10.in-addr.arpa.", "1.2.200.10.in-addr.arpa.", "4.127.10.in-addr.arpa.", "127.10.in-addr.arpa.",
		"www.example.org.", "WWW.Sub.Example.ORG.", "sub.example.org.", "example.org.", "org.", ".", "example.com."} {
		if got, want := h.matchZone(name), linear.matchZone(name); got != want {
			t.Errorf("%s: indexed %d, linear %d", name, got, want)
		}
	}
}

// TestAllocationsAlternatingServers: a block on two listeners allocates
// nothing more when queries alternate between them.
func TestAllocationsAlternatingServers(t *testing.T) {
	h := testHandler(t, "{\n responses-per-second 1000000\n}", trivialNext(), nil)
	ws := benchClients()
	r := query("www.example.org.", dns.TypeA)
	ctxs := serverContexts()
	h.ServeDNS(ctxs[0], ws[0], r)
	h.ServeDNS(ctxs[1], ws[0], r)
	one := testing.AllocsPerRun(200, func() { h.ServeDNS(ctxs[0], ws[0], r) })
	i := 0
	alternating := testing.AllocsPerRun(200, func() { h.ServeDNS(ctxs[i&1], ws[0], r); i++ })
	if alternating > one {
		t.Errorf("alternating listeners: %.1f allocations per query, one listener %.1f", alternating, one)
	}
}

// serverContexts are the contexts of queries from two listeners.
func serverContexts() [2]context.Context {
	return [2]context.Context{
		context.WithValue(context.Background(), dnsserver.Key{}, &dnsserver.Server{Addr: "dns://127.0.0.1:53"}),
		context.WithValue(context.Background(), dnsserver.Key{}, &dnsserver.Server{Addr: "dns://[::1]:53"}),
	}
}

// TestRetainedWriterAndContextStayValid: a plugin that keeps the writer
// and the context past ServeDNS (as cache's prefetch does) finds them intact
// however many requests follow: no recorder or context is handed out twice.
func TestRetainedWriterAndContextStayValid(t *testing.T) {
	type kept struct {
		w   dns.ResponseWriter
		ctx context.Context
	}
	var retained []kept
	next := plugin.HandlerFunc(func(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
		retained = append(retained, kept{w, ctx})
		return zoneNext(ctx, w, r)
	})
	h := testHandler(t, "{\n responses-per-second 1000000\n}", next, nil)
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	const n = 3*batchSize + 5
	for i := range n {
		w := &capture{ResponseWriter: test.ResponseWriter{RemoteIP: "127.0." + itoa(i) + ".1"}}
		h.ServeDNS(parent, w, query("www.example.org.", dns.TypeA))
	}
	seen := map[dns.ResponseWriter]bool{}
	for i, k := range retained {
		if seen[k.w] {
			t.Fatalf("request %d got a writer handed out before", i)
		}
		seen[k.w] = true
		if got := k.w.RemoteAddr().String(); !strings.HasPrefix(got, "127.0."+itoa(i)+".1:") {
			t.Errorf("request %d's kept writer now answers for %s", i, got)
		}
		if k.ctx.Value(ctxKey{}) != "v" {
			t.Errorf("request %d's kept context lost its values", i)
		}
	}
	if len(retained) != n {
		t.Errorf("%d requests reached the next plugin, want %d", len(retained), n)
	}
}

// closeCounter is a TCP capture that counts Close calls.
type closeCounter struct {
	capture
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

// streamNext writes three messages, as a zone transfer does.
var streamNext = plugin.HandlerFunc(func(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	for i := range 3 {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Answer = []dns.RR{test.A("www.example.org. 300 IN A 192.0.2." + strconv.Itoa(i+1))}
		w.WriteMsg(m)
	}
	return dns.RcodeSuccess, nil
})

// TestRefusedClosesTCPWithoutAddress: a TCP connection whose client
// address cannot be read (which the core counts as 0.0.0.0 over UDP) is
// still a connection, and a refused request closes it.
func TestRefusedClosesTCPWithoutAddress(t *testing.T) {
	h := testHandler(t, "{\n requests-per-second 1\n}", zoneNext, newClock())
	for i := range 3 {
		w := &closeCounter{capture: capture{ResponseWriter: test.ResponseWriter{RemoteIP: "no address", TCP: true}}}
		h.ServeDNS(context.Background(), w, query("www.example.org.", dns.TypeA))
		if refused := i > 0; (len(w.msgs) == 0) != refused || (w.closed == 1) != refused {
			t.Errorf("query %d: %d messages, closed %d times", i, len(w.msgs), w.closed)
		}
	}
}

// TestTCPRequestsPerSecond: requests-per-second applies over TCP too: the
// queries over it get nothing, and the connection is closed; the others,
// streams included, are written whole; response allowances still do not
// apply to TCP.
func TestTCPRequestsPerSecond(t *testing.T) {
	for _, report := range []bool{false, true} {
		block := "{\n requests-per-second 3\n responses-per-second 1\n slip-ratio 0\n}"
		if report {
			block = "{\n requests-per-second 3\n responses-per-second 1\n slip-ratio 0\n report-only\n}"
		}
		h := testHandler(t, block, streamNext, newClock())
		before := testutil.ToFloat64(requestsExceeded.WithLabelValues("", "example.org.", "proven"))
		var messages, closed, silent int
		for range 10 {
			w := &closeCounter{capture: capture{ResponseWriter: test.ResponseWriter{RemoteIP: "127.0.1.1", TCP: true}}}
			h.ServeDNS(context.Background(), w, query("www.example.org.", dns.TypeAXFR))
			switch len(w.msgs) {
			case 3:
			case 0:
				silent++
			default:
				t.Errorf("a stream of %d messages, want all 3 or none", len(w.msgs))
			}
			messages += len(w.msgs)
			closed += w.closed
		}
		exceeded := testutil.ToFloat64(requestsExceeded.WithLabelValues("", "example.org.", "proven")) - before
		if report {
			if silent != 0 || closed != 0 || exceeded == 0 {
				t.Errorf("report-only: %d silent, %d closed, %v counted over; want all answered and the excess counted", silent, closed, exceeded)
			}
			continue
		}
		// The clock stands still: a second's allowance, 3, is served.
		if silent != 7 || closed != silent || int(exceeded) != silent {
			t.Errorf("10 TCP queries at 3/s: %d silent, %d connections closed, %v counted over requests-per-second; want 7 of each", silent, closed, exceeded)
		}
	}
	// Without requests-per-second nothing over TCP is held back.
	h := testHandler(t, "{\n responses-per-second 1\n}", streamNext, newClock())
	for range 10 {
		w := &closeCounter{capture: capture{ResponseWriter: test.ResponseWriter{RemoteIP: "127.0.1.1", TCP: true}}}
		h.ServeDNS(context.Background(), w, query("www.example.org.", dns.TypeAXFR))
		if len(w.msgs) != 3 || w.closed != 0 {
			t.Fatalf("TCP without requests-per-second: %d messages, %d closes", len(w.msgs), w.closed)
		}
	}
}
