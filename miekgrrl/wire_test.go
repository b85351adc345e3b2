package miekgrrl

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/dnsrrl/rrl"
	"github.com/miekg/dns"
)

// sizedTXT answers a query for "sN.example.org." TXT with a message of
// exactly N bytes as the handler writes it (before any server cookie), with
// an OPT record when the query had one: a response of any size to weigh.
var sizedTXT = dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
	label, _, _ := strings.Cut(r.Question[0].Name, ".")
	want, _ := strconv.Atoi(strings.TrimPrefix(label, "s"))
	w.WriteMsg(sizedReply(r, want))
})

// sizedReply is r's reply of want bytes (at least its bare length), padded
// with one TXT record whose strings take the rest.
func sizedReply(r *dns.Msg, want int) *dns.Msg {
	m := new(dns.Msg).SetReply(r)
	if opt := r.IsEdns0(); opt != nil {
		m.SetEdns0(opt.UDPSize(), false)
	}
	txt := &dns.TXT{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 300}}
	m.Answer = append(m.Answer, txt)
	for pad := want - m.Len(); pad > 0; pad = want - m.Len() {
		if n := len(txt.Txt); n > 0 && len(txt.Txt[n-1]) < 255 {
			grow := min(pad, 255-len(txt.Txt[n-1]))
			txt.Txt[n-1] += strings.Repeat("x", grow)
			continue
		}
		txt.Txt = append(txt.Txt, "") // a new string costs its length byte
	}
	return m
}

// TestSizedReply: the padding helper gives the lengths the wire tests ask for.
func TestSizedReply(t *testing.T) {
	q := cookieQuery("s0.example.org.", "")
	for want := 100; want <= 1200; want += 37 {
		if got := sizedReply(q, want).Len(); got != want {
			t.Fatalf("sizedReply(%d) is %d bytes", want, got)
		}
	}
}

// TestNoCookieUDPSizeWeighsTheCookie: nocookie-udp-size judges the message
// as it goes out, server cookie included. Answers of 380 to 530 bytes, as
// the handler writes them, to a client that sends a cookie: none goes out
// whole over 512 bytes, and every TC reply is at most 512 bytes. The server
// cookie adds 28 bytes, so answers of 485 bytes and more are truncated.
func TestNoCookieUDPSizeWeighsTheCookie(t *testing.T) {
	lim := newLimiter(t, newTestClock(), "nocookie-udp-size", "512")
	srv := startLoopback(t, Middleware(lim, sizedTXT, Options{Cookies: NewCookies([16]byte{7})}))
	whole, cut := 0, 0
	for size := 380; size <= 530; size++ {
		q := txtQuery(testClientCookie)
		q.Question[0].Name = fmt.Sprintf("s%d.example.org.", size)
		r, n := rawExchange(t, "udp", srv.udp, q)
		switch {
		case n > 512:
			t.Fatalf("a %d-byte answer went out as %d bytes (TC %v): over nocookie-udp-size", size, n, r.Truncated)
		case r.Truncated:
			cut++
		default:
			whole++
		}
	}
	if whole == 0 || cut == 0 {
		t.Errorf("%d whole, %d truncated: want both", whole, cut)
	}
}

// TestAllBytesPerSecondWeighsTheCookie: all-bytes-per-second charges the
// bytes that go out, server cookie included. A burst of 60 names of 250
// bytes (278 with the cookie) from one client, under 3,000 bytes a second:
// what reaches the client stays within 3,000 bytes plus one answer.
func TestAllBytesPerSecondWeighsTheCookie(t *testing.T) {
	lim := newLimiter(t, newTestClock(), "all-bytes-per-second", "3000")
	actions := make(chan rrl.Action, 1)
	srv := startLoopback(t, Middleware(lim, sizedTXT, Options{Cookies: NewCookies([16]byte{7}),
		OnDecision: func(d Decision) { actions <- d.Action }}))
	received, largest := 0, 0
	for i := range 60 {
		q := txtQuery(testClientCookie)
		q.Question[0].Name = fmt.Sprintf("s250.n%d.example.org.", i)
		// The decision says whether a reply comes, so that a dropped one
		// is not waited for.
		if _, n := rawExchangeIf(t, srv.udp, q, func() bool { return <-actions == rrl.Send }); n > 0 {
			received += n
			largest = max(largest, n)
		}
	}
	if largest <= 250 {
		t.Fatalf("the largest answer was %d bytes: no cookie went out", largest)
	}
	if received > 3000+largest {
		t.Errorf("%d bytes received in the burst, want at most 3000 plus one answer (%d)", received, largest)
	}
}

// rawExchangeIf sends q over UDP to addr and, when sent reports that a
// reply is coming, reads it (rawExchange): the reply and its length on the
// wire, or nil and 0.
func rawExchangeIf(t *testing.T, addr string, q *dns.Msg, sent func() bool) (*dns.Msg, int) {
	t.Helper()
	return exchangeRaw(t, "udp", addr, q, sent)
}
