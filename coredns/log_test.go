package rrl

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	core "github.com/dnsrrl/rrl"
)

func TestDescribe(t *testing.T) {
	clk := newClock()
	var mu sync.Mutex
	var events []core.Event
	h := testHandler(t, "{\n responses-per-second 1\n}", zoneNext, clk)
	cfg := core.NewConfig()
	cfg.SetValue("nxdomains-per-second", "1")
	cfg.SetNowFunc(clk.now)
	cfg.SetObserver(func(ev core.Event) { mu.Lock(); events = append(events, ev); mu.Unlock() })
	h.limiter = core.NewRRL(cfg)
	tally(t, h, "127.0.1.1", false, 5, func(int) *dns.Msg { return query("nx-a.example.org.", dns.TypeA) })
	clk.advance(time.Minute)
	tally(t, h, "127.0.1.1", false, 1, func(int) *dns.Msg { return query("nx-a.example.org.", dns.TypeA) })
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 {
		t.Fatalf("%d events, want a start and a stop: %v", len(events), events)
	}
	start, stop := describe(events[0], false), describe(events[1], true)
	if start != "limit NXDOMAIN responses to 127.0.1.0/24 for example.org. (nxdomains-per-second)" {
		t.Errorf("start line %q", start)
	}
	if stop != "would stop limiting NXDOMAIN responses to 127.0.1.0/24 for example.org. (nxdomains-per-second)" {
		t.Errorf("stop line %q", stop)
	}
}

func TestLogLimiter(t *testing.T) {
	var l logLimiter
	now := time.Unix(100, 0)
	allowed := 0
	for range 3 * maxLogLinesPerSecond {
		if _, ok := l.allow(now); ok {
			allowed++
		}
	}
	if allowed != maxLogLinesPerSecond {
		t.Errorf("%d lines allowed in one second, want %d", allowed, maxLogLinesPerSecond)
	}
	suppressed, ok := l.allow(now.Add(time.Second))
	if !ok || suppressed != 2*maxLogLinesPerSecond {
		t.Errorf("next second: ok %v suppressed %d, want %d", ok, suppressed, 2*maxLogLinesPerSecond)
	}
}

// TestRequestLimitLogged: a network over requests-per-second, and one of
// proven clients over proven-requests-per-second, are logged once each,
// naming the limit.
func TestRequestLimitLogged(t *testing.T) {
	lb := captureLog(t)
	h := testHandler(t, "{\n requests-per-second 2\n proven-requests-per-second 3\n}", zoneNext, newClock())
	tally(t, h, "127.0.1.1", false, 6, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
	tally(t, h, "127.0.2.1", true, 6, func(int) *dns.Msg { return query("www.example.org.", dns.TypeA) })
	for _, want := range []string{
		"limit requests from 127.0.1.0/24 (requests-per-second)",
		"limit requests from 127.0.2.0/24 (proven-requests-per-second)",
	} {
		if n := strings.Count(lb.String(), want); n != 1 {
			t.Errorf("%q logged %d times, want once:\n%s", want, n, lb)
		}
	}
}
