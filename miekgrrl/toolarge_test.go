package miekgrrl

import (
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/miekg/dns"
)

// bigTXT answers every query with four TXT records of 230 bytes: a
// response of about 1,000 bytes, with the request's EDNS buffer size.
var bigTXT = dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg).SetReply(r)
	for i := range 4 {
		m.Answer = append(m.Answer, &dns.TXT{
			Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 300},
			Txt: []string{strings.Repeat(strconv.Itoa(i), 230)}})
	}
	if opt := r.IsEdns0(); opt != nil {
		m.SetEdns0(opt.UDPSize(), false)
	}
	w.WriteMsg(m)
})

// rawExchange sends q over network to addr from 127.0.0.1 and returns the
// reply and its length on the wire.
func rawExchange(t *testing.T, network, addr string, q *dns.Msg) (*dns.Msg, int) {
	t.Helper()
	return exchangeRaw(t, network, addr, q, nil)
}

// exchangeRaw is rawExchange that, when sent is not nil, reads the reply
// only if sent, called once q has gone, reports that one is coming:
// otherwise it returns nil and 0.
func exchangeRaw(t *testing.T, network, addr string, q *dns.Msg, sent func() bool) (*dns.Msg, int) {
	t.Helper()
	conn, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	co := &dns.Conn{Conn: conn, UDPSize: dns.MaxMsgSize}
	if err := co.WriteMsg(q); err != nil {
		t.Fatal(err)
	}
	if sent != nil && !sent() {
		return nil, 0
	}
	b, err := co.ReadMsgHeader(nil)
	if err != nil {
		t.Fatal(err)
	}
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		t.Fatal(err)
	}
	return m, len(b)
}

func txtQuery(cookie string) *dns.Msg {
	q := cookieQuery("big.example.org.", cookie)
	q.Question[0].Qtype = dns.TypeTXT
	return q
}

// TestIntegrationNoCookieUDPSize: with nocookie-udp-size 512, a 1,000-byte
// answer goes to an unproven UDP client as a TC reply of at most 512 bytes,
// with a server cookie (not BADCOOKIE) when the client sent a cookie; the
// client's retry with that cookie, and a query over TCP, get it whole.
func TestIntegrationNoCookieUDPSize(t *testing.T) {
	lim := newLimiter(t, newTestClock(), "nocookie-udp-size", "512")
	reasons := make(chan rrl.RTReason, 16)
	srv := startLoopback(t, Middleware(lim, bigTXT, Options{Cookies: NewCookies([16]byte{7}),
		OnDecision: func(d Decision) { reasons <- d.RTReason }}))

	r, n := rawExchange(t, "udp", srv.udp, txtQuery(""))
	if !r.Truncated || len(r.Answer) != 0 || r.Rcode != dns.RcodeSuccess || n > 512 || respCookie(r) != "" {
		t.Errorf("no cookie: want a TC reply of at most 512 bytes without cookie, got %d bytes: %v", n, r)
	}
	if rtr := <-reasons; rtr != rrl.RTTooLarge {
		t.Errorf("decision %v, want RTTooLarge", rtr)
	}

	r, n = rawExchange(t, "udp", srv.udp, txtQuery(testClientCookie))
	full := respCookie(r)
	if !r.Truncated || len(r.Answer) != 0 || r.Rcode != dns.RcodeSuccess || n > 512 || len(full) != 48 || full[:16] != testClientCookie {
		t.Fatalf("a client cookie: want a TC reply of at most 512 bytes with a server cookie, got %d bytes: %v", n, r)
	}
	<-reasons

	r, n = rawExchange(t, "udp", srv.udp, txtQuery(full))
	if r.Truncated || len(r.Answer) != 4 || n < 900 {
		t.Errorf("with the server cookie: want the whole answer, got %d bytes: %v", n, r)
	}
	r, n = rawExchange(t, "tcp", srv.tcp, txtQuery(""))
	if r.Truncated || len(r.Answer) != 4 || n < 900 {
		t.Errorf("over TCP: want the whole answer, got %d bytes: %v", n, r)
	}
	<-reasons
	<-reasons
	if s := lim.GetStats(false); s.TooLarge != 2 {
		t.Errorf("TooLarge %d, want 2: %v", s.TooLarge, s)
	}
}

// TestIntegrationNoCookieUDPSizeDig is the same with dig, a client that
// is not ours, when it is installed.
func TestIntegrationNoCookieUDPSizeDig(t *testing.T) {
	dig, err := exec.LookPath("dig")
	if err != nil {
		t.Skip("no dig")
	}
	lim := newLimiter(t, newTestClock(), "nocookie-udp-size", "512")
	srv := startLoopback(t, Middleware(lim, bigTXT, Options{Cookies: NewCookies([16]byte{7})}))
	host, port, _ := net.SplitHostPort(srv.udp)
	_, tcpPort, _ := net.SplitHostPort(srv.tcp)
	run := func(p string, args ...string) string {
		out, err := exec.Command(dig, append([]string{"@" + host, "-p", p, "+bufsize=4096", "+tries=1", "+time=5", "big.example.org.", "TXT"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("dig %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	size := regexp.MustCompile(`MSG SIZE +rcvd: (\d+)`)
	rcvd := func(out string) int {
		m := size.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no size in\n%s", out)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	flags := regexp.MustCompile(`;; flags: ([a-z ]+);`)
	hasFlag := func(out, f string) bool {
		m := flags.FindStringSubmatch(out)
		return m != nil && strings.Contains(" "+m[1]+" ", " "+f+" ")
	}
	out := run(port, "+nocookie", "+ignore")
	if !hasFlag(out, "tc") || rcvd(out) > 512 || !strings.Contains(out, "ANSWER: 0") {
		t.Errorf("no cookie: want TC of at most 512 bytes\n%s", out)
	}
	out = run(port, "+cookie", "+ignore")
	if !hasFlag(out, "tc") || rcvd(out) > 512 || !strings.Contains(out, "COOKIE:") || strings.Contains(out, "BADCOOKIE") {
		t.Errorf("with a client cookie: want TC with a server cookie, of at most 512 bytes\n%s", out)
	}
	out = run(tcpPort, "+tcp")
	if hasFlag(out, "tc") || !strings.Contains(out, "ANSWER: 4") || rcvd(out) < 900 {
		t.Errorf("over TCP: want the whole answer\n%s", out)
	}
}

// TestTooLargeReply: the reply carries the question and a fresh server
// cookie for a client cookie, TC and no BADCOOKIE; without cookies on, no
// cookie.
func TestTooLargeReply(t *testing.T) {
	c := NewCookies([16]byte{1})
	client := netip.MustParseAddr("127.0.0.1")
	req := txtQuery(testClientCookie)
	resp := new(dns.Msg).SetReply(req)
	r := TooLargeReply(req, resp, c, client, time.Unix(1e9, 0))
	if !r.Truncated || r.Rcode != dns.RcodeSuccess || len(r.Question) != 1 || len(respCookie(r)) != 48 {
		t.Errorf("with cookies: %v", r)
	}
	if r := TooLargeReply(req, resp, nil, client, time.Unix(1e9, 0)); !r.Truncated || respCookie(r) != "" {
		t.Errorf("without cookies: %v", r)
	}
	if r := SlipReply(req, resp, c, client, time.Unix(1e9, 0)); r.Rcode != dns.RcodeBadCookie {
		t.Errorf("SlipReply still answers BADCOOKIE: %v", r)
	}
}

// TestIntegrationNoCookieUDPSizePacked: a handler that packs its own
// message (Write) is measured by what it wrote.
func TestIntegrationNoCookieUDPSizePacked(t *testing.T) {
	lim := newLimiter(t, newTestClock(), "nocookie-udp-size", "512")
	packer := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		rec := &recordingWriter{}
		bigTXT.ServeDNS(rec, r)
		b, err := rec.msg.Pack()
		if err != nil {
			t.Error(err)
			return
		}
		w.Write(b)
	})
	srv := startLoopback(t, Middleware(lim, packer, Options{}))
	if r, n := rawExchange(t, "udp", srv.udp, txtQuery("")); !r.Truncated || n > 512 {
		t.Errorf("want a TC reply of at most 512 bytes, got %d bytes: %v", n, r)
	}
	if r, n := rawExchange(t, "tcp", srv.tcp, txtQuery("")); r.Truncated || n < 900 {
		t.Errorf("over TCP: %d bytes: %v", n, r)
	}
}

// recordingWriter keeps the message a handler writes.
type recordingWriter struct {
	dns.ResponseWriter
	msg *dns.Msg
}

func (w *recordingWriter) WriteMsg(m *dns.Msg) error { w.msg = m; return nil }

// TestIntegrationAllBytesBurst: a burst over 60 names, each answer about
// 300 bytes, is held to all-bytes-per-second's budget plus one answer.
func TestIntegrationAllBytesBurst(t *testing.T) {
	lim := newLimiter(t, newTestClock(), "all-bytes-per-second", "3000")
	decided := make(chan Decision, 64)
	txt := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg).SetReply(r)
		m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 300},
			Txt: []string{strings.Repeat("t", 250)}})
		w.WriteMsg(m)
	})
	srv := startLoopback(t, Middleware(lim, txt, Options{OnDecision: func(d Decision) { decided <- d }}))
	conn, err := net.Dial("udp", srv.udp)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	co := &dns.Conn{Conn: conn}
	sentBytes, sent, size := 0, 0, 0
	for i := range 60 {
		q := new(dns.Msg).SetQuestion("n"+strconv.Itoa(i)+".example.org.", dns.TypeTXT)
		if err := co.WriteMsg(q); err != nil {
			t.Fatal(err)
		}
		select {
		case d := <-decided:
			size = d.Tuple.Size
			if d.Action == rrl.Send {
				sent++
				sentBytes += d.Tuple.Size
			} else if d.Action != rrl.Drop || d.RTReason != rrl.RTAllBytesLimit {
				t.Fatalf("query %d: %v %v", i, d.Action, d.RTReason)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("query %d: no decision", i)
		}
	}
	if size < 280 || sentBytes > 3000+size || sentBytes < 3000-size {
		t.Errorf("%d answers of %d bytes, %d bytes sent, want 3000 give or take one answer", sent, size, sentBytes)
	}
}
