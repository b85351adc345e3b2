package rrl

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The protections beyond BIND, in the handler with an injected clock: the
// request prefixes, nocookie-udp-size and all-bytes-per-second.

// txtNext answers every name of example.org. with one TXT record of size
// bytes of text, so that an answer's length is known.
func txtNext(size int) plugin.Handler {
	return plugin.HandlerFunc(func(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		var txt []string
		for n := size; n > 0; n -= 255 {
			txt = append(txt, strings.Repeat("x", min(n, 255)))
		}
		m.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}, Txt: txt}}
		if opt := r.IsEdns0(); opt != nil {
			m.SetEdns0(opt.UDPSize(), false)
		}
		w.WriteMsg(m)
		return dns.RcodeSuccess, nil
	})
}

func txtQuery(name string) *dns.Msg {
	m := query(name, dns.TypeTXT)
	m.SetEdns0(1232, false)
	return m
}

// TestNoCookieUDPSize: a 1,000-byte answer to an unproven UDP client goes
// as a truncated reply of the question alone, with a fresh server cookie
// (and NOERROR, not BADCOOKIE) when the client sent a client cookie; the
// retry with that cookie, and TCP, get the whole answer; an answer that
// fits is sent as it is. Each truncated reply is counted.
func TestNoCookieUDPSize(t *testing.T) {
	h := testHandler(t, "nocookie.example.org {\n nocookie-udp-size 512\n}", txtNext(1000), newClock())
	counted := func() float64 {
		return testutil.ToFloat64(noCookieTruncated.WithLabelValues("", "nocookie.example.org."))
	}
	before := counted()
	const name = "big.nocookie.example.org."

	o, m := ask(t, h, "127.0.1.1", false, txtQuery(name))
	if o != slipped || len(m.Answer) != 0 || len(m.Question) != 1 || m.Len() > 512 || cookieOf(m) != "" {
		t.Fatalf("1,000-byte answer without a cookie: %v %v; want a TC reply of the question, at most 512 bytes, no cookie", o, m)
	}

	const client = "0102030405060708"
	o, m = ask(t, h, "127.0.1.1", false, withCookie(txtQuery(name), client))
	full := cookieOf(m)
	if o != slipped || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || m.Len() > 512 {
		t.Fatalf("with a client cookie: %v %v; want a TC reply, NOERROR, at most 512 bytes", o, m)
	}
	if len(full) != 48 || !strings.HasPrefix(full, client) {
		t.Fatalf("TC reply's cookie %q, want the client cookie and a server cookie", full)
	}
	if got := counted() - before; got != 2 {
		t.Errorf("nocookie_truncated_total +%v, want +2", got)
	}

	o, m = ask(t, h, "127.0.1.1", false, withCookie(txtQuery(name), full))
	if o != sent || len(m.Answer) != 1 || m.Len() < 1000 {
		t.Errorf("with the server cookie: %v %v; want the whole answer", o, m)
	}
	o, m = ask(t, h, "127.0.1.1", true, txtQuery(name))
	if o != sent || len(m.Answer) != 1 || m.Len() < 1000 {
		t.Errorf("over TCP: %v %v; want the whole answer", o, m)
	}
	// Without EDNS the client takes 512 bytes at most: what goes to it
	// is no longer than nocookie-udp-size, so it is not refused.
	o, _ = ask(t, h, "127.0.1.1", false, query(name, dns.TypeTXT))
	if o != sent {
		t.Errorf("without EDNS: %v; want it sent, as the 512 bytes the client takes", o)
	}
	hs := testHandler(t, "nocookie.example.org {\n nocookie-udp-size 512\n}", txtNext(300), newClock())
	if o, m := ask(t, hs, "127.0.1.1", false, txtQuery(name)); o != sent || len(m.Answer) != 1 {
		t.Errorf("a 300-byte answer: %v %v; want it sent", o, m)
	}
	if got := counted() - before; got != 2 {
		t.Errorf("nocookie_truncated_total +%v after answers that fit, want still +2", got)
	}
}

// TestNoCookieUDPSizeCountsTheCookie: the server cookie that the answer
// would carry counts in its length: an answer that fits 512 bytes alone
// but not with the cookie is truncated.
func TestNoCookieUDPSizeCountsTheCookie(t *testing.T) {
	next := txtNext(400)
	h := testHandler(t, "{\n nocookie-udp-size 512\n}", next, newClock())
	w := &capture{ResponseWriter: test.ResponseWriter{RemoteIP: "127.0.1.1"}}
	next.ServeDNS(context.Background(), w, txtQuery("www.example.org."))
	bare := w.msgs[0].Len()
	// a COOKIE option of 8 + 16 bytes: 28 bytes with its code and length
	size := 512 - 28 - bare + 400 + 1
	h.Next = txtNext(size)
	if o, _ := ask(t, h, "127.0.1.1", false, txtQuery("www.example.org.")); o != sent {
		t.Fatalf("an answer of %d bytes without a cookie: %v, want sent", bare-400+size, o)
	}
	if o, m := ask(t, h, "127.0.1.1", false, withCookie(txtQuery("www.example.org."), "0102030405060708")); o != slipped {
		t.Errorf("the same with a client cookie, over 512 bytes with the server cookie: %v %v, want TC", o, m)
	}
}

// TestAllBytesPerSecond: a burst over 60 names of 300-byte answers is held
// to the bytes of all-bytes-per-second, plus the answer that went into
// debt; the rest are dropped, counted as all-bytes drops, and another
// network is not affected.
func TestAllBytesPerSecond(t *testing.T) {
	const budget = 3000
	h := testHandler(t, "bytes.example.org {\n all-bytes-per-second "+strconv.Itoa(budget)+"\n}", txtNext(240), newClock())
	dropsBefore := testutil.ToFloat64(allBytesExceeded.WithLabelValues("", "bytes.example.org."))
	sentBytes, answers := 0, 0
	for i := range 60 {
		o, m := ask(t, h, "127.0.1.1", false, txtQuery("n"+strconv.Itoa(i)+".bytes.example.org."))
		if o == sent {
			sentBytes += m.Len()
			answers++
		} else if o != dropped {
			t.Fatalf("query %d: %v; over all-bytes-per-second a response is dropped", i, o)
		}
	}
	one := txtResponseLen(t, "n1.bytes.example.org.", 240)
	if sentBytes > budget+one || answers < budget/one {
		t.Errorf("60 names of %d bytes: %d answers, %d bytes sent; want %d to %d bytes", one, answers, sentBytes, budget-one, budget+one)
	}
	if d := testutil.ToFloat64(allBytesExceeded.WithLabelValues("", "bytes.example.org.")) - dropsBefore; int(d) != 60-answers {
		t.Errorf("all_bytes_exceeded_total +%v, want the %d drops", d, 60-answers)
	}
	if o, _ := ask(t, h, "127.0.2.1", false, txtQuery("n1.bytes.example.org.")); o != sent {
		t.Errorf("another network: %v, want sent", o)
	}
}

// txtResponseLen is the length of txtNext's answer to txtQuery(name).
func txtResponseLen(t *testing.T, name string, size int) int {
	w := &capture{ResponseWriter: test.ResponseWriter{RemoteIP: "127.0.1.1"}}
	txtNext(size).ServeDNS(context.Background(), w, txtQuery(name))
	return w.msgs[0].Len()
}

// TestRequestPrefixes: a flood spread over the /24s of one /18 is held by
// the /18's account, and the log line and the metric name the prefix that
// tripped, the metric by its configured length only.
func TestRequestPrefixes(t *testing.T) {
	lb := captureLog(t)
	calls := 0
	h := testHandler(t, "prefix.example.org {\n requests-per-second 10\n ipv4-request-prefixes 32:50 18:20\n}", countingZone(&calls), newClock())
	h.stats.addServer("dns://127.0.0.1:5353")
	liveInstances.add(h.stats)
	t.Cleanup(func() { liveInstances.remove(h.stats) })
	got := map[outcome]int{}
	for i := range 16 * 8 {
		ip := "10.1." + strconv.Itoa(i%16) + ".1" // 16 /24s of 10.1.0.0/18
		o, _ := ask(t, h, ip, false, query("n"+strconv.Itoa(i)+".prefix.example.org.", dns.TypeA))
		got[o]++
	}
	if calls != 20 || got[sent] != 20 || got[dropped] != 108 {
		t.Errorf("128 requests over 16 /24s of one /18 allowed 20: next saw %d, %v", calls, got)
	}
	if !strings.Contains(lb.String(), "limit requests from 10.1.0.0/18 (ipv4-request-prefixes)") {
		t.Errorf("no log line naming the /18:\n%s", lb)
	}
	want := `coredns_rrl_request_prefix_exceeded_total{family="ipv4",prefix_length="18",server="",zone="prefix.example.org."} 108
coredns_rrl_request_prefix_exceeded_total{family="ipv4",prefix_length="18",server="dns://127.0.0.1:5353",zone="prefix.example.org."} 108
coredns_rrl_request_prefix_exceeded_total{family="ipv4",prefix_length="32",server="",zone="prefix.example.org."} 0
coredns_rrl_request_prefix_exceeded_total{family="ipv4",prefix_length="32",server="dns://127.0.0.1:5353",zone="prefix.example.org."} 0
`
	if s := zoneSeries(t, "coredns_rrl_request_prefix_exceeded_total", "prefix.example.org."); s != want {
		t.Errorf("request_prefix_exceeded_total:\n%s\nwant:\n%s", s, want)
	}
	refused := testutil.ToFloat64(requestsExceeded.WithLabelValues("", "prefix.example.org.", "unproven"))
	if refused < 108 {
		t.Errorf("requests_exceeded_total{source=unproven} %v, want the 108 refusals among them", refused)
	}
}

// TestHeavyHost: one address is held to its /32 while a neighbour in its
// /24 is served, and an IPv6 host to its /128 while its /64 has room.
func TestHeavyHost(t *testing.T) {
	h := testHandler(t, "{\n ipv4-request-prefixes 32:5 24:100\n ipv6-request-prefixes 128:5 64:100\n}", zoneNext, newClock())
	for _, c := range []struct{ heavy, neighbour, prefix string }{
		{"10.2.0.1", "10.2.0.2", "/32"},
		{"2001:db8::1", "2001:db8::2", "/128"},
	} {
		heavy := tally(t, h, c.heavy, false, 30, func(i int) *dns.Msg { return query("h"+strconv.Itoa(i)+".example.org.", dns.TypeA) })
		other := tally(t, h, c.neighbour, false, 5, func(i int) *dns.Msg { return query("o"+strconv.Itoa(i)+".example.org.", dns.TypeA) })
		if heavy[sent] != 5 || other[sent] != 5 {
			t.Errorf("%s: heavy host %v, neighbour %v; want the heavy host held to its %s allowance of 5, the neighbour served", c.heavy, heavy, other, c.prefix)
		}
	}
	// TCP is proven: the prefixes do not apply.
	if got := tally(t, h, "10.2.0.1", true, 10, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) }); got[sent] != 10 {
		t.Errorf("TCP from the heavy host: %v, want all sent", got)
	}
}

// TestNoCookieUDPSizeReportOnly: in report-only mode the answer too long
// for nocookie-udp-size is sent whole, and counted as the TC reply that
// enforcing would send.
func TestNoCookieUDPSizeReportOnly(t *testing.T) {
	h := testHandler(t, "report.example.org {\n nocookie-udp-size 512\n report-only\n}", txtNext(1000), newClock())
	counted := func() float64 {
		return testutil.ToFloat64(noCookieTruncated.WithLabelValues("", "report.example.org."))
	}
	before := counted()
	o, m := ask(t, h, "127.0.1.1", false, txtQuery("big.report.example.org."))
	if o != sent || len(m.Answer) != 1 {
		t.Errorf("report-only: %v %v; want the whole answer", o, m)
	}
	if got := counted() - before; got != 1 {
		t.Errorf("nocookie_truncated_total +%v in report-only mode, want +1", got)
	}
}
