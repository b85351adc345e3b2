package main

import (
	"encoding/json"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dnsrrl/rrl/miekgrrl"
	"github.com/miekg/dns"
)

// TestStatus floods the example server over UDP and reads who is limited
// from its -status endpoint with an HTTP client.
func TestStatus(t *testing.T) {
	s, port, _ := startTestServer(t, func(o *options) { o.status = "127.0.0.1:0" })
	c := &dns.Client{Net: "udp", Timeout: 200e6}
	q := new(dns.Msg).SetQuestion("www.example.org.", dns.TypeA)
	for range 6 { // 1 per second allowed, clock stopped: 5 slipped
		c.Exchange(q, "127.0.0.1:"+port)
	}
	resp, err := http.Get("http://" + s.statusAddr() + "/rrl/limited?order=refused")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Limited []miekgrrl.LimitedJSON }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if len(body.Limited) != 1 {
		t.Fatalf("limited = %+v, want one account", body.Limited)
	}
	got := body.Limited[0]
	want := miekgrrl.LimitedJSON{Network: "127.0.0.0/24", Limit: "responses-per-second", Name: "www.example.org.",
		Type: "A", Class: "IN", Since: got.Since, DebtSeconds: got.DebtSeconds, Refused: 5}
	if got != want || got.DebtSeconds <= 0 {
		t.Errorf("limited %+v\nwant    %+v (in debt)", got, want)
	}
}

func TestStatusFlag(t *testing.T) {
	o, err := parseFlags([]string{"-status", "127.0.0.1:8053"})
	if err != nil || o.status != "127.0.0.1:8053" {
		t.Errorf("-status: %q, %v", o.status, err)
	}
	if _, err := start(options{addr: "127.0.0.1:0", rate: "1", status: "127.0.0.1:99999"}); err == nil {
		t.Error("a bad -status address started")
	}
}

// TestStatusBounded: the -status server is miekgrrl.ServeStatus's, whose
// connections are capped and timed out, and listening beyond loopback is
// said in the log; on loopback it is not.
func TestStatusBounded(t *testing.T) {
	var logged strings.Builder
	log.SetOutput(&logged)
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	s, _, _ := startTestServer(t, func(o *options) { o.status = "127.0.0.1:0" })
	if s.status.ReadHeaderTimeout != miekgrrl.DefaultStatusLimits.ReadTimeout || s.status.IdleTimeout != miekgrrl.DefaultStatusLimits.IdleTimeout {
		t.Errorf("status server timeouts %v %v, want ServeStatus's defaults", s.status.ReadHeaderTimeout, s.status.IdleTimeout)
	}
	if strings.Contains(logged.String(), "beyond loopback") {
		t.Errorf("a warning for a loopback listener:\n%s", logged.String())
	}
	startTestServer(t, func(o *options) { o.status = "0.0.0.0:0" })
	if !strings.Contains(logged.String(), "listens beyond loopback") {
		t.Errorf("no warning for -status 0.0.0.0:0:\n%s", logged.String())
	}
}

// TestStatusTop floods the example server over UDP on a clock the test
// moves, and reads the busiest accounts from its -status endpoint's
// /rrl/top with an HTTP client.
func TestStatusTop(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	step := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s, port, _ := startTestServer(t, func(o *options) { o.status = "127.0.0.1:0"; o.now = clock })
	_, wait := s.limiter.Top(1) // armed here, so that the endpoint answers at once on the stopped clock
	step(wait)
	c := &dns.Client{Net: "udp", Timeout: 200e6}
	q := new(dns.Msg).SetQuestion("www.example.org.", dns.TypeA)
	for range 4 { // 1 per second allowed
		c.Exchange(q, "127.0.0.1:"+port)
	}
	step(time.Second)
	resp, err := http.Get("http://" + s.statusAddr() + "/rrl/top?n=3")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Top []miekgrrl.TopJSON }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	want := miekgrrl.TopJSON{Network: "127.0.0.0/24", Limit: "responses-per-second", Name: "www.example.org.",
		Type: "A", Class: "IN", Share: 4, Rate: 4, Limited: true}
	if len(body.Top) != 1 {
		t.Fatalf("top = %+v, want one account", body.Top)
	}
	if got := body.Top[0]; got.DebtSeconds <= 0 || func() bool { got.DebtSeconds = 0; return got != want }() {
		t.Errorf("top %+v\nwant %+v (in debt)", body.Top[0], want)
	}
}
