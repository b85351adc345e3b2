package rrl_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestIntegrationAmplificationLeft measures, in a real CoreDNS over
// loopback UDP, what a spoofed flood still gets out of the server: the
// bytes sent to the victim for each byte of query, under BIND's model and
// with the protections beyond it. It logs the figures the README quotes
// (go test -run TestIntegrationAmplificationLeft -v ./coredns) and checks
// that each protection removes what it is for.
func TestIntegrationAmplificationLeft(t *testing.T) {
	dir := t.TempDir()
	s240 := `"` + strings.Repeat("x", 240) + `"`
	var zone strings.Builder
	zone.WriteString("@ 3600 IN SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ 3600 IN NS ns1\nns1 3600 IN A 127.0.0.1\n")
	zone.WriteString("txt 3600 IN TXT " + strings.Repeat(s240+" ", 4) + "\n")
	for i := range 60 {
		fmt.Fprintf(&zone, "n%d 3600 IN TXT %s\n", i, s240)
	}
	db := filepath.Join(dir, "db")
	if err := os.WriteFile(db, []byte(zone.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	configs := []struct{ zone, rrl string }{
		{"plain.test.", ""},
		{"bind.test.", "responses-per-second 5"},
		{"nocookie.test.", "responses-per-second 5\n        nocookie-udp-size 512"},
		{"bytes.test.", "responses-per-second 5\n        all-bytes-per-second 3000"},
	}
	port := freePort(t, "udp")
	var corefile strings.Builder
	for _, c := range configs {
		fmt.Fprintf(&corefile, "%s:%d {\n    bind 127.0.0.1\n", c.zone, port)
		if c.rrl != "" {
			fmt.Fprintf(&corefile, "    rrl {\n        %s\n        cookie-secret 00112233445566778899aabbccddeeff\n    }\n", c.rrl)
		}
		fmt.Fprintf(&corefile, "    file %s %s\n}\n", db, c.zone)
	}
	startCorefile(t, corefile.String())
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	// One name with a 1,000-byte answer from one spoofed source (the
	// victim's address), for a second: at 4 queries a second, within the
	// response allowance, and at 200.
	oneName := func(zone, victim string, rate int) (in, out int) {
		in, out, _ = flood(t, victim, addr, rate, time.Second, func(int) string { return "txt." + zone })
		return in, out
	}
	// 60 names with 300-byte answers at once: each name has its own
	// response allowance.
	var lastBurst time.Duration // how long the last burst took to be answered
	manyNames := func(zone, victim string) (in, out int) {
		start := time.Now()
		in, out, last := flood(t, victim, addr, 60, 0, func(i int) string { return "n" + strconv.Itoa(i) + "." + zone })
		lastBurst = last.Sub(start)
		return in, out
	}
	type row struct {
		what    string
		in, out int
	}
	var rows []row
	add := func(what string, measure func() (in, out int)) row {
		r := row{what: what}
		r.in, r.out = measure()
		rows = append(rows, r)
		return r
	}
	plain := add("1,000-byte answer, 4 queries/s, no rrl", func() (int, int) { return oneName("plain.test.", "127.69.0.1", 4) })
	bindSlow := add("1,000-byte answer, 4 queries/s, responses-per-second 5", func() (int, int) { return oneName("bind.test.", "127.69.1.1", 4) })
	ncSlow := add("1,000-byte answer, 4 queries/s, and nocookie-udp-size 512", func() (int, int) { return oneName("nocookie.test.", "127.69.2.1", 4) })
	add("1,000-byte answer, 200 queries/s, responses-per-second 5", func() (int, int) { return oneName("bind.test.", "127.69.5.1", 200) })
	ncFast := add("1,000-byte answer, 200 queries/s, and nocookie-udp-size 512", func() (int, int) { return oneName("nocookie.test.", "127.69.6.1", 200) })
	many := add("60 names of 300-byte answers at once, responses-per-second 5", func() (int, int) { return manyNames("bind.test.", "127.69.3.1") })
	manyBytes := add("60 names of 300-byte answers at once, and all-bytes-per-second 3000", func() (int, int) { return manyNames("bytes.test.", "127.69.4.1") })
	for _, r := range rows {
		t.Logf("%-68s %6d bytes in %7d out: %5.2f x", r.what, r.in, r.out, float64(r.out)/float64(r.in))
	}

	if plain.out < 15*plain.in || bindSlow.out < 15*bindSlow.in {
		t.Errorf("within the allowance the 1,000-byte answer goes whole: %v %v; want it amplified over 15 times (the measure is off)", plain, bindSlow)
	}
	for _, r := range []row{ncSlow, ncFast} {
		if r.out > r.in {
			t.Errorf("%s: %d bytes out for %d in; want no amplification (TC replies are the query's size)", r.what, r.out, r.in)
		}
	}
	manyBindOut, manyBytesOut := many.out, manyBytes.out
	if manyBindOut < 60*250 {
		t.Errorf("60 names under responses-per-second 5: %d bytes out; each name has its own allowance, want all 60 answers", manyBindOut)
	}
	// The budget accrues while the burst is served: on a slow machine
	// that is more than nothing.
	if limit := 3000 + int(3000*lastBurst.Seconds()) + 400; manyBytesOut > limit {
		t.Errorf("60 names under all-bytes-per-second 3000: %d bytes out in %v, want at most %d, the budget and one answer", manyBytesOut, lastBurst, limit)
	}
}

// flood sends n TXT queries (EDNS, no cookie) from src to addr, evenly
// over d (at once when d is 0), and returns the bytes of the queries and
// of the replies that came back, and when the last reply came.
func flood(t *testing.T, src, addr string, n int, d time.Duration, name func(i int) string) (in, out int, last time.Time) {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(src)})
	if err != nil {
		t.Fatalf("bind %s: %v", src, err)
	}
	dst, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			k, _, err := conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			mu.Lock()
			out, last = out+k, time.Now()
			mu.Unlock()
		}
	}()
	send := func(i int) {
		m := new(dns.Msg)
		m.SetQuestion(name(i), dns.TypeTXT)
		m.SetEdns0(1232, false)
		m.Id = uint16(i + 1)
		b, _ := m.Pack()
		if _, err := conn.WriteToUDP(b, dst); err != nil {
			t.Error(err)
		}
		in += len(b)
	}
	if d == 0 {
		for i := range n {
			send(i)
		}
	} else {
		pace(n, d, send)
	}
	time.Sleep(300 * time.Millisecond) // lets the last replies arrive; nothing is asserted on time
	conn.Close()
	<-done
	return in, out, last
}
