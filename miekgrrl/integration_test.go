package miekgrrl

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/miekg/dns"
)

// loopbackServer serves h over UDP and TCP on 127.0.0.1, on ports the kernel
// picks, until the test ends.
type loopbackServer struct {
	udp, tcp string // addresses
}

func startLoopback(t *testing.T, h dns.Handler) loopbackServer {
	return startLoopbackOn(t, "127.0.0.1", h)
}

// startLoopbackOn is startLoopback on host (127.0.0.1 or ::1); it skips the
// test if host is not available.
func startLoopbackOn(t *testing.T, host string, h dns.Handler) loopbackServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Skipf("no %s: %v", host, err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Skipf("no %s: %v", host, err)
	}
	activate(t, &dns.Server{PacketConn: pc, Handler: h})
	activate(t, &dns.Server{Listener: ln, Handler: h})
	return loopbackServer{udp: pc.LocalAddr().String(), tcp: ln.Addr().String()}
}

// activate serves srv, whose listener is set, until the test ends.
func activate(t testing.TB, srv *dns.Server) {
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
}

// startUDPLoopback serves srv, its handler and options set, over UDP on
// 127.0.0.1 until the test ends, and returns its address.
func startUDPLoopback(t *testing.T, srv *dns.Server) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no 127.0.0.1: %v", err)
	}
	srv.PacketConn = pc
	activate(t, srv)
	return pc.LocalAddr().String()
}

// clientFrom returns a client that sends from source (a 127.N.M.1 address)
// over network; timeout is how long a dropped query takes to give up on.
func clientFrom(network, source string, timeout time.Duration) *dns.Client {
	var local net.Addr = &net.UDPAddr{IP: net.ParseIP(source)}
	if network == "tcp" {
		local = &net.TCPAddr{IP: net.ParseIP(source)}
	}
	return &dns.Client{Net: network, Timeout: timeout, Dialer: &net.Dialer{LocalAddr: local, Timeout: timeout}}
}

// outcome sorts what a client got back into the limiter's actions.
func outcome(t *testing.T, r *dns.Msg, err error) rrl.Action {
	t.Helper()
	var nerr net.Error
	switch {
	case errors.As(err, &nerr) && nerr.Timeout(), errors.Is(err, os.ErrDeadlineExceeded):
		return rrl.Drop
	case err != nil:
		t.Fatalf("exchange: %v", err)
	case r.Truncated || r.Rcode == dns.RcodeBadCookie:
		return rrl.Slip
	case r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1:
		return rrl.Send
	}
	t.Fatalf("unexpected response %v", r)
	return 0
}

// A flood from one source gets the configured rate, then alternating TC and
// silence (slip-ratio 2), while another network is served.
//
// What was decided is learnt from the decision hook, not from how long the
// client waited: on a loaded machine a late response is no drop. The client
// waits for a response only when the hook says one was sent, as long as it
// takes (up to a generous timeout), and checks that it is the one decided;
// no response to a dropped query may ever arrive.
func TestIntegrationUDPFlood(t *testing.T) {
	clock := newTestClock()
	lim := newLimiter(t, clock, "responses-per-second", "4", "slip-ratio", "2")
	decided := make(chan rrl.Action, 16)
	srv := startLoopback(t, Middleware(lim, answerHandler, Options{OnDecision: func(d Decision) { decided <- d.Action }}))
	conn, err := net.DialUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(srv.udp)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	co := &dns.Conn{Conn: conn}
	dropped := map[uint16]bool{}

	var got []rrl.Action
	for i := range 8 {
		q := query("www.example.org.")
		q.Id = uint16(1000 + i)
		if err := co.WriteMsg(q); err != nil {
			t.Fatal(err)
		}
		var a rrl.Action
		select {
		case a = <-decided:
		case <-time.After(10 * time.Second):
			t.Fatalf("query %d: no decision", i)
		}
		got = append(got, a)
		if a == rrl.Drop {
			dropped[q.Id] = true
			continue
		}
		// Read until the response to this query, skipping none but
		// responses to earlier queries (which must not be dropped ones).
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			r, err := co.ReadMsg()
			if err != nil {
				t.Fatalf("query %d (%v): %v", i, a, err)
			}
			if dropped[r.Id] {
				t.Fatalf("a response to dropped query %d arrived: %v", r.Id, r)
			}
			if r.Id != q.Id {
				continue
			}
			if sent := outcome(t, r, nil); sent != a {
				t.Errorf("query %d: decided %v, client got %v", i, a, sent)
			}
			break
		}
	}
	want := []rrl.Action{rrl.Send, rrl.Send, rrl.Send, rrl.Send, rrl.Slip, rrl.Drop, rrl.Slip, rrl.Drop}
	if !equalActions(got, want) {
		t.Errorf("flood got %v, want %v", got, want)
	}

	other := clientFrom("udp", "127.3.4.1", 10*time.Second)
	for i := range 4 {
		r, _, err := other.Exchange(query("www.example.org."), srv.udp)
		if a := outcome(t, r, err); a != rrl.Send || <-decided != rrl.Send {
			t.Errorf("other network, query %d: %v", i, a)
		}
	}

	// The TC reply is well-formed: the question, no records, rcode kept.
	clock.advance(time.Hour)
	flooder := clientFrom("udp", "127.0.0.1", 10*time.Second)
	for i := range 4 {
		r, _, err := flooder.Exchange(query("www.example.org."), srv.udp)
		if a := outcome(t, r, err); a != rrl.Send || <-decided != rrl.Send {
			t.Fatalf("after an hour, query %d: %v", i, a)
		}
	}
	r, _, err := flooder.Exchange(query("www.example.org."), srv.udp)
	if err != nil || !r.Truncated || len(r.Question) != 1 || len(r.Answer)+len(r.Ns)+len(r.Extra) != 0 || r.Authoritative {
		t.Errorf("TC reply %v, %v", r, err)
	}
}

// TCP responses are never response-limited, however many.
func TestIntegrationTCPNotLimited(t *testing.T) {
	lim := newLimiter(t, newTestClock(), "responses-per-second", "1", "slip-ratio", "1")
	srv := startLoopback(t, Middleware(lim, answerHandler, Options{}))
	c := clientFrom("tcp", "127.0.0.1", 2*time.Second)
	for i := range 20 {
		r, _, err := c.Exchange(query("www.example.org."), srv.tcp)
		if a := outcome(t, r, err); a != rrl.Send {
			t.Fatalf("TCP query %d: %v", i, a)
		}
	}
	// The same source over UDP is limited after one.
	u := clientFrom("udp", "127.0.0.1", 2*time.Second)
	var got []rrl.Action
	for range 2 {
		r, _, err := u.Exchange(query("www.example.org."), srv.udp)
		got = append(got, outcome(t, r, err))
	}
	if !equalActions(got, []rrl.Action{rrl.Send, rrl.Slip}) {
		t.Errorf("UDP after the TCP flood: %v", got)
	}
}

// A client that follows BADCOOKIE with the server cookie it was given is
// exempt from the response limits; the same source without the cookie is
// not.
func TestIntegrationBadCookieFollowUp(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "::1"} {
		t.Run(host, func(t *testing.T) { testBadCookieFollowUp(t, host) })
	}
}

func testBadCookieFollowUp(t *testing.T, host string) {
	clock := newTestClock()
	lim := newLimiter(t, clock, "responses-per-second", "1", "slip-ratio", "1")
	cookies := NewCookies([16]byte{0x42})
	srv := startLoopbackOn(t, host, Middleware(lim, answerHandler, Options{Cookies: cookies}))
	c := clientFrom("udp", host, 2*time.Second)
	const clientCookie = "a1b2c3d4e5f60718"

	r, _, err := c.Exchange(cookieQuery("www.example.org.", clientCookie), srv.udp)
	if outcome(t, r, err) != rrl.Send {
		t.Fatalf("first query: %v", r)
	}
	r, _, err = c.Exchange(cookieQuery("www.example.org.", clientCookie), srv.udp)
	if err != nil || r.Rcode != dns.RcodeBadCookie {
		t.Fatalf("second query: want BADCOOKIE, got %v %v", r, err)
	}
	full := respCookie(r)
	if len(full) != 48 || full[:16] != clientCookie {
		t.Fatalf("BADCOOKIE cookie %q", full)
	}
	for i := range 30 {
		r, _, err := c.Exchange(cookieQuery("www.example.org.", full), srv.udp)
		if a := outcome(t, r, err); a != rrl.Send {
			t.Fatalf("with the server cookie, query %d: %v", i, a)
		}
		if got := respCookie(r); len(got) != 48 || got[:16] != clientCookie {
			t.Fatalf("query %d: response cookie %q", i, got)
		}
	}
	r, _, err = c.Exchange(cookieQuery("www.example.org.", clientCookie), srv.udp)
	if err != nil || r.Rcode != dns.RcodeBadCookie {
		t.Errorf("without the server cookie: want BADCOOKIE, got %v %v", r, err)
	}
}

// loopbackFlood sends plan's flood over network ("udp" or "tcp") from
// 127.0.0.1, each query made by ask, pacing the limiter's clock by the
// decisions: each query waits for its decision, so that what is limited
// does not depend on how fast the machine is. Over UDP it reads the
// response only when one was decided (a response to a dropped query fails
// the test); over TCP each query has its own connection, which a refused
// request must find closed. between is called after each query. It returns
// how many queries were answered.
func loopbackFlood(t *testing.T, srv loopbackServer, network string, plan floodPlan, clock *testClock,
	decided <-chan Decision, ask func() *dns.Msg, between func(i int)) (answered int) {
	t.Helper()
	next := func(i int) Decision {
		select {
		case d := <-decided:
			return d
		case <-time.After(10 * time.Second):
			t.Fatalf("%s query %d: no decision", network, i)
			return Decision{}
		}
	}
	var co *dns.Conn
	if network == "udp" {
		conn, err := net.DialUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(srv.udp)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		co = &dns.Conn{Conn: conn}
	}
	tcp := clientFrom("tcp", "127.0.0.1", 10*time.Second)
	dropped := map[uint16]bool{}
	for i := range plan.queries() {
		q := ask()
		q.Id = uint16(i)
		var r *dns.Msg
		var err error
		if network == "udp" {
			if err := co.WriteMsg(q); err != nil {
				t.Fatal(err)
			}
		} else {
			r, _, err = tcp.Exchange(q, srv.tcp)
		}
		d := next(i)
		switch {
		case d.RequestDropped && network == "udp":
			dropped[q.Id] = true
		case d.RequestDropped:
			if err == nil {
				t.Fatalf("TCP query %d refused, yet answered: %v", i, r)
			}
		case network == "udp":
			co.SetReadDeadline(time.Now().Add(10 * time.Second))
			for r == nil || r.Id != q.Id {
				if r, err = co.ReadMsg(); err != nil {
					t.Fatalf("query %d (%v): %v", i, d.Action, err)
				}
				if dropped[r.Id] {
					t.Fatalf("a response to refused query %d arrived: %v", r.Id, r)
				}
			}
			fallthrough
		default:
			if a := outcome(t, r, err); a != rrl.Send || d.Action != rrl.Send {
				t.Fatalf("%s query %d: decided %v, client got %v", network, i, d.Action, a)
			}
			answered++
		}
		if between != nil {
			between(i)
		}
		clock.advance(plan.step())
	}
	return answered
}

// A flood ten times over requests-per-second from one network, over real
// UDP, reaches the handler at most the allowance plus one second of burst,
// while another network is served in full; over TCP the same holds with
// proven-requests-per-second, TCP's allowance.
func TestIntegrationRequestLimitFlood(t *testing.T) {
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			plan := floodPlan{rate: 5, seconds: 4}
			clock := newTestClock()
			lim := newLimiter(t, clock, "requests-per-second", fmt.Sprint(plan.rate),
				"proven-requests-per-second", fmt.Sprint(plan.rate))
			count := newCountingHandler()
			decided := make(chan Decision, 16)
			srv := startLoopback(t, Middleware(lim, count, Options{OnDecision: func(d Decision) { decided <- d }}))
			other := clientFrom(network, "127.3.4.1", 10*time.Second)
			otherAddr := map[string]string{"udp": srv.udp, "tcp": srv.tcp}[network]
			otherAsked, otherSent := 0, 0
			answered := loopbackFlood(t, srv, network, plan, clock, decided,
				func() *dns.Msg { return query("www.example.org.") },
				func(i int) {
					if i%12 != 0 { // about 4 a second, within the allowance
						return
					}
					otherAsked++
					r, _, err := other.Exchange(query("www.example.org."), otherAddr)
					// Its decision is taken off the channel whatever
					// came of it, so that the flood's next query reads
					// its own.
					if d := <-decided; outcome(t, r, err) == rrl.Send && d.Action == rrl.Send {
						otherSent++
					}
				})
			calls := count.of("127.0.0.1")
			if calls != answered || calls > plan.ceiling() || calls < plan.rate {
				t.Errorf("the flood reached the handler %d times (%d answered), want %d to %d", calls, answered, plan.rate, plan.ceiling())
			}
			if otherSent != otherAsked || count.of("127.3.4.1") != otherAsked {
				t.Errorf("the other network: %d answers, %d handler calls of %d", otherSent, count.of("127.3.4.1"), otherAsked)
			}
		})
	}
}

// A client that learnt its server cookie from the server, over the wire,
// and floods with it at ten times proven-requests-per-second gets that
// allowance answered and no more; responses-per-second (1) does not hold
// it. (Over TCP every request is proven, cookie or not: see
// TestIntegrationRequestLimitFlood.)
func TestIntegrationValidCookieFlood(t *testing.T) {
	const network = "udp"
	plan := floodPlan{rate: 5, seconds: 4}
	clock := newTestClock()
	lim := newLimiter(t, clock, "requests-per-second", "1", "responses-per-second", "1", "slip-ratio", "1",
		"proven-requests-per-second", fmt.Sprint(plan.rate))
	count := newCountingHandler()
	decided := make(chan Decision, 16)
	srv := startLoopback(t, Middleware(lim, count, Options{Cookies: NewCookies([16]byte{0x42}), Now: clock.now,
		OnDecision: func(d Decision) { decided <- d }}))

	const clientCookie = "a1b2c3d4e5f60718"
	c := clientFrom("udp", "127.0.0.1", 10*time.Second)
	r, _, err := c.Exchange(cookieQuery("www.example.org.", clientCookie), srv.udp)
	if outcome(t, r, err) != rrl.Send || (<-decided).Cookie != CookieClientOnly {
		t.Fatalf("first query: %v", r)
	}
	full := respCookie(r)
	if len(full) != 48 || full[:16] != clientCookie {
		t.Fatalf("learnt cookie %q", full)
	}

	answered := loopbackFlood(t, srv, network, plan, clock, decided,
		func() *dns.Msg { return cookieQuery("www.example.org.", full) }, nil)
	if answered > plan.ceiling() || answered < plan.rate {
		t.Errorf("%d answered with a valid cookie, want %d to %d", answered, plan.rate, plan.ceiling())
	}
	if calls := count.of("127.0.0.1"); calls != answered+1 {
		t.Errorf("handler called %d times for %d answers and the first query", calls, answered)
	}
}

// selfSignedTLS returns a server certificate for 127.0.0.1, made for the
// test.
func selfSignedTLS(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// A request refused on a connection, plain TCP, TLS or a stream over a
// Unix socket, closes it: the client learns at once, from the end of the
// stream, that no answer will come, rather than waiting for one.
func TestIntegrationRefusedClosesConnection(t *testing.T) {
	for _, network := range []string{"tcp", "tcp-tls", "unix"} {
		t.Run(network, func(t *testing.T) {
			lim := newLimiter(t, newTestClock(), "requests-per-second", "1")
			var calls atomic.Int32
			handler := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
				calls.Add(1)
				answerHandler(w, r)
			})
			var ln net.Listener
			var err error
			switch network {
			case "tcp":
				ln, err = net.Listen("tcp", "127.0.0.1:0")
			case "tcp-tls":
				ln, err = tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{selfSignedTLS(t)}})
			default:
				ln, err = net.Listen("unix", filepath.Join(t.TempDir(), "dns.sock"))
			}
			if err != nil {
				t.Skipf("cannot listen on %s: %v", network, err)
			}
			// The server would close an idle connection itself after
			// IdleTimeout: make that longer than the client waits.
			srvNet := network
			if network == "unix" {
				srvNet = "tcp" // a stream, served as dns.Server serves TCP
			}
			activate(t, &dns.Server{Listener: ln, Net: srvNet, Handler: Middleware(lim, handler, Options{}),
				IdleTimeout: func() time.Duration { return time.Minute }})

			c := &dns.Client{Net: network, Timeout: 10 * time.Second, TLSConfig: &tls.Config{InsecureSkipVerify: true}}
			var co *dns.Conn
			if network == "unix" {
				var conn net.Conn
				if conn, err = net.Dial("unix", ln.Addr().String()); err == nil {
					co = &dns.Conn{Conn: conn}
				}
			} else {
				co, err = c.Dial(ln.Addr().String())
			}
			if err != nil {
				t.Fatal(err)
			}
			defer co.Close()
			if r, _, err := c.ExchangeWithConn(query("www.example.org."), co); outcome(t, r, err) != rrl.Send {
				t.Fatalf("first query: %v %v", r, err)
			}
			r, _, err := c.ExchangeWithConn(query("www.example.org."), co)
			var nerr net.Error
			if err == nil || (errors.As(err, &nerr) && nerr.Timeout()) {
				t.Fatalf("second query, over the limit: %v, %v; want the connection closed", r, err)
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("handler called %d times, want 1", n)
			}
		})
	}
}
