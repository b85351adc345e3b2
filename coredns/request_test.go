package rrl_test

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	rrl "github.com/dnsrrl/rrl/coredns"
)

// The request limit acts before the work: these tests put a counting
// upstream behind forward, below rrl, in a real CoreDNS, and flood it from
// one client network at ten times the allowance.

// upstream is a DNS server on loopback (UDP and TCP on one port) that
// answers every A query, after delay, and counts the queries by the first
// character of their name, so that floods from different clients can be
// told apart.
type upstream struct {
	addr string
	mu   sync.Mutex
	seen map[byte]int
}

func startUpstream(t *testing.T) *upstream { return startSlowUpstream(t, 0) }

// startSlowUpstream starts an upstream that takes delay over each query,
// as a slow upstream keeps forward waiting.
func startSlowUpstream(t *testing.T, delay time.Duration) *upstream {
	t.Helper()
	u := &upstream{seen: map[byte]int{}}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.addr = pc.LocalAddr().String()
	l, err := net.Listen("tcp", u.addr)
	if err != nil {
		pc.Close()
		t.Fatal(err)
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		name := r.Question[0].Name
		u.mu.Lock()
		u.seen[name[0]]++
		u.mu.Unlock()
		time.Sleep(delay) // the upstream's work, which forward waits for
		m := new(dns.Msg)
		m.SetReply(r)
		rr, _ := dns.NewRR(name + " 60 IN A 192.0.2.1")
		m.Answer = []dns.RR{rr}
		w.WriteMsg(m)
	})
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: l, Handler: h}} {
		go s.ActivateAndServe()
		t.Cleanup(func() { s.Shutdown() })
	}
	return u
}

func (u *upstream) count(first byte) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[first]
}

// requestBlock is a server block with request limits only, over forward to
// up, on a port of its own.
func requestBlock(t *testing.T, up *upstream, extra string) string {
	t.Helper()
	port := freePort(t, "udp")
	startCorefile(t, fmt.Sprintf(`req.test.:%d {
    bind 127.0.0.1
    rrl {
        requests-per-second %d
        proven-requests-per-second %d
        %s
    }
    forward . %s
}
`, port, unprovenRate, provenRate, extra, up.addr))
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

const (
	unprovenRate = 10 // requests-per-second
	provenRate   = 20 // proven-requests-per-second
	floodFactor  = 10 // the flood asks this many times its allowance
	floodSeconds = 1.5
	// requestSlack covers the queries that arrive while the flood starts
	// on a loaded machine; the bound is otherwise exact.
	requestSlack = 3
)

// allowed is the most a network may be served at rate per second over a
// flood that lasted elapsed: one second of burst, then the rate.
func allowed(rate int, elapsed time.Duration) int {
	return int(float64(rate)*(1+elapsed.Seconds())) + requestSlack
}

// pace calls send n times, evenly over d (a ticker paces the flood; nothing
// is asserted on time), and returns how long it took.
func pace(n int, d time.Duration, send func(i int)) time.Duration {
	start := time.Now()
	tick := time.NewTicker(d / time.Duration(n))
	defer tick.Stop()
	for i := range n {
		send(i)
		<-tick.C
	}
	return time.Since(start)
}

// udpClient sends queries from src and counts the distinct replies.
type udpClient struct {
	conn    *net.UDPConn
	dst     *net.UDPAddr
	mu      sync.Mutex
	replies map[uint16]*dns.Msg
	done    chan struct{}
}

func newUDPClient(t *testing.T, src, addr string) *udpClient {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(src)})
	if err != nil {
		t.Fatalf("bind %s: %v", src, err)
	}
	dst, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := &udpClient{conn: conn, dst: dst, replies: map[uint16]*dns.Msg{}, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			m := new(dns.Msg)
			if m.Unpack(buf[:n]) == nil {
				c.mu.Lock()
				c.replies[m.Id] = m
				c.mu.Unlock()
			}
		}
	}()
	return c
}

func (c *udpClient) send(t *testing.T, m *dns.Msg) {
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.conn.WriteToUDP(b, c.dst); err != nil {
		t.Fatal(err)
	}
}

// finish waits until want replies came or none has come for half a second
// (a bound on the wait, not an assertion), and returns the replies.
func (c *udpClient) finish(want int) map[uint16]*dns.Msg {
	last, still := -1, 0
	for range 100 {
		c.mu.Lock()
		n := len(c.replies)
		c.mu.Unlock()
		if n >= want || still >= 5 {
			break
		}
		if n == last {
			still++
		} else {
			last, still = n, 0
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.conn.Close()
	<-c.done
	return c.replies
}

func named(prefix string, i int, cookie string) *dns.Msg {
	m := q(prefix+strconv.Itoa(i)+".req.test.", dns.TypeA)
	m.Id = uint16(i + 1)
	if cookie != "" {
		withCookieOption(m, cookie)
	}
	return m
}

// TestIntegrationRequestLimitSavesTheWork: a UDP flood from one network at
// ten times requests-per-second reaches the upstream at most at the
// allowance, the queries over it get nothing at all, and another network
// asking meanwhile is served in full.
func TestIntegrationRequestLimitSavesTheWork(t *testing.T) {
	up := startUpstream(t)
	addr := requestBlock(t, up, "")
	flooder := newUDPClient(t, "127.0.40.1", addr)
	other := newUDPClient(t, "127.0.41.1", addr)
	n := int(unprovenRate * floodFactor * floodSeconds)
	otherSent := 0
	elapsed := pace(n, time.Duration(floodSeconds*float64(time.Second)), func(i int) {
		flooder.send(t, named("f", i, ""))
		if i%(2*floodFactor) == 0 { // half the allowance
			other.send(t, named("o", otherSent, ""))
			otherSent++
		}
	})
	got := flooder.finish(n)
	otherGot := other.finish(otherSent)

	limit := allowed(unprovenRate, elapsed)
	served := up.count('f')
	t.Logf("%d queries in %v: upstream saw %d, client got %d replies; other network %d of %d", n, elapsed, served, len(got), len(otherGot), otherSent)
	if served == 0 || served > limit {
		t.Errorf("upstream saw %d of the flood's %d queries, want 1 to %d", served, n, limit)
	}
	if len(got) > served {
		t.Errorf("the flooding client got %d replies for %d queries served: a refused UDP query must get nothing", len(got), served)
	}
	if len(otherGot) != otherSent {
		t.Errorf("another network: got %d replies of %d (upstream saw %d); want all", len(otherGot), otherSent, up.count('o'))
	}
}

// TestIntegrationRequestLimitOverTCP: over TCP (a proven source) the flood
// is held to proven-requests-per-second: a refused query's connection is
// closed without an answer, and the upstream never sees it.
func TestIntegrationRequestLimitOverTCP(t *testing.T) {
	up := startUpstream(t)
	addr := requestBlock(t, up, "")
	c := &dns.Client{Net: "tcp", Timeout: 2 * time.Second,
		Dialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.42.1")}}}
	n := int(provenRate * floodFactor * floodSeconds)
	answered, closed := 0, 0
	elapsed := pace(n, time.Duration(floodSeconds*float64(time.Second)), func(i int) {
		m, _, err := c.Exchange(named("t", i, ""), addr)
		switch {
		case err == nil && len(m.Answer) == 1:
			answered++
		case err != nil && !strings.Contains(err.Error(), "timeout"):
			closed++ // the server closed the connection: EOF or reset
		default:
			t.Errorf("TCP query %d: %v %v; want an answer or a closed connection", i, m, err)
		}
	})
	limit := allowed(provenRate, elapsed)
	t.Logf("%d TCP queries in %v: %d answered, %d closed, upstream saw %d", n, elapsed, answered, closed, up.count('t'))
	if served := up.count('t'); answered == 0 || served > limit || answered > served {
		t.Errorf("TCP flood: %d answered, upstream saw %d; want 1 to %d, no answer the upstream did not give", answered, served, limit)
	}
	if answered+closed != n {
		t.Errorf("%d answered + %d closed, want %d", answered, closed, n)
	}
}

// TestIntegrationCookieHeldToProvenAllowance: a client with a valid server
// cookie is exempt from the response limits, not from the request limit: a
// flood at ten times proven-requests-per-second gets at most that
// allowance answered (well above responses-per-second, which a cookie
// lifts), and the refused queries are counted as proven.
func TestIntegrationCookieHeldToProvenAllowance(t *testing.T) {
	up := startUpstream(t)
	addr := requestBlock(t, up, "responses-per-second 1\n        cookie-secret 00112233445566778899aabbccddeeff")
	const src = "127.0.43.1"
	first := newUDPClient(t, src, addr)
	first.send(t, named("c", 100000-1, "a1b2c3d4e5f60718"))
	replies := first.finish(1)
	var full string
	for _, m := range replies {
		full = rrl.CookieOf(m)
	}
	if len(full) != 48 {
		t.Fatalf("no server cookie in the reply to a client cookie: %v", replies)
	}
	_, port, _ := net.SplitHostPort(addr)
	proven := `coredns_rrl_requests_exceeded_total{server="dns://127.0.0.1:` + port + `",source="proven",zone="req.test."}`
	exempt := `coredns_rrl_cookie_exempt_total{server="dns://127.0.0.1:` + port + `",zone="req.test."}`
	before := gathered(t, "coredns_rrl_requests_exceeded_total")

	flooder := newUDPClient(t, src, addr)
	n := int(provenRate * floodFactor * floodSeconds)
	elapsed := pace(n, time.Duration(floodSeconds*float64(time.Second)), func(i int) {
		m := named("k", i, full)
		m.Question[0].Name = "k.req.test." // one name: one response account
		flooder.send(t, m)
	})
	got := flooder.finish(n)
	limit := allowed(provenRate, elapsed)
	t.Logf("%d queries with a valid cookie in %v: %d answered, upstream saw %d", n, elapsed, len(got), up.count('k'))
	if served := up.count('k'); len(got) == 0 || served > limit || len(got) > served {
		t.Errorf("cookie flood: %d answered, upstream saw %d; want 1 to %d, no answer the upstream did not give", len(got), served, limit)
	}
	if len(got) <= allowed(1, elapsed) {
		t.Errorf("cookie flood: %d answered; responses-per-second 1 seems to apply, want the cookie to lift it", len(got))
	}
	// What limited them is the request limit, counted as proven.
	after := gathered(t, "coredns_rrl_requests_exceeded_total")
	key := "server=dns://127.0.0.1:" + port + ",source=proven,zone=req.test."
	served := up.count('k')
	if d := after[key] - before[key]; int(d) != n-served {
		t.Errorf("%s rose by %v, want the %d refused queries", proven, d, n-served)
	}
	ex := gathered(t, "coredns_rrl_cookie_exempt_total")["server=dns://127.0.0.1:"+port+",zone=req.test."]
	if int(ex) != served {
		t.Errorf("%s = %v, want the %d answers sent for their cookie", exempt, ex, served)
	}
}
