package miekgrrl

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dnsrrl/rrl"
)

// getTop reads a top document with a real HTTP client.
func getTop(t *testing.T, url string) (int, []TopJSON) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	var doc struct{ Top []TopJSON }
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, doc.Top
}

func TestTopHandler(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := rrl.NewManualClock(start)
	cfg := rrl.NewConfig()
	if err := cfg.SetValue("responses-per-second", "10"); err != nil {
		t.Fatal(err)
	}
	cfg.SetClock(clock)
	l := rrl.NewRRL(cfg)
	_, wait := l.Top(1) // armed here, so that the handler has a whole second to serve at once
	at := start.Add(wait)
	www := &rrl.ResponseTuple{Class: 1, Type: 28, AllowanceCategory: rrl.AllowanceAnswer, SalientName: "www.example.org."}
	for i := range 30 { // 30 in the second: 3 times the allowance
		clock.Set(at.Add(time.Duration(i) * time.Second / 30))
		l.DebitAddr(netip.MustParseAddr("192.0.2.7"), true, www)
		if i%6 == 0 {
			l.DebitAddr(netip.MustParseAddr("2001:db8::1"), true, www) // 5 in the second
		}
	}
	clock.Set(at.Add(time.Second))
	s := httptest.NewServer(TopHandler(l))
	defer s.Close()

	code, top := getTop(t, s.URL+"?n=5")
	want := []TopJSON{
		{Network: "192.0.2.0/24", Limit: "responses-per-second", Name: "www.example.org.", Type: "AAAA", Class: "IN", Share: 3, Rate: 30, Limited: true, DebtSeconds: top[0].DebtSeconds},
		{Network: "2001:db8::/56", Limit: "responses-per-second", Name: "www.example.org.", Type: "AAAA", Class: "IN", Share: 0.5, Rate: 5},
	}
	if code != http.StatusOK || len(top) != 2 || top[0] != want[0] || top[1] != want[1] || top[0].DebtSeconds <= 0 {
		t.Errorf("GET ?n=5: %d %+v\nwant %+v", code, top, want)
	}
	if _, top := getTop(t, s.URL+"?n=1"); len(top) != 1 {
		t.Errorf("GET ?n=1: %d accounts", len(top))
	}
	for _, q := range []string{"?n=0", "?n=4097", "?n=x"} {
		if code, _ := getTop(t, s.URL+q); code != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", q, code)
		}
	}
	resp, err := http.Post(s.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %s, want 405", resp.Status)
	}
}

func TestParseTopQuery(t *testing.T) {
	for q, want := range map[string]int{"": DefaultTopN, "n=1": 1, "n=4096": MaxTopN, "n=0": 0, "n=-1": 0, "n=1e3": 0} {
		v, _ := url.ParseQuery(q)
		n, err := ParseTopQuery(v)
		if n != want || (err != nil) != (want == 0) {
			t.Errorf("ParseTopQuery(%q) = %d, %v; want %d", q, n, err, want)
		}
	}
}

// TestTopHandlerFirstAsk asks on the real clock, with nothing armed: the
// first request waits for a whole second to be counted, and serves the
// network debited meanwhile.
func TestTopHandlerFirstAsk(t *testing.T) {
	cfg := rrl.NewConfig()
	if err := cfg.SetValue("responses-per-second", "5"); err != nil {
		t.Fatal(err)
	}
	l := rrl.NewRRL(cfg)
	s := httptest.NewServer(TopHandler(l))
	defer s.Close()
	var done atomic.Bool
	var flood sync.WaitGroup
	flood.Go(func() { // a flood while the handler waits: bounded by done
		www := &rrl.ResponseTuple{Class: 1, Type: 1, AllowanceCategory: rrl.AllowanceAnswer, SalientName: "www.example.org."}
		for !done.Load() {
			l.DebitAddr(netip.MustParseAddr("192.0.2.7"), true, www)
			time.Sleep(time.Millisecond)
		}
	})
	_, top := getTop(t, s.URL)
	done.Store(true)
	flood.Wait()
	if len(top) != 1 || top[0].Network != "192.0.2.0/24" || top[0].Share <= 1 || !top[0].Limited {
		t.Errorf("first GET: %+v, want the flooded network, over its allowance", top)
	}
}

func TestWaitTopEndsWithItsContext(t *testing.T) {
	l := rrl.NewRRL(nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := WaitTop(ctx, 5, l); err == nil {
		t.Error("WaitTop with an ended context waited for the whole second")
	}
}
