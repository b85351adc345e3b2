package rrl

import (
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
