package rrl

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/metadata"
	"github.com/coredns/coredns/plugin/pkg/proxyproto"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// clock is a settable time for the limiter, so that no test depends on how
// fast it runs.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_700_000_000, 0)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testHandler parses "rrl <block>" for a server block of example.org. and
// builds the handler with the given clock and next plugin.
func testHandler(t testing.TB, block string, next plugin.Handler, clk *clock) *RRL {
	t.Helper()
	c := caddy.NewTestController("dns", "rrl "+block)
	c.ServerBlockKeys = []string{"example.org.:53"}
	c.Next()
	zones, err := parseZones(c)
	if err != nil {
		t.Fatal(err)
	}
	cfg, opts, err := parseBlock(c)
	if err != nil {
		t.Fatal(err)
	}
	if clk != nil {
		cfg.SetNowFunc(clk.now)
	}
	h := newHandler(zones, cfg, opts)
	h.Next = next
	return h
}

// capture is a test.ResponseWriter that keeps what is written to it.
type capture struct {
	test.ResponseWriter
	msgs []*dns.Msg
}

func (c *capture) WriteMsg(m *dns.Msg) error {
	c.msgs = append(c.msgs, m)
	return nil
}

func (c *capture) Write(b []byte) (int, error) {
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		return 0, err
	}
	c.msgs = append(c.msgs, m)
	return len(b), nil
}

const soa = "example.org. 3600 IN SOA ns.example.org. admin.example.org. 1 7200 3600 1209600 3600"

// zoneNext answers like an authoritative server for example.org.: A records
// for existing names, NXDOMAIN with SOA for "nx-*", a wildcard answer (and
// the metadata label file sets) for names under wild.example.org., a
// referral for names under sub.example.org., and a bare SERVFAIL rcode for
// "fail.example.org.", which it leaves to the server to write.
var zoneNext = plugin.HandlerFunc(func(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	q := r.Question[0]
	name := strings.ToLower(q.Name)
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	switch {
	case name == "fail.example.org.":
		return dns.RcodeServerFailure, nil
	case name == "refuse.example.org.":
		return dns.RcodeRefused, nil
	case name == "writefail.example.org.":
		// Writes the error and returns it too, as some plugins do.
		m.Rcode = dns.RcodeServerFailure
		w.WriteMsg(m)
		return dns.RcodeServerFailure, nil
	case strings.HasPrefix(name, "nx-"):
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{test.SOA(soa)}
	case strings.HasSuffix(name, ".sub.example.org."):
		m.Authoritative = false
		m.Ns = []dns.RR{test.NS("sub.example.org. 3600 IN NS ns.sub.example.org.")}
	case strings.HasSuffix(name, ".wild.example.org."):
		metadata.SetValueFunc(ctx, wildcardLabel, func() string { return "*.wild.example.org." })
		m.Answer = []dns.RR{test.A(q.Name + " 300 IN A 192.0.2.2")}
	default:
		m.Answer = []dns.RR{test.A(q.Name + " 300 IN A 192.0.2.1")}
	}
	w.WriteMsg(m)
	return dns.RcodeSuccess, nil
})

// outcome is what the client got for one query.
type outcome int

const (
	sent outcome = iota
	slipped
	dropped
	badCookie
)

func (o outcome) String() string { return [...]string{"sent", "slipped", "dropped", "badcookie"}[o] }

func classify(msgs []*dns.Msg) outcome {
	switch {
	case len(msgs) == 0:
		return dropped
	case msgs[0].Rcode == dns.RcodeBadCookie:
		return badCookie
	case msgs[0].Truncated:
		return slipped
	}
	return sent
}

// ask sends one query through h from the client address ip and tells what
// came back.
func ask(t testing.TB, h plugin.Handler, ip string, tcp bool, r *dns.Msg) (outcome, *dns.Msg) {
	t.Helper()
	w := &capture{ResponseWriter: test.ResponseWriter{RemoteIP: ip, TCP: tcp}}
	rcode, err := h.ServeDNS(context.Background(), w, r)
	if err != nil {
		t.Fatalf("ServeDNS: %v", err)
	}
	if !plugin.ClientWrite(rcode) {
		t.Fatalf("ServeDNS returned rcode %d, which leaves a second write to the server", rcode)
	}
	if len(w.msgs) > 1 {
		t.Fatalf("%d messages written for one query", len(w.msgs))
	}
	o := classify(w.msgs)
	if o == dropped {
		return o, nil
	}
	return o, w.msgs[0]
}

func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m
}

// tally sends n queries and counts the outcomes.
func tally(t testing.TB, h plugin.Handler, ip string, tcp bool, n int, mk func(i int) *dns.Msg) map[outcome]int {
	t.Helper()
	got := map[outcome]int{}
	for i := range n {
		o, _ := ask(t, h, ip, tcp, mk(i))
		got[o]++
	}
	return got
}

func TestLimitsUDPFlood(t *testing.T) {
	clk := newClock()
	h := testHandler(t, "{\n responses-per-second 5\n slip-ratio 2\n}", zoneNext, clk)
	got := tally(t, h, "127.0.1.1", false, 40, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
	if got[sent] < 5 || got[sent] > 6 {
		t.Errorf("sent %d of 40 with no time passing, want the allowance (5, give or take one): %v", got[sent], got)
	}
	if got[slipped] == 0 || got[dropped] == 0 {
		t.Errorf("with slip-ratio 2 both slips and drops are expected: %v", got)
	}
	// Another network has its own account.
	if o, _ := ask(t, h, "127.0.2.1", false, query("www.example.org.", dns.TypeA)); o != sent {
		t.Errorf("another network got %v, want sent", o)
	}
	// Another name is another account.
	if o, _ := ask(t, h, "127.0.1.1", false, query("mail.example.org.", dns.TypeA)); o != sent {
		t.Errorf("another name got %v, want sent", o)
	}
	// Names differ only in case: one account (BIND compares names without case).
	if o, _ := ask(t, h, "127.0.1.1", false, query("WWW.Example.ORG.", dns.TypeA)); o == sent {
		t.Error("a name in other case escaped the account of its lower-case form")
	}
	// Time heals: after the window the account is in credit again.
	clk.advance(20 * time.Second)
	if o, _ := ask(t, h, "127.0.1.1", false, query("www.example.org.", dns.TypeA)); o != sent {
		t.Errorf("after the window: %v, want sent", o)
	}
}

func TestSlippedReplyShape(t *testing.T) {
	h := testHandler(t, "{\n responses-per-second 1\n slip-ratio 1\n}", zoneNext, newClock())
	var last *dns.Msg
	for range 5 {
		r := query("www.example.org.", dns.TypeA)
		r.Id = 4242
		if o, m := ask(t, h, "127.0.1.1", false, r); o == slipped {
			last = m
		}
	}
	if last == nil {
		t.Fatal("no slipped reply with slip-ratio 1")
	}
	if last.Id != 4242 || len(last.Answer) != 0 || len(last.Question) != 1 || !last.Response {
		t.Errorf("slipped reply should be an empty TC reply with the question and ID: %v", last)
	}
}

func TestTCPNeverLimited(t *testing.T) {
	h := testHandler(t, "{\n responses-per-second 1\n all-per-second 1\n}", zoneNext, newClock())
	got := tally(t, h, "127.0.1.1", true, 50, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
	if got[sent] != 50 {
		t.Errorf("TCP: %v, want all 50 sent", got)
	}
}

func TestOutOfZonePassesThrough(t *testing.T) {
	h := testHandler(t, "sub.example.org {\n responses-per-second 1\n}", zoneNext, newClock())
	got := tally(t, h, "127.0.1.1", false, 20, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
	if got[sent] != 20 {
		t.Errorf("outside the plugin's zones: %v, want all sent", got)
	}
	got = tally(t, h, "127.0.1.1", false, 20, func(int) *dns.Msg { return query("a.SUB.example.org.", dns.TypeA) })
	if got[sent] == 20 {
		t.Errorf("inside the plugin's zones (other case): %v, want limiting", got)
	}
}

func TestExemptClient(t *testing.T) {
	h := testHandler(t, "{\n responses-per-second 1\n exempt-clients 127.0.9.0/24\n}", zoneNext, newClock())
	got := tally(t, h, "127.0.9.7", false, 30, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
	if got[sent] != 30 {
		t.Errorf("exempt client: %v, want all sent", got)
	}
}

func TestWildcardSharesAccount(t *testing.T) {
	h := testHandler(t, "{\n responses-per-second 3\n slip-ratio 0\n}", zoneNext, newClock())
	got := tally(t, h, "127.0.1.1", false, 30, func(i int) *dns.Msg {
		return query("n"+string(rune('a'+i%26))+string(rune('a'+i/26))+".wild.example.org.", dns.TypeA)
	})
	if got[sent] > 4 || got[dropped] == 0 {
		t.Errorf("30 distinct names under one wildcard: %v, want one account limited at 3", got)
	}
}

func TestNXDomainSharesAccount(t *testing.T) {
	h := testHandler(t, "{\n nxdomains-per-second 2\n slip-ratio 0\n}", zoneNext, newClock())
	got := tally(t, h, "127.0.1.1", false, 20, func(i int) *dns.Msg {
		return query("nx-"+string(rune('a'+i))+".example.org.", dns.TypeA)
	})
	if got[sent] > 3 || got[dropped] == 0 {
		t.Errorf("random NXDOMAIN names: %v, want one account for the zone", got)
	}
}

func TestErrorsLimitedNeverSlipped(t *testing.T) {
	h := testHandler(t, "{\n errors-per-second 2\n slip-ratio 1\n}", zoneNext, newClock())
	var rcodes []int
	got := map[outcome]int{}
	for range 20 {
		o, m := ask(t, h, "127.0.1.1", false, query("fail.example.org.", dns.TypeA))
		got[o]++
		if m != nil {
			rcodes = append(rcodes, m.Rcode)
		}
	}
	if got[slipped] != 0 {
		t.Errorf("errors slipped: %v", got)
	}
	if got[sent] == 0 || got[sent] > 3 || got[dropped] == 0 {
		t.Errorf("SERVFAIL flood: %v, want about 2 sent then drops", got)
	}
	for _, rc := range rcodes {
		if rc != dns.RcodeServerFailure {
			t.Errorf("sent rcode %d, want SERVFAIL", rc)
		}
	}
	// REFUSED shares the network's single error account.
	if o, _ := ask(t, h, "127.0.1.1", false, query("refuse.example.org.", dns.TypeA)); o != dropped {
		t.Errorf("REFUSED after a SERVFAIL flood: %v, want dropped", o)
	}
}

// TestErrorWrittenAndReturned: a plugin that writes an error and also
// returns its rcode must not make the server write a second, unlimited one
// (ask fails on such an rcode).
func TestErrorWrittenAndReturned(t *testing.T) {
	h := testHandler(t, "{\n errors-per-second 1\n slip-ratio 0\n}", zoneNext, newClock())
	got := tally(t, h, "127.0.1.1", false, 10, func(int) *dns.Msg { return query("writefail.example.org.", dns.TypeA) })
	if got[sent] == 0 || got[dropped] == 0 {
		t.Errorf("written SERVFAIL flood: %v, want limiting", got)
	}
}

func TestErrorWrittenOverTCP(t *testing.T) {
	h := testHandler(t, "{\n errors-per-second 1\n}", zoneNext, newClock())
	for range 5 {
		o, m := ask(t, h, "127.0.1.1", true, query("fail.example.org.", dns.TypeA))
		if o != sent || m.Rcode != dns.RcodeServerFailure {
			t.Fatalf("TCP error: %v %v, want SERVFAIL sent", o, m)
		}
	}
}

func TestReportOnly(t *testing.T) {
	h := testHandler(t, "{\n responses-per-second 1\n report-only\n}", zoneNext, newClock())
	before := testutil.ToFloat64(responsesExceeded.WithLabelValues("", "example.org.", "answer"))
	got := tally(t, h, "127.0.1.1", false, 10, func(int) *dns.Msg { return query("report.example.org.", dns.TypeA) })
	if got[sent] != 10 {
		t.Errorf("report-only: %v, want everything sent", got)
	}
	after := testutil.ToFloat64(responsesExceeded.WithLabelValues("", "example.org.", "answer"))
	if after-before < 8 {
		t.Errorf("report-only counted %v exceeded responses, want at least 8", after-before)
	}
}

// TestReportOnlyRefusedRequestGetsServerCookie: in report-only mode a
// request over requests-per-second is served as any other, so a client
// that sent a cookie gets a server cookie with it, and the refusal that
// enforcing would have made is counted.
func TestReportOnlyRefusedRequestGetsServerCookie(t *testing.T) {
	h := testHandler(t, "{\n requests-per-second 1\n report-only\n cookie-secret 000102030405060708090a0b0c0d0e0f\n}", zoneNext, newClock())
	const client = "0102030405060708"
	before := testutil.ToFloat64(requestsExceeded.WithLabelValues("", "example.org.", "unproven"))
	for i := range 5 {
		o, m := ask(t, h, "127.0.1.1", false, withCookie(query("cookie.example.org.", dns.TypeA), client))
		if o != sent {
			t.Fatalf("query %d: %v, want sent", i, o)
		}
		if c := cookieOf(m); len(c) != 48 || !strings.HasPrefix(c, client) {
			t.Errorf("query %d: response cookie %q, want the client cookie and a server cookie", i, c)
		}
	}
	if over := testutil.ToFloat64(requestsExceeded.WithLabelValues("", "example.org.", "unproven")) - before; over != 4 {
		t.Errorf("%v requests counted over requests-per-second, want 4 of 5", over)
	}
}

func TestInactivePassesThrough(t *testing.T) {
	h := testHandler(t, "{\n}", zoneNext, newClock())
	got := tally(t, h, "127.0.1.1", false, 10, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
	if got[sent] != 10 {
		t.Errorf("no allowance: %v", got)
	}
}

func TestNoQuestion(t *testing.T) {
	h := testHandler(t, "{\n responses-per-second 1\n}", plugin.HandlerFunc(func(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeFormatError)
		w.WriteMsg(m)
		return dns.RcodeSuccess, nil
	}), newClock())
	w := &capture{}
	if _, err := h.ServeDNS(context.Background(), w, new(dns.Msg)); err != nil {
		t.Fatal(err)
	}
	if len(w.msgs) != 1 {
		t.Fatal("a message without a question should pass through")
	}
}

// TestResponseWithoutQuestion: a plugin may answer without echoing the
// question; that must neither panic nor escape the limit.
func TestResponseWithoutQuestion(t *testing.T) {
	h := testHandler(t, "{\n responses-per-second 1\n slip-ratio 0\n}", plugin.HandlerFunc(func(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
		m := new(dns.Msg)
		m.Id, m.Response = r.Id, true
		w.WriteMsg(m)
		return dns.RcodeSuccess, nil
	}), newClock())
	got := tally(t, h, "127.0.1.1", false, 10, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
	if got[dropped] == 0 {
		t.Errorf("answers without question: %v, want limiting", got)
	}
}

// TestWireWrites: a plugin that writes packed bytes is limited too.
func TestWireWrites(t *testing.T) {
	h := testHandler(t, "{\n responses-per-second 1\n slip-ratio 0\n}", plugin.HandlerFunc(func(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Answer = []dns.RR{test.A("www.example.org. 300 IN A 192.0.2.1")}
		b, _ := m.Pack()
		w.Write(b)
		return dns.RcodeSuccess, nil
	}), newClock())
	got := tally(t, h, "127.0.1.1", false, 10, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
	if got[sent] == 0 || got[dropped] == 0 {
		t.Errorf("wire-format writes: %v, want some sent then drops", got)
	}
}

// withCookie adds a COOKIE option (hex) to r.
func withCookie(r *dns.Msg, cookie string) *dns.Msg {
	r.SetEdns0(1232, false)
	opt := r.IsEdns0()
	opt.Option = append(opt.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: cookie})
	return r
}

func cookieOf(m *dns.Msg) string {
	if opt := m.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if c, ok := o.(*dns.EDNS0_COOKIE); ok {
				return c.Cookie
			}
		}
	}
	return ""
}

// serverCookie asks h for www.example.org from ip with a client cookie and
// returns the cookie of the answer, the client's and h's server cookie:
// the cookie that client then presents.
func serverCookie(t testing.TB, h plugin.Handler, ip string) string {
	t.Helper()
	_, m := ask(t, h, ip, false, withCookie(query("www.example.org.", dns.TypeA), "0102030405060708"))
	full := cookieOf(m)
	if len(full) != 48 {
		t.Fatalf("no server cookie in %v", m)
	}
	return full
}

func TestCookies(t *testing.T) {
	h := testHandler(t, "{\n responses-per-second 1\n slip-ratio 1\n cookie-secret 000102030405060708090a0b0c0d0e0f\n}", zoneNext, newClock())
	const client = "0102030405060708"

	// A client cookie alone: the answer carries a server cookie.
	o, m := ask(t, h, "127.0.1.1", false, withCookie(query("www.example.org.", dns.TypeA), client))
	if o != sent {
		t.Fatalf("first query: %v", o)
	}
	full := cookieOf(m)
	if len(full) != 48 || !strings.HasPrefix(full, client) {
		t.Fatalf("response cookie %q, want the client cookie and a 16-byte server cookie", full)
	}
	// Once limited, a client that sent a cookie gets BADCOOKIE, not TC.
	sawBad := false
	for range 10 {
		if o, m := ask(t, h, "127.0.1.1", false, withCookie(query("www.example.org.", dns.TypeA), client)); o == badCookie {
			sawBad = true
			if !strings.HasPrefix(cookieOf(m), client) || len(cookieOf(m)) != 48 {
				t.Errorf("BADCOOKIE without a fresh server cookie: %q", cookieOf(m))
			}
		}
	}
	if !sawBad {
		t.Error("no BADCOOKIE slip for a limited client with a cookie")
	}
	// With the server cookie the client is exempt, however fast it asks.
	got := tally(t, h, "127.0.1.1", false, 30, func(int) *dns.Msg { return withCookie(query("www.example.org.", dns.TypeA), full) })
	if got[sent] != 30 {
		t.Errorf("valid server cookie: %v, want all sent", got)
	}
	// The same cookie from another address is not valid there.
	got = tally(t, h, "127.0.5.1", false, 10, func(int) *dns.Msg { return withCookie(query("www.example.org.", dns.TypeA), full) })
	if got[sent] == 10 {
		t.Errorf("a stolen cookie exempted another network: %v", got)
	}
	// The request's OPT record must not have been changed under the caller.
	r := withCookie(query("www.example.org.", dns.TypeA), client)
	ask(t, h, "127.0.7.1", false, r)
	if cookieOf(r) != client {
		t.Errorf("request cookie changed to %q", cookieOf(r))
	}
}

func TestMetricsCount(t *testing.T) {
	h := testHandler(t, "metrics.example.org {\n responses-per-second 2\n requests-per-second 3\n slip-ratio 0\n}", zoneNext, newClock())
	// The counters are global: another -count round has counted before.
	counters := func() (send, drop, refused, proven float64) {
		return testutil.ToFloat64(responsesTotal.WithLabelValues("", "metrics.example.org.", "answer", "send")),
			testutil.ToFloat64(responsesTotal.WithLabelValues("", "metrics.example.org.", "answer", "drop")),
			testutil.ToFloat64(requestsExceeded.WithLabelValues("", "metrics.example.org.", "unproven")),
			testutil.ToFloat64(requestsExceeded.WithLabelValues("", "metrics.example.org.", "proven"))
	}
	send0, drop0, refused0, proven0 := counters()
	tally(t, h, "127.0.1.1", false, 10, func(int) *dns.Msg { return query("a.metrics.example.org.", dns.TypeA) })
	send, drop, refused, proven := counters()
	send, drop, refused, proven = send-send0, drop-drop0, refused-refused0, proven-proven0
	if send+drop+refused != 10 || send == 0 || drop == 0 || refused == 0 {
		t.Errorf("responses_total send %v drop %v, requests_exceeded_total %v: want each counted, 10 in all", send, drop, refused)
	}
	if proven != 0 {
		t.Errorf("requests_exceeded_total counts %v proven requests, want 0 from a UDP client without cookies", proven)
	}
	st := h.limiter.GetStats(false)
	if st.CacheLength == 0 {
		t.Error("table empty after traffic")
	}
}

func TestMatchZone(t *testing.T) {
	h := &RRL{Zones: []string{"example.org.", "sub.example.org.", "other.test."}}
	for name, want := range map[string]int{
		"example.org.":       0,
		"www.Example.org.":   0,
		"SUB.example.org.":   1,
		"a.sub.example.org.": 1,
		"notexample.org.":    -1,
		"other.test.":        2,
		"org.":               -1,
	} {
		if got := h.matchZone(name); got != want {
			t.Errorf("matchZone(%q) = %d, want %d", name, got, want)
		}
	}
	root := &RRL{Zones: []string{"."}}
	if root.matchZone("anything.example.") != 0 {
		t.Error("the root zone should match everything")
	}
}

func TestIPv6Networks(t *testing.T) {
	h := testHandler(t, "{\n responses-per-second 2\n slip-ratio 0\n}", zoneNext, newClock())
	a := tally(t, h, "2001:db8:0:1::1", false, 5, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
	// Same /56 as the first client: same account, already spent.
	b := tally(t, h, "2001:db8:0:2::7", false, 5, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
	// Another /56: its own account.
	c := tally(t, h, "2001:db8:0:100::1", false, 2, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
	if a[dropped] == 0 || b[sent] != 0 || c[sent] != 2 {
		t.Errorf("IPv6 /56 accounts: first %v, same /56 %v, other /56 %v", a, b, c)
	}
	// An IPv4-mapped address counts as IPv4.
	d := tally(t, h, "::ffff:127.0.1.1", false, 5, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
	e := tally(t, h, "127.0.1.2", false, 1, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
	if d[dropped] == 0 || e[sent] != 0 {
		t.Errorf("IPv4-mapped: %v, then plain IPv4 in the same /24: %v", d, e)
	}
}

// countingZone is zoneNext, counting its calls in *calls.
func countingZone(calls *int) plugin.Handler {
	return plugin.HandlerFunc(func(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
		*calls++
		return zoneNext(ctx, w, r)
	})
}

// TestRequestLimitBeforeNext: a request over requests-per-second never
// reaches the next plugin and gets nothing; in report-only mode it is
// served, and the metrics count what enforcing would have done: the
// request refused, and no response for it.
func TestRequestLimitBeforeNext(t *testing.T) {
	for _, report := range []bool{false, true} {
		calls := 0
		next := countingZone(&calls)
		block := "{\n requests-per-second 3\n}"
		if report {
			block = "{\n requests-per-second 3\n report-only\n}"
		}
		h := testHandler(t, block, next, newClock())
		responses := func() float64 {
			return testutil.ToFloat64(responsesTotal.WithLabelValues("", "example.org.", "answer", "send"))
		}
		refused := func() float64 {
			return testutil.ToFloat64(requestsExceeded.WithLabelValues("", "example.org.", "unproven"))
		}
		respBefore, refBefore := responses(), refused()
		got := tally(t, h, "127.0.1.1", false, 10, func(i int) *dns.Msg { return query("n"+itoa(i)+".example.org.", dns.TypeA) })
		if r, n := refused()-refBefore, responses()-respBefore; r != 7 || n != 3 {
			t.Errorf("report-only %v: %v requests counted refused, %v responses counted sent; want 7 and 3, what enforcing does", report, r, n)
		}
		switch {
		case report && (calls != 10 || got[sent] != 10):
			t.Errorf("report-only: next called %d times, %v; want all 10 served", calls, got)
		case !report && (calls != 3 || got[sent] != 3 || got[dropped] != 7):
			t.Errorf("next called %d times, %v; want 3 served, 7 dropped before next", calls, got)
		}
	}
}

// TestMalformedCookieFormErr: a COOKIE option of a length RFC 7873 does
// not allow, or two COOKIE options, get FORMERR without a cookie, and the
// next plugin is not asked.
func TestMalformedCookieFormErr(t *testing.T) {
	calls := 0
	next := countingZone(&calls)
	h := testHandler(t, "{\n responses-per-second 100\n}", next, newClock())
	short := withCookie(query("www.example.org.", dns.TypeA), "0102030405")
	two := withCookie(query("www.example.org.", dns.TypeA), "0102030405060708")
	two.IsEdns0().Option = append(two.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})
	for name, r := range map[string]*dns.Msg{"5-byte cookie": short, "two cookies": two} {
		for _, tcp := range []bool{false, true} {
			o, m := ask(t, h, "127.0.1.1", tcp, r)
			if o != sent || m.Rcode != dns.RcodeFormatError || cookieOf(m) != "" || m.IsEdns0() == nil {
				t.Errorf("%s (tcp %v): %v %v; want FORMERR with an OPT record and no cookie", name, tcp, o, m)
			}
		}
	}
	if calls != 0 {
		t.Errorf("next asked %d times about malformed cookies", calls)
	}
	// In report-only mode a request over requests-per-second is served as
	// any other: a malformed cookie still gets FORMERR.
	h = testHandler(t, "{\n requests-per-second 1\n report-only\n}", next, newClock())
	for i := range 3 {
		o, m := ask(t, h, "127.0.2.1", false, short)
		if o != sent || m.Rcode != dns.RcodeFormatError {
			t.Errorf("report-only, query %d: %v %v; want FORMERR", i, o, m)
		}
	}
	if calls != 0 {
		t.Errorf("report-only: next asked %d times about malformed cookies", calls)
	}
}

// TestValidCookieHeldToProvenAllowance: through ServeDNS, with the clock
// standing still, a client presenting a valid server cookie is held to
// proven-requests-per-second (5: the first five are answered, the rest get
// nothing, neither TC nor BADCOOKIE, and never reach the next plugin), and
// is exempt from responses-per-second and all-per-second (1 each). The
// refused ones count as proven in requests_exceeded_total, the answered
// ones in cookie_exempt_total. Clients of the network without a cookie
// keep their own, smaller request account.
func TestValidCookieHeldToProvenAllowance(t *testing.T) {
	calls := 0
	next := countingZone(&calls)
	h := testHandler(t, "{\n responses-per-second 1\n all-per-second 1\n requests-per-second 2\n proven-requests-per-second 5\n cookie-secret 000102030405060708090a0b0c0d0e0f\n}", next, newClock())
	const zone = "example.org."
	full := serverCookie(t, h, "127.0.8.1")
	calls = 0
	refused := testutil.ToFloat64(requestsExceeded.WithLabelValues("", zone, "proven"))
	exempt := testutil.ToFloat64(cookieExemptTotal.WithLabelValues("", zone))

	got := tally(t, h, "127.0.8.1", false, 20, func(int) *dns.Msg { return withCookie(query("www.example.org.", dns.TypeA), full) })
	if got[sent] != 5 || got[dropped] != 15 || calls != 5 {
		t.Errorf("valid cookie, 20 queries: %v, next called %d times; want 5 sent (the proven allowance, over the response limits of 1), 15 refused before next", got, calls)
	}
	if d := testutil.ToFloat64(requestsExceeded.WithLabelValues("", zone, "proven")) - refused; d != 15 {
		t.Errorf("requests_exceeded_total{source=proven} rose by %v, want 15", d)
	}
	if d := testutil.ToFloat64(cookieExemptTotal.WithLabelValues("", zone)) - exempt; d != 5 {
		t.Errorf("cookie_exempt_total rose by %v, want 5", d)
	}
	// The unproven account of the network had one request (the one that
	// fetched the cookie): one more passes it, then requests are refused.
	calls = 0
	got = tally(t, h, "127.0.8.1", false, 4, func(i int) *dns.Msg { return query("n"+itoa(i)+".example.org.", dns.TypeA) })
	if calls != 1 || got[sent] > 1 {
		t.Errorf("no cookie, same network: %v, next called %d times; want one request past requests-per-second 2", got, calls)
	}
}

// TestReportOnlyCookieExemptCountsOnlyAdmitted: in report-only mode a
// valid-cookie request over proven-requests-per-second is served, but its
// response is not counted in cookie_exempt_total, which enforcing would
// never have sent, as the README says.
func TestReportOnlyCookieExemptCountsOnlyAdmitted(t *testing.T) {
	h := testHandler(t, "{\n responses-per-second 1\n proven-requests-per-second 5\n report-only\n cookie-secret 000102030405060708090a0b0c0d0e0f\n}", zoneNext, newClock())
	full := serverCookie(t, h, "127.0.9.1")
	exempt := testutil.ToFloat64(cookieExemptTotal.WithLabelValues("", "example.org."))
	got := tally(t, h, "127.0.9.1", false, 20, func(int) *dns.Msg { return withCookie(query("www.example.org.", dns.TypeA), full) })
	if got[sent] != 20 {
		t.Errorf("report-only, 20 queries with a valid cookie: %v, want all sent", got)
	}
	if d := testutil.ToFloat64(cookieExemptTotal.WithLabelValues("", "example.org.")) - exempt; d != 5 {
		t.Errorf("cookie_exempt_total rose by %v, want 5: the requests within the proven allowance", d)
	}
}

// closeRecorder is a capture that notes whether the plugin closed the
// connection, with the client address given.
type closeRecorder struct {
	capture
	remote net.Addr
	closed bool
}

func (c *closeRecorder) RemoteAddr() net.Addr { return c.remote }
func (c *closeRecorder) Close() error         { c.closed = true; return nil }

// TestValidCookieCountsForQPSScale: requests with a valid server cookie
// count for qps-scale, though their responses are not charged: a cookie
// flood that takes the server over qps-scale tightens the allowance of the
// other clients, as any load does. Without the flood the other client's 8
// queries a second stay within its 10.
func TestValidCookieCountsForQPSScale(t *testing.T) {
	limitedOther := func(flood bool) int {
		clk := newClock()
		h := testHandler(t, "{\n responses-per-second 10\n slip-ratio 1\n qps-scale 20\n cookie-secret 000102030405060708090a0b0c0d0e0f\n}", zoneNext, clk)
		full := serverCookie(t, h, "127.0.8.1")
		limited := 0
		for i := range 300 { // 3 seconds: 100 proven requests a second, and 8 others
			if flood {
				if o, m := ask(t, h, "127.0.8.1", false, withCookie(query("www.example.org.", dns.TypeA), full)); o != sent {
					t.Fatalf("proven request %d: %v %v, want it sent", i, o, m)
				}
			}
			if i%12 == 0 {
				if o, _ := ask(t, h, "127.0.9.1", false, query("www.example.org.", dns.TypeA)); o != sent {
					limited++
				}
			}
			clk.advance(10 * time.Millisecond)
		}
		return limited
	}
	if n := limitedOther(false); n != 0 {
		t.Fatalf("without the cookie flood the other client was limited %d times, want 0", n)
	}
	if limitedOther(true) == 0 {
		t.Error("the other client was never limited: the proven requests did not count for qps-scale")
	}
}

// TestRefusedRequestCloses: a request over its limit closes a plain DNS TCP
// connection, also when the proxyproto plugin wraps the client's address;
// over UDP, over DNS over TLS and in report-only mode nothing is closed.
func TestRefusedRequestCloses(t *testing.T) {
	tcp := &net.TCPAddr{IP: net.ParseIP("127.0.1.1"), Port: 40000}
	udp := &net.UDPAddr{IP: net.ParseIP("127.0.1.1"), Port: 40000}
	proxied := proxyproto.NewAddr(&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 40000}, &net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 40000}, nil)
	cases := []struct {
		name, server string
		remote       net.Addr
		report       bool
		wantClosed   bool
	}{
		{"plain TCP", "dns://127.0.0.1:53", tcp, false, true},
		{"TCP, server unknown", "", tcp, false, true},
		{"TCP through proxyproto", "dns://127.0.0.1:53", proxied, false, true},
		{"UDP", "dns://127.0.0.1:53", udp, false, false},
		{"DNS over TLS", "tls://127.0.0.1:853", tcp, false, false},
		{"TCP, report-only", "dns://127.0.0.1:53", tcp, true, false},
	}
	for _, c := range cases {
		block := "{\n requests-per-second 1\n}"
		if c.report {
			block = "{\n requests-per-second 1\n report-only\n}"
		}
		h := testHandler(t, block, zoneNext, newClock())
		ctx := context.Background()
		if c.server != "" {
			ctx = context.WithValue(ctx, dnsserver.Key{}, &dnsserver.Server{Addr: c.server})
		}
		var w *closeRecorder
		for range 3 { // the burst is 1: the second and third are refused
			w = &closeRecorder{remote: c.remote}
			if _, err := h.ServeDNS(ctx, w, query("www.example.org.", dns.TypeA)); err != nil {
				t.Fatal(err)
			}
		}
		if w.closed != c.wantClosed {
			t.Errorf("%s: closed %v, want %v", c.name, w.closed, c.wantClosed)
		}
		if wantSent := c.report; (len(w.msgs) == 1) != wantSent {
			t.Errorf("%s: %d messages written to a refused request, want %d", c.name, len(w.msgs), map[bool]int{true: 1}[wantSent])
		}
	}
}
