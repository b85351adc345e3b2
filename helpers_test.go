package rrl

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// testClock is an injected clock that tests move by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock { return &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *testClock) Set(at time.Time) {
	c.mu.Lock()
	c.now = at
	c.mu.Unlock()
}

// testConfig is a Config from keyword-value pairs, on clock if not nil.
func testConfig(t testing.TB, clock *testClock, kv ...string) *Config {
	t.Helper()
	c := NewConfig()
	for i := 0; i+1 < len(kv); i += 2 {
		if err := c.SetValue(kv[i], kv[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if clock != nil {
		c.SetNowFunc(clock.Now)
	}
	return c
}

// newTestRRL builds an RRL on clock from keyword-value pairs.
func newTestRRL(t testing.TB, clock *testClock, kv ...string) *RRL {
	t.Helper()
	return NewRRL(testConfig(t, clock, kv...))
}

// observedRRL is newTestRRL with an observer that appends the events to
// *events.
func observedRRL(t testing.TB, clock *testClock, events *[]Event, kv ...string) *RRL {
	t.Helper()
	c := testConfig(t, clock, kv...)
	c.SetObserver(func(e Event) { *events = append(*events, e) })
	return NewRRL(c)
}

func udp(s string) *net.UDPAddr {
	return net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(s), 5353))
}
func tcp(s string) *net.TCPAddr {
	return net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(s), 5353))
}

func answer(name string) *ResponseTuple {
	return &ResponseTuple{Class: 1, Type: 1, AllowanceCategory: AllowanceAnswer, SalientName: name}
}

// tally counts the actions of n Debits of the same response.
type tally struct{ send, drop, slip int }

func debitN(r *RRL, src net.Addr, tuple *ResponseTuple, n int) tally {
	var t tally
	for range n {
		t.add(r.Debit(src, tuple))
	}
	return t
}

func (t *tally) add(a Action, _ IPReason, _ RTReason) {
	switch a {
	case Send:
		t.send++
	case Drop:
		t.drop++
	case Slip:
		t.slip++
	}
}

// actions returns the sequence of actions of n Debits, as a string of
// S(end), D(rop) and T (slip: a truncated reply).
func actions(r *RRL, src net.Addr, tuple *ResponseTuple, n int) string {
	b := make([]byte, n)
	for i := range b {
		a, _, _ := r.Debit(src, tuple)
		b[i] = "SDT"[a]
	}
	return string(b)
}
