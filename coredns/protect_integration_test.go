package rrl_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	rrl "github.com/dnsrrl/rrl/coredns"
)

// The protections beyond BIND in a real CoreDNS over loopback: request
// limits at several prefix lengths in front of forward to a counting
// upstream, and nocookie-udp-size and all-bytes-per-second in front of
// file with large answers.

// prefixBlock is a server block for req.test. with the given rrl lines
// over forward to up, on a port of its own; it returns the address and
// the port.
func prefixBlock(t *testing.T, up *upstream, lines string) (addr, port string) {
	t.Helper()
	p := freePort(t, "udp")
	startCorefile(t, fmt.Sprintf(`req.test.:%d {
    bind 127.0.0.1
    rrl {
        %s
    }
    forward . %s
}
`, p, lines, up.addr))
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), strconv.Itoa(p)
}

// TestIntegrationSpreadFloodHeldByPrefix: 16 /24s of one /18, each at 8
// queries a second, under requests-per-second 10 per /24, pass every
// /24's limit; the /18's account of ipv4-request-prefixes holds the flood
// to its allowance, and the metric counts the refusals under the /18's
// configured length.
func TestIntegrationSpreadFloodHeldByPrefix(t *testing.T) {
	const rate, perNet, nets, seconds = 20, 8, 16, 2.5
	up := startUpstream(t)
	addr, port := prefixBlock(t, up, "requests-per-second 10\n        ipv4-request-prefixes 32:50 18:"+strconv.Itoa(rate))
	clients := make([]*udpClient, nets)
	for i := range clients {
		clients[i] = newUDPClient(t, "127.64."+strconv.Itoa(i)+".1", addr) // 127.64.0.0/18
	}
	n := int(perNet * nets * seconds)
	elapsed := pace(n, time.Duration(seconds*float64(time.Second)), func(i int) {
		clients[i%nets].send(t, named("s", i, ""))
	})
	replies := 0
	for _, c := range clients {
		replies += len(c.finish(n / nets))
	}
	served := up.count('s')
	limit := allowed(rate, elapsed)
	t.Logf("%d queries from %d /24s in %v: upstream saw %d, clients got %d replies", n, nets, elapsed, served, replies)
	if served < rate || served > limit {
		t.Errorf("upstream saw %d of the spread flood's %d queries, want %d (a second's credit) to %d", served, n, rate, limit)
	}
	if replies > served {
		t.Errorf("%d replies for %d queries served: a refused UDP query must get nothing", replies, served)
	}
	key := "family=ipv4,prefix_length=18,server=dns://127.0.0.1:" + port + ",zone=req.test."
	if got := gathered(t, "coredns_rrl_request_prefix_exceeded_total")[key]; int(got) != n-served {
		t.Errorf("request_prefix_exceeded_total{%s} = %v, want the %d refused", key, got, n-served)
	}
}

// TestIntegrationHeavyHostHeldToItsAddress: one address asking at four
// times its /32's allowance is held to it, while a neighbour in its /24,
// whose account has room, is served in full.
func TestIntegrationHeavyHostHeldToItsAddress(t *testing.T) {
	const rate, seconds = 5, 2.0
	up := startUpstream(t)
	addr, _ := prefixBlock(t, up, "ipv4-request-prefixes 32:"+strconv.Itoa(rate)+" 24:100")
	heavy := newUDPClient(t, "127.65.0.1", addr)
	neighbour := newUDPClient(t, "127.65.0.2", addr)
	n := int(4 * rate * seconds)
	neighbourSent := 0
	elapsed := pace(n, time.Duration(seconds*float64(time.Second)), func(i int) {
		heavy.send(t, named("h", i, ""))
		if i%5 == 0 {
			neighbour.send(t, named("o", neighbourSent, ""))
			neighbourSent++
		}
	})
	got := heavy.finish(n)
	other := neighbour.finish(neighbourSent)
	served, limit := up.count('h'), allowed(rate, elapsed)
	t.Logf("heavy host: %d queries in %v, upstream saw %d, %d replies; neighbour %d of %d", n, elapsed, served, len(got), len(other), neighbourSent)
	if served < rate || served > limit || len(got) > served {
		t.Errorf("heavy host: upstream saw %d of %d, %d replies; want %d to %d", served, n, len(got), rate, limit)
	}
	if len(other) != neighbourSent || up.count('o') != neighbourSent {
		t.Errorf("neighbour in the same /24: %d replies of %d, upstream saw %d; want all", len(other), neighbourSent, up.count('o'))
	}
}

// largeZones are the zones of the nocookie-udp-size and
// all-bytes-per-second tests: txt.big.test. has a TXT answer of about
// 1,000 bytes, and each of n0 to n59.bytes.test. one of about 300.
func largeZones(t *testing.T) (big, bytes string) {
	t.Helper()
	dir := t.TempDir()
	s240 := `"` + strings.Repeat("x", 240) + `"`
	zone := func(origin, records string) string {
		return fmt.Sprintf("$ORIGIN %[1]s\n@ 3600 IN SOA ns1.%[1]s hostmaster.%[1]s 1 7200 3600 1209600 300\n@ 3600 IN NS ns1.%[1]s\nns1 3600 IN A 127.0.0.1\n%[2]s", origin, records)
	}
	var names strings.Builder
	for i := range 60 {
		fmt.Fprintf(&names, "n%d 3600 IN TXT %s\n", i, s240)
	}
	big, bytes = filepath.Join(dir, "db.big.test"), filepath.Join(dir, "db.bytes.test")
	for f, text := range map[string]string{
		big:   zone("big.test.", "txt 3600 IN TXT "+strings.Repeat(s240+" ", 4)+"\n"),
		bytes: zone("bytes.test.", names.String()),
	} {
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return big, bytes
}

const bytesBudget = 3000 // all-bytes-per-second of the test

// largeServer starts a CoreDNS with a block per protection and returns
// its address and port.
func largeServer(t *testing.T) (addr, port string) {
	t.Helper()
	big, bytes := largeZones(t)
	p := freePort(t, "udp")
	startCorefile(t, fmt.Sprintf(`big.test.:%[1]d {
    bind 127.0.0.1
    rrl {
        nocookie-udp-size 512
        cookie-secret 00112233445566778899aabbccddeeff
    }
    file %[2]s big.test.
}
bytes.test.:%[1]d {
    bind 127.0.0.1
    rrl {
        all-bytes-per-second %[4]d
        cookie-secret 00112233445566778899aabbccddeeff
    }
    file %[3]s bytes.test.
}
`, p, big, bytes, bytesBudget))
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), strconv.Itoa(p)
}

// exchangeUDP sends m from src over UDP and returns the reply and its
// length on the wire.
func exchangeUDP(t *testing.T, src, addr string, m *dns.Msg) (*dns.Msg, int) {
	t.Helper()
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second, UDPSize: 4096,
		Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}}}
	conn, err := c.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.UDPSize = 4096
	conn.SetDeadline(time.Now().Add(2 * time.Second)) // a reply that never comes fails the test, never hangs it
	if err := conn.WriteMsg(m); err != nil {
		t.Fatal(err)
	}
	b, err := conn.ReadMsgHeader(nil)
	if err != nil {
		t.Fatalf("no reply from %s: %v", addr, err)
	}
	r := new(dns.Msg)
	if err := r.Unpack(b); err != nil {
		t.Fatal(err)
	}
	return r, len(b)
}

func txtQuery(name string, cookie string) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeTXT)
	m.SetEdns0(1232, false)
	if cookie != "" {
		m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: cookie})
	}
	return m
}

// TestIntegrationNoCookieUDPSize: nocookie-udp-size 512 turns a 1,000-byte
// answer into a TC reply of at most 512 bytes for a UDP client without a
// valid server cookie, with or without a client cookie (the TC reply then
// carries a server cookie, and is never BADCOOKIE); the client's retry
// with that cookie, and TCP, get the whole answer.
func TestIntegrationNoCookieUDPSize(t *testing.T) {
	addr, port := largeServer(t)
	const src, name, client = "127.66.0.1", "txt.big.test.", "a1b2c3d4e5f60718"
	truncated := "server=dns://127.0.0.1:" + port + ",zone=big.test."
	before := gathered(t, "coredns_rrl_nocookie_truncated_total")[truncated]

	m, n := exchangeUDP(t, src, addr, txtQuery(name, ""))
	if !m.Truncated || len(m.Answer) != 0 || n > 512 || rrl.CookieOf(m) != "" {
		t.Errorf("no cookie: %d bytes, TC %v, %d answers, cookie %q; want a TC reply of at most 512 bytes", n, m.Truncated, len(m.Answer), rrl.CookieOf(m))
	}
	m, n = exchangeUDP(t, src, addr, txtQuery(name, client))
	full := rrl.CookieOf(m)
	if !m.Truncated || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || n > 512 {
		t.Errorf("client cookie: %d bytes, TC %v, rcode %s, %d answers; want a TC reply of at most 512 bytes, NOERROR", n, m.Truncated, dns.RcodeToString[m.Rcode], len(m.Answer))
	}
	if len(full) != 48 || !strings.HasPrefix(full, client) {
		t.Fatalf("the TC reply's cookie is %q, want the client cookie and a server cookie", full)
	}
	if got := gathered(t, "coredns_rrl_nocookie_truncated_total")[truncated] - before; got != 2 {
		t.Errorf("nocookie_truncated_total{%s} +%v, want +2", truncated, got)
	}

	m, n = exchangeUDP(t, src, addr, txtQuery(name, full))
	if m.Truncated || len(m.Answer) != 1 || n < 1000 {
		t.Errorf("valid server cookie: %d bytes, TC %v, %d answers; want the whole answer", n, m.Truncated, len(m.Answer))
	}
	c := &dns.Client{Net: "tcp", Timeout: 2 * time.Second,
		Dialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}}
	m, _, err := c.Exchange(txtQuery(name, ""), addr)
	if err != nil || m.Truncated || len(m.Answer) != 1 || m.Len() < 1000 {
		t.Errorf("TCP: %v %v; want the whole answer", m, err)
	}
}

// TestIntegrationAllBytesPerSecond: a burst over 60 names of 300-byte
// answers from one network gets the bytes of all-bytes-per-second, plus
// the answer that went into debt (and what accrues while the burst lasts);
// the rest are dropped and counted.
func TestIntegrationAllBytesPerSecond(t *testing.T) {
	addr, port := largeServer(t)
	queries := make([]*dns.Msg, 60)
	for i := range queries {
		queries[i] = txtQuery("n"+strconv.Itoa(i)+".bytes.test.", "")
	}
	b := burstBytes(t, "127.67.0.1", addr, queries, func(m *dns.Msg) bool { return len(m.Answer) == 1 })
	t.Logf("60 names: %d answers, %d bytes (answers of %d bytes) in %v", b.got, b.bytes, b.largest, b.elapsed)
	if limit := b.limit(); b.got == 0 || b.largest < 250 || b.bytes > limit || b.bytes < bytesBudget-b.largest {
		t.Errorf("60 names of about 300 bytes: %d answers, %d bytes; want %d to %d bytes", b.got, b.bytes, bytesBudget-b.largest, limit)
	}
	key := "server=dns://127.0.0.1:" + port + ",zone=bytes.test."
	if d := gathered(t, "coredns_rrl_all_bytes_exceeded_total")[key]; int(d) != 60-b.got {
		t.Errorf("all_bytes_exceeded_total{%s} = %v, want the %d dropped", key, d, 60-b.got)
	}
}

// byteBurst is what a burst of UDP queries from one source got back.
type byteBurst struct {
	got, bytes, largest int           // replies, their bytes on the wire, the longest
	elapsed             time.Duration // from the first query to the last reply
}

// limit is what all-bytes-per-second lets through in the burst: the
// budget, what accrues while it lasts, and the answer that went into debt.
func (b byteBurst) limit() int {
	return bytesBudget + int(bytesBudget*b.elapsed.Seconds()) + b.largest
}

// burstBytes sends queries (given ids 1 to n) at once from src to addr
// and counts the replies until all came or none came for half a second;
// each must pass ok.
func burstBytes(t *testing.T, src, addr string, queries []*dns.Msg, ok func(*dns.Msg) bool) byteBurst {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(src)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dst, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i, m := range queries {
		m.Id = uint16(i + 1)
		b, _ := m.Pack()
		if _, err := conn.WriteToUDP(b, dst); err != nil {
			t.Fatal(err)
		}
	}
	var r byteBurst
	var last time.Time
	buf := make([]byte, 4096)
	for r.got < len(queries) {
		conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond)) // bounds the wait; nothing is asserted on time
		n, _, err := conn.ReadFromUDP(buf)
		if err != nil {
			break
		}
		m := new(dns.Msg)
		if m.Unpack(buf[:n]) != nil || !ok(m) {
			t.Fatalf("reply %v: not one the burst may get", m)
		}
		r.got, r.bytes, r.largest, last = r.got+1, r.bytes+n, max(r.largest, n), time.Now()
	}
	r.elapsed = last.Sub(start)
	return r
}
