package miekgrrl

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dnsrrl/rrl"
)

type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// limitedServer serves LimitedHandler of an RRL in which two networks are
// limited: 192.0.2.0/24 deep in debt with few refusals, 198.51.100.0/24
// with many refusals and little debt.
func limitedServer(t *testing.T) (*httptest.Server, time.Time) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := &stepClock{now: start}
	cfg := rrl.NewConfig()
	for k, v := range map[string]string{"responses-per-second": "5", "requests-per-second": "1000"} {
		if err := cfg.SetValue(k, v); err != nil {
			t.Fatal(err)
		}
	}
	cfg.SetNowFunc(clock.Now)
	cfg.SetRecordLimited(true)
	l := rrl.NewRRL(cfg)
	debit := func(src string, name string, n int) {
		a := net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(src), 53))
		for range n {
			l.Debit(a, &rrl.ResponseTuple{Class: 1, Type: 28, AllowanceCategory: rrl.AllowanceAnswer, SalientName: name})
		}
	}
	debit("198.51.100.9", "many.example.org.", 40) // 35 refused
	clock.mu.Lock()
	clock.now = clock.now.Add(6 * time.Second)
	clock.mu.Unlock()
	debit("198.51.100.9", "many.example.org.", 1) // 36 refused, 1.2 s of debt
	debit("192.0.2.1", "deep.example.org.", 20)   // 15 refused, 3 s of debt
	s := httptest.NewServer(LimitedHandler(l))
	t.Cleanup(s.Close)
	return s, start
}

func getLimited(t *testing.T, url string) (int, []LimitedJSON, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Limited []LimitedJSON }
	var text strings.Builder
	if resp.StatusCode != http.StatusOK {
		buf := make([]byte, 512)
		n, _ := resp.Body.Read(buf)
		text.Write(buf[:n])
		return resp.StatusCode, nil, text.String()
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body.Limited, ""
}

func TestLimitedHandler(t *testing.T) {
	s, start := limitedServer(t)
	_, byDebt, _ := getLimited(t, s.URL)
	want := []LimitedJSON{
		{Network: "192.0.2.0/24", Limit: "responses-per-second", Name: "deep.example.org.", Type: "AAAA", Class: "IN",
			Since: start.Add(6 * time.Second), DebtSeconds: 3, Refused: 15},
		{Network: "198.51.100.0/24", Limit: "responses-per-second", Name: "many.example.org.", Type: "AAAA", Class: "IN",
			Since: start, DebtSeconds: 1.2, Refused: 36},
	}
	if len(byDebt) != 2 {
		t.Fatalf("got %+v, want %+v", byDebt, want)
	}
	for i := range want {
		got := byDebt[i]
		got.DebtSeconds = float64(time.Duration(got.DebtSeconds*1e9).Round(time.Millisecond).Milliseconds()) / 1000
		if !got.Since.Equal(want[i].Since) {
			t.Errorf("%d: since %v, want %v", i, got.Since, want[i].Since)
		}
		got.Since = want[i].Since
		if got != want[i] {
			t.Errorf("%d: got %+v\nwant %+v", i, got, want[i])
		}
	}
	_, byRefused, _ := getLimited(t, s.URL+"?order=refused&n=1")
	if len(byRefused) != 1 || byRefused[0].Network != "198.51.100.0/24" {
		t.Errorf("order=refused&n=1: %+v, want 198.51.100.0/24 alone", byRefused)
	}
}

func TestLimitedHandlerRefusesBadQueries(t *testing.T) {
	s, _ := limitedServer(t)
	for query, want := range map[string]string{
		"?n=0":          "n \"0\": want a whole number from 1 to 2048",
		"?n=2049":       "from 1 to 2048",
		"?n=ten":        "n \"ten\"",
		"?order=oldest": "order \"oldest\": want debt or refused",
	} {
		code, _, text := getLimited(t, s.URL+query)
		if code != http.StatusBadRequest || !strings.Contains(text, want) {
			t.Errorf("%s: status %d %q, want 400 with %q", query, code, text, want)
		}
	}
	resp, err := http.Post(s.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: status %d, want 405", resp.StatusCode)
	}
}

func TestLimitedHandlerEmpty(t *testing.T) {
	s := httptest.NewServer(LimitedHandler(rrl.NewRRL(nil)))
	defer s.Close()
	resp, err := http.Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	if string(raw["limited"]) != "[]" {
		t.Errorf("limited = %s, want []", raw["limited"])
	}
}
