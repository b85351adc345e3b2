package rrl_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/miekg/dns"

	rrl "github.com/dnsrrl/rrl/coredns"

	_ "github.com/coredns/coredns/plugin/acl"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/file"
	_ "github.com/coredns/coredns/plugin/metadata"
	_ "github.com/coredns/coredns/plugin/metrics"
)

// The integration test runs a real CoreDNS, in process, from a Corefile and
// a zone file, and talks to it over loopback UDP and TCP from several client
// networks: every 127.N.M.1 can be bound without setup.

const zoneFile = `$ORIGIN example.test.
@       3600 IN SOA ns1.example.test. hostmaster.example.test. 1 7200 3600 1209600 300
@       3600 IN NS  ns1.example.test.
ns1     3600 IN A   127.0.0.1
www     3600 IN A   192.0.2.1
*.wild  3600 IN A   192.0.2.2
sub     3600 IN NS  ns.sub.example.test.
ns.sub.example.test. 3600 IN A 192.0.2.53
`

const corefileTemplate = `example.test.:%[1]d refused.test.:%[1]d other.test.:%[1]d {
    bind 127.0.0.1
    metadata
    prometheus 127.0.0.1:%[2]d
    rrl {
        window 5
        responses-per-second 5
        nxdomains-per-second 5
        referrals-per-second 5
        errors-per-second 5
        slip-ratio 2
        max-table-size 300
        exempt-clients 127.0.99.0/24
        cookie-secret 00112233445566778899aabbccddeeff
    }
    acl refused.test. {
        block
    }
    file %[3]s example.test.
}
shared.test.:%[1]d {
    bind 127.0.0.1
    rrl {
        errors-per-second 5
    }
}
report.test.:%[1]d {
    bind 127.0.0.1
    rrl {
        errors-per-second 2
        log-only
    }
}
`

var (
	startOnce sync.Once
	server    struct {
		addr    string // host:port of DNS over UDP and TCP
		metrics string // URL of the metrics page
		err     error
	}
)

// freePort returns a loopback port that was free a moment ago: for "udp",
// free for TCP as well, as a DNS server needs it.
func freePort(t *testing.T, network string) int {
	t.Helper()
	if network == "udp" {
		// A DNS server listens on the port over TCP too: find one free
		// for both, since a port free for UDP may be a TCP connection's.
		for range 100 {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := l.Addr().(*net.TCPAddr).Port
			c, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			l.Close()
			if err == nil {
				c.Close()
				return port
			}
		}
		t.Fatal("no port free for both UDP and TCP")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type input struct{ body []byte }

func (i input) Body() []byte       { return i.body }
func (i input) Path() string       { return "Corefile" }
func (i input) ServerType() string { return "dns" }

// startServer starts CoreDNS once for all the integration tests, with rrl
// put into the plugin order as the shipped main package does.
func startServer(t *testing.T) {
	t.Helper()
	startOnce.Do(func() {
		dnsserver.Directives = rrl.InsertDirective(dnsserver.Directives)
		dir, err := os.MkdirTemp("", "rrl-integration")
		if err != nil {
			server.err = err
			return
		}
		zf := filepath.Join(dir, "db.example.test")
		if err := os.WriteFile(zf, []byte(zoneFile), 0o644); err != nil {
			server.err = err
			return
		}
		dnsPort, metricsPort := freePort(t, "udp"), freePort(t, "tcp")
		corefile := fmt.Sprintf(corefileTemplate, dnsPort, metricsPort, zf)
		caddy.Quiet, dnsserver.Quiet = true, true
		if _, err := caddy.Start(input{[]byte(corefile)}); err != nil {
			server.err = err
			return
		}
		server.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(dnsPort))
		server.metrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	})
	if server.err != nil {
		t.Fatalf("starting CoreDNS: %v", server.err)
	}
}

// result counts what a burst of UDP queries got back.
type result struct {
	sent, answered, truncated, badCookie int
	rcodes                               map[int]int
	cookies                              []string
}

func (r result) dropped() int { return r.sent - r.answered - r.truncated - r.badCookie }

func (r result) String() string {
	return fmt.Sprintf("sent %d: answered %d, truncated %d, badcookie %d, dropped %d, rcodes %v",
		r.sent, r.answered, r.truncated, r.badCookie, r.dropped(), r.rcodes)
}

// burst sends the queries from src over UDP as fast as it can, then
// collects replies until none has come for a short while. The wait only
// bounds how long the collecting lasts; nothing is asserted on time.
func burst(t *testing.T, src string, queries []*dns.Msg) result {
	t.Helper()
	return burstTo(t, server.addr, src, queries)
}

// burstTo is burst to the server at addr.
func burstTo(t *testing.T, addr, src string, queries []*dns.Msg) result {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(src)})
	if err != nil {
		t.Fatalf("bind %s: %v", src, err)
	}
	defer conn.Close()
	dst, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	res := result{rcodes: map[int]int{}}
	for i, q := range queries {
		q.Id = uint16(i + 1)
		b, err := q.Pack()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.WriteToUDP(b, dst); err != nil {
			t.Fatal(err)
		}
		res.sent++
	}
	buf := make([]byte, 4096)
	seen := map[uint16]bool{}
	for len(seen) < len(queries) {
		conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, _, err := conn.ReadFromUDP(buf)
		if err != nil {
			break // quiet for a while: the rest were dropped
		}
		m := new(dns.Msg)
		if m.Unpack(buf[:n]) != nil || seen[m.Id] {
			continue
		}
		seen[m.Id] = true
		switch {
		case m.Rcode == dns.RcodeBadCookie:
			res.badCookie++
		case m.Truncated:
			res.truncated++
		default:
			res.answered++
			res.rcodes[m.Rcode]++
		}
		if c := rrl.CookieOf(m); c != "" {
			res.cookies = append(res.cookies, c)
		}
	}
	return res
}

func repeat(n int, mk func(i int) *dns.Msg) []*dns.Msg {
	qs := make([]*dns.Msg, n)
	for i := range qs {
		qs[i] = mk(i)
	}
	return qs
}

func q(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m
}

// The allowance is 5 per second over a 5-second window; the bursts take
// milliseconds, so little fresh credit can accrue; the slack covers a
// loaded CI machine that is slow to handle the first few queries.
const allowance, slack = 5, 4

func TestIntegrationFlood(t *testing.T) {
	startServer(t)
	res := burst(t, "127.0.1.1", repeat(40, func(int) *dns.Msg { return q("www.example.test.", dns.TypeA) }))
	t.Log(res)
	if res.answered < 1 || res.answered > allowance+slack {
		t.Errorf("flood: %v; want about %d answered", res, allowance)
	}
	if res.truncated == 0 || res.dropped() == 0 {
		t.Errorf("flood with slip-ratio 2: %v; want both TC replies and drops", res)
	}

	// Another network is not affected by the first one's flood.
	other := burst(t, "127.0.2.1", repeat(3, func(int) *dns.Msg { return q("www.example.test.", dns.TypeA) }))
	if other.answered != 3 {
		t.Errorf("another network: %v; want all 3 answered", other)
	}
}

func TestIntegrationTCPNeverLimited(t *testing.T) {
	startServer(t)
	// Exhaust the UDP account of this network first.
	burst(t, "127.0.3.1", repeat(20, func(int) *dns.Msg { return q("www.example.test.", dns.TypeA) }))
	c := &dns.Client{Net: "tcp", Timeout: 2 * time.Second,
		Dialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.3.1")}}}
	conn, err := c.Dial(server.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i := range 30 {
		m, _, err := c.ExchangeWithConn(q("www.example.test.", dns.TypeA), conn)
		if err != nil {
			t.Fatalf("TCP query %d: %v", i, err)
		}
		if m.Truncated || len(m.Answer) != 1 {
			t.Fatalf("TCP query %d limited: %v", i, m)
		}
	}
}

func TestIntegrationExemptClient(t *testing.T) {
	startServer(t)
	res := burst(t, "127.0.99.1", repeat(40, func(int) *dns.Msg { return q("www.example.test.", dns.TypeA) }))
	if res.answered != 40 {
		t.Errorf("exempt client: %v; want all answered", res)
	}
}

func TestIntegrationWildcardSharesAccount(t *testing.T) {
	startServer(t)
	res := burst(t, "127.0.4.1", repeat(40, func(i int) *dns.Msg {
		return q("host"+strconv.Itoa(i)+".wild.example.test.", dns.TypeA)
	}))
	if res.answered > allowance+slack || res.dropped() == 0 {
		t.Errorf("40 names under one wildcard: %v; want them limited as one account", res)
	}
}

func TestIntegrationNXDomainAndReferral(t *testing.T) {
	startServer(t)
	res := burst(t, "127.0.5.1", repeat(40, func(i int) *dns.Msg {
		return q("nope"+strconv.Itoa(i)+".example.test.", dns.TypeA)
	}))
	if res.answered > allowance+slack || res.rcodes[dns.RcodeNameError] == 0 {
		t.Errorf("random NXDOMAIN names: %v; want one account for the zone", res)
	}
	res = burst(t, "127.0.5.1", repeat(40, func(i int) *dns.Msg {
		return q("h"+strconv.Itoa(i)+".sub.example.test.", dns.TypeA)
	}))
	if res.answered > allowance+slack || res.answered == 0 {
		t.Errorf("names below a delegation: %v; want one referral account", res)
	}
}

func TestIntegrationErrorsLimitedNeverSlipped(t *testing.T) {
	startServer(t)
	// other.test. is in the server block but in no plugin's zone: file
	// returns REFUSED as an rcode and writes nothing, so rrl writes it.
	res := burst(t, "127.0.6.1", repeat(40, func(i int) *dns.Msg { return q("x"+strconv.Itoa(i)+".other.test.", dns.TypeA) }))
	if res.answered == 0 || res.answered > allowance+slack || res.rcodes[dns.RcodeRefused] != res.answered {
		t.Errorf("REFUSED returned as rcode: %v; want about %d REFUSED answered", res, allowance)
	}
	if res.truncated != 0 {
		t.Errorf("errors slipped: %v", res)
	}
	// acl writes REFUSED itself; it is limited too.
	res = burst(t, "127.0.7.1", repeat(40, func(int) *dns.Msg { return q("refused.test.", dns.TypeA) }))
	if res.answered == 0 || res.answered > allowance+slack || res.truncated != 0 {
		t.Errorf("REFUSED written by acl: %v; want about %d answered, no TC", res, allowance)
	}
}

func TestIntegrationBlocksDoNotShareAccounts(t *testing.T) {
	startServer(t)
	// Exhaust 127.0.8.0/24's error account in the first server block...
	burst(t, "127.0.8.1", repeat(30, func(int) *dns.Msg { return q("refused.test.", dns.TypeA) }))
	// ...the block for shared.test. on the same listener has its own table.
	res := burst(t, "127.0.8.1", repeat(3, func(int) *dns.Msg { return q("shared.test.", dns.TypeA) }))
	if res.answered != 3 {
		t.Errorf("other server block on the same listener: %v; want all 3 answered", res)
	}
}

// TestIntegrationReportOnly: with log-only (report-only) everything is sent,
// and the metrics say what would have been dropped.
func TestIntegrationReportOnly(t *testing.T) {
	startServer(t)
	res := burst(t, "127.0.11.1", repeat(20, func(int) *dns.Msg { return q("report.test.", dns.TypeA) }))
	if res.answered != 20 {
		t.Errorf("report-only: %v; want everything answered", res)
	}
	page := scrape(t)
	if v := metricValue(t, page, `coredns_rrl_responses_total{action="drop",category="error",server="dns://127.0.0.1:`+port()+`",zone="report.test."}`); v < 10 {
		t.Errorf("report-only counted %v would-be drops, want most of 20", v)
	}
}

// withCookieOption gives m an OPT record with a COOKIE option of the hex
// text cookie, and returns m.
func withCookieOption(m *dns.Msg, cookie string) *dns.Msg {
	m.SetEdns0(1232, false)
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: cookie})
	return m
}

func TestIntegrationCookieExempt(t *testing.T) {
	startServer(t)
	withCookie := func(cookie string) *dns.Msg { return withCookieOption(q("www.example.test.", dns.TypeA), cookie) }
	const client = "a1b2c3d4e5f60718"
	first := burst(t, "127.0.9.1", []*dns.Msg{withCookie(client)})
	if first.answered != 1 || len(first.cookies) != 1 || len(first.cookies[0]) != 48 {
		t.Fatalf("first query with a client cookie: %v, cookies %v; want an answer with a server cookie", first, first.cookies)
	}
	full := first.cookies[0]
	exempt := `coredns_rrl_cookie_exempt_total{server="dns://127.0.0.1:` + port() + `",zone="example.test."}`
	before := metricValue(t, scrape(t), exempt)
	res := burst(t, "127.0.9.1", repeat(40, func(int) *dns.Msg { return withCookie(full) }))
	if res.answered != 40 {
		t.Errorf("client with a valid server cookie: %v; want all answered", res)
	}
	page := scrapeUntil(t, func(page string) bool { return metricValue(t, page, exempt)-before >= 40 })
	if d := metricValue(t, page, exempt) - before; d != 40 {
		t.Errorf("cookie_exempt_total +%v, want +40", d)
	}
	// Without it the same network is limited, and told BADCOOKIE when it
	// sent a client cookie.
	res = burst(t, "127.0.9.1", repeat(40, func(int) *dns.Msg { return withCookie(client) }))
	if res.answered > allowance+slack || res.badCookie == 0 {
		t.Errorf("client cookie only: %v; want limiting with BADCOOKIE slips", res)
	}
}

// TestIntegrationSprayBoundsMemory sends one query from each of thousands
// of client networks: the table must stay within max-table-size, and the
// metrics must not grow a series per client.
func TestIntegrationSprayBoundsMemory(t *testing.T) {
	startServer(t)
	dst, _ := net.ResolveUDPAddr("udp", server.addr)
	b, _ := q("www.example.test.", dns.TypeA).Pack()
	before := metricSum(scrape(t), "coredns_rrl_responses_total")
	networks := 0
	for n := 20; n < 30; n++ {
		for m := range 256 {
			conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, byte(n), byte(m), 1)})
			if err != nil {
				t.Fatal(err)
			}
			conn.WriteToUDP(b, dst)
			conn.Close()
			networks++
		}
	}
	// Poll, boundedly, until the server has handled the spray (or the
	// count stops moving, if the kernel dropped some of it).
	var page string
	last, still := -1.0, 0
	for range 100 {
		page = scrape(t)
		got := metricSum(page, "coredns_rrl_responses_total")
		if got >= before+float64(networks) || still >= 3 {
			break
		}
		if got == last {
			still++
		}
		last = got
		time.Sleep(50 * time.Millisecond)
	}
	if handled := metricSum(page, "coredns_rrl_responses_total") - before; handled < 400 {
		t.Fatalf("only %v of %d sprayed queries reached the plugin", handled, networks)
	}
	size := metricValue(t, page, `coredns_rrl_table_size{server="dns://127.0.0.1:`+port()+`",zone="example.test."}`)
	if size > 300 {
		t.Errorf("table size %v after %d networks, over max-table-size 300", size, networks)
	}
	if ev := metricValue(t, page, `coredns_rrl_table_evictions_total{server="dns://127.0.0.1:`+port()+`",zone="example.test."}`); ev == 0 {
		t.Errorf("no evictions after %d networks into a table of 300", networks)
	}
}

// TestIntegrationMetrics checks what the metrics say about a flood, by the
// change it makes to each series: the tests run one after another, so
// nothing else moves these series meanwhile.
func TestIntegrationMetrics(t *testing.T) {
	startServer(t)
	series := func(metric, labels string) string {
		return metric + "{" + labels + `server="dns://127.0.0.1:` + port() + `",zone="example.test."}`
	}
	answer := func(action string) string {
		return series("coredns_rrl_responses_total", `action="`+action+`",category="answer",`)
	}
	exceeded := series("coredns_rrl_responses_exceeded_total", `category="answer",`)
	before := scrape(t)
	res := burst(t, "127.0.10.1", repeat(20, func(int) *dns.Msg { return q("www.example.test.", dns.TypeA) }))
	var page string
	delta := func(s string) float64 { return metricValue(t, page, s) - metricValue(t, before, s) }
	page = scrapeUntil(t, func(p string) bool {
		page = p
		return delta(answer("send"))+delta(answer("slip"))+delta(answer("drop")) >= 20
	})
	send, slip, drop := delta(answer("send")), delta(answer("slip")), delta(answer("drop"))
	t.Logf("burst %v; metrics: send +%v, slip +%v, drop +%v", res, send, slip, drop)
	if send+slip+drop != 20 {
		t.Errorf("send %v + slip %v + drop %v, want the 20 responses of the burst", send, slip, drop)
	}
	if send < 1 || send > allowance+slack || slip == 0 || drop == 0 {
		t.Errorf("send +%v, slip +%v, drop +%v; want about %d sent, and slips and drops (slip-ratio 2)", send, slip, drop, allowance)
	}
	if int(send) != res.answered || int(slip) != res.truncated {
		t.Errorf("metrics (send %v, slip %v) disagree with what the client saw: %v", send, slip, res)
	}
	if e := delta(exceeded); e != slip+drop {
		t.Errorf("responses_exceeded_total +%v, want slip+drop = %v", e, slip+drop)
	}
	if v := metricValue(t, page, series("coredns_rrl_table_max_size", "")); v != 300 {
		t.Errorf("table_max_size %v, want 300", v)
	}
	if v := metricValue(t, page, series("coredns_rrl_table_size", "")); v < 1 || v > 300 {
		t.Errorf("table_size %v, want between 1 and 300", v)
	}
	if v := metricValue(t, page, series("coredns_rrl_limited_accounts", "")); v < 1 {
		t.Errorf("limited_accounts %v right after a flood, want at least 1", v)
	}
	for _, want := range []string{`coredns_rrl_requests_exceeded_total{`, `coredns_rrl_cookie_exempt_total{`, `coredns_rrl_table_evictions_total{`} {
		if !strings.Contains(page, want) {
			t.Errorf("metrics page lacks %s", want)
		}
	}
	// No rrl series may carry a client address: only the listener's.
	clientAddr := regexp.MustCompile(`127\.\d+\.\d+\.\d+`)
	sc := bufio.NewScanner(strings.NewReader(page))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "coredns_rrl_") {
			continue
		}
		for _, a := range clientAddr.FindAllString(line, -1) {
			if a != "127.0.0.1" {
				t.Errorf("metric carries a client address: %s", line)
			}
		}
	}
}

func port() string {
	_, p, _ := net.SplitHostPort(server.addr)
	return p
}

func scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(server.metrics)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// scrapeUntil scrapes the metrics until done says the page holds what the
// test waits for, and returns the last page. A reply reaches the client
// just before the plugin counts it, so a scrape right after the last reply
// may miss it; the wait is bounded (a second), and the caller then asserts
// on what it got.
func scrapeUntil(t *testing.T, done func(page string) bool) string {
	t.Helper()
	page := scrape(t)
	for i := 0; i < 100 && !done(page); i++ {
		time.Sleep(10 * time.Millisecond)
		page = scrape(t)
	}
	return page
}

// metricValue returns the value of the first series that starts with prefix.
func metricValue(t *testing.T, page, prefix string) float64 {
	t.Helper()
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, prefix) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("bad metric line %q", line)
			}
			return v
		}
	}
	t.Fatalf("no series %s in the metrics page", prefix)
	return 0
}

// metricSum adds up every series of a metric.
func metricSum(page, name string) float64 {
	sum := 0.0
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, name+"{") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}
