package rrl

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

// streamRRL is an RRL on a ManualClock from keyword-value pairs, with the
// record of limited accounts on.
func streamRRL(t testing.TB, kv ...string) (*RRL, *ManualClock) {
	t.Helper()
	c := testConfig(t, nil, kv...)
	m := NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c.SetClock(m)
	c.SetRecordLimited(true)
	return NewRRL(c), m
}

// advance moves m on by d.
func advance(m *ManualClock, d time.Duration) { m.Set(m.Now().Add(d)) }

// streamServe asks DebitRequestAddr about a TCP request from src and, if
// it is let through, charges it with took; it reports whether it was.
func streamServe(r *RRL, src netip.Addr, took time.Duration) bool {
	if act, _ := r.DebitRequestAddr(src, false, false); act == Drop {
		return false
	}
	r.DebitStreamTime(src, took)
	return true
}

// serveAtOnce asks n stream requests from src at one instant, each taking
// took, and returns how many were served.
func serveAtOnce(r *RRL, src netip.Addr, took time.Duration, n int) int {
	served := 0
	for range n {
		if streamServe(r, src, took) {
			served++
		}
	}
	return served
}

var (
	streamSrc       = netip.MustParseAddr("192.0.2.1")
	streamSameNet   = netip.MustParseAddr("192.0.2.77")
	streamNeighbour = netip.MustParseAddr("192.0.3.1")
)

// A network's stream requests spend the budget: a network that keeps
// asking, each request taking 20 ms, is served the burst (one second's
// budget, 100 ms: five requests, and the sixth that finds the account
// just at zero) and then 100 ms of requests a second, five, for as long
// as it asks.
func TestStreamTimeBudget(t *testing.T) {
	r, m := streamRRL(t, "stream-time-per-second", "100ms")
	served := serveAtOnce(r, streamSrc, 20*time.Millisecond, 6)
	if served != 6 {
		t.Fatalf("burst: served %d of 6 requests at once, want 6 (5 in credit, the 6th overshooting)", served)
	}
	if streamServe(r, streamSameNet, 20*time.Millisecond) {
		t.Fatal("a host of the same /24 was served once the network had spent its burst")
	}
	// Now ask every millisecond for 10 seconds.
	served = 0
	var spent time.Duration
	for range 10000 {
		advance(m, time.Millisecond)
		if streamServe(r, streamSrc, 20*time.Millisecond) {
			served++
			spent += 20 * time.Millisecond
		}
	}
	// 10 s of 100 ms a second is 1 s, 50 requests of 20 ms; the account
	// went into the 10 s 120 ms in debt, so the last of it is owed.
	if served < 49 || served > 50 {
		t.Errorf("served %d requests of 20 ms in 10 s at 100ms a second, want 49 or 50 (%v spent)", served, spent)
	}
	// UDP requests are never refused by it.
	if act, ipr := r.DebitRequestAddr(streamSrc, true, false); act != Send {
		t.Errorf("UDP request of a network over its stream budget: %v %v, want Send", act, ipr)
	}
	// Nor is a neighbour network's.
	if !streamServe(r, streamNeighbour, 20*time.Millisecond) {
		t.Error("a neighbour network was refused")
	}
}

// stream-time-instant sets the burst: 500 ms is 25 requests of 20 ms at
// once (and the one that finds the account at zero), and afterwards the
// rate is the budget's.
func TestStreamTimeInstant(t *testing.T) {
	r, m := streamRRL(t, "stream-time-per-second", "100ms", "stream-time-instant", "500ms")
	served := serveAtOnce(r, streamSrc, 20*time.Millisecond, 40)
	if served != 26 {
		t.Errorf("burst of 500ms: served %d requests of 20 ms at once, want 26", served)
	}
	advance(m, time.Second) // earns 100 ms back, five requests' worth; the overshoot is 20 ms
	served = serveAtOnce(r, streamSrc, 20*time.Millisecond, 40)
	if served != 5 {
		t.Errorf("a second after the burst: served %d, want 5", served)
	}
}

// A request that takes more than the budget puts its network in debt,
// refused until it has earned the time back: a 1 s request against 100 ms
// a second with a burst of 100 ms owes 900 ms of budget, 9 seconds.
func TestStreamTimeDebt(t *testing.T) {
	r, m := streamRRL(t, "stream-time-per-second", "100ms")
	if !streamServe(r, streamSrc, time.Second) {
		t.Fatal("the first request was refused")
	}
	advance(m, 8900*time.Millisecond)
	if act, _, why := r.DebitRequestLimit(streamSrc, false, false); act != Drop || why.Limit != LimitStreamTime {
		t.Errorf("8.9 s after a 1 s request: %v %v, want Drop by stream-time-per-second", act, why.Limit)
	}
	advance(m, 100*time.Millisecond)
	if act, _ := r.DebitRequestAddr(streamSrc, false, false); act != Send {
		t.Errorf("9 s after a 1 s request: %v, want Send", act)
	}
	// However long a request, the debt is at most the window (15 s).
	r.DebitStreamTime(streamSrc, 1000*time.Hour)
	advance(m, 14900*time.Millisecond)
	if act, _ := r.DebitRequestAddr(streamSrc, false, false); act != Drop {
		t.Errorf("14.9 s after a 1000 h request: %v, want Drop", act)
	}
	advance(m, 100*time.Millisecond)
	if act, _ := r.DebitRequestAddr(streamSrc, false, false); act != Send {
		t.Errorf("15 s (the window) after a 1000 h request: %v, want Send", act)
	}
}

// A refusal names stream-time-per-second: in DebitRequestLimit, the
// statistics, RefusalNetwork, Limited and the observer's events.
func TestStreamTimeRefusalReported(t *testing.T) {
	var events []Event
	c := testConfig(t, nil, "stream-time-per-second", "100ms")
	m := NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c.SetClock(m)
	c.SetRecordLimited(true)
	c.SetObserver(func(e Event) { events = append(events, e) })
	r := NewRRL(c)
	r.DebitStreamTime(streamSrc, 300*time.Millisecond)
	act, ipr, why := r.DebitRequestLimit(streamSrc, false, false)
	if act != Drop || ipr != IPRateLimit || why != (RequestRefusal{Limit: LimitStreamTime}) {
		t.Fatalf("over budget: %v %v %+v, want Drop IPRateLimit {LimitStreamTime 0}", act, ipr, why)
	}
	if p, ok := r.RefusalNetwork(streamSrc, why); !ok || p != netip.MustParsePrefix("192.0.2.0/24") {
		t.Errorf("RefusalNetwork = %v %v, want 192.0.2.0/24", p, ok)
	}
	st := r.GetStats(false)
	if st.StreamTimeDrops != 1 || st.IPReasons[IPRateLimit] != 1 {
		t.Errorf("stats: StreamTimeDrops %d, IPRateLimit %d, want 1 and 1", st.StreamTimeDrops, st.IPReasons[IPRateLimit])
	}
	if !strings.Contains(st.String(), "StreamTimeDrops 1") {
		t.Errorf("Stats.String() = %q, want StreamTimeDrops 1", st)
	}
	lim := r.Limited(10, ByDebt)
	if len(lim) != 1 || lim[0].LimitKind != LimitStreamTime || lim[0].Refused != 1 ||
		lim[0].Network != netip.MustParsePrefix("192.0.2.0/24") || lim[0].Debt != 2*time.Second {
		t.Errorf("Limited = %+v, want the /24's stream-time-per-second account, 1 refused, 2s in debt", lim)
	}
	if len(events) != 1 || !events[0].Started || events[0].Limit != "stream-time-per-second" || events[0].LimitKind != LimitStreamTime {
		t.Errorf("events = %+v, want one start of stream-time-per-second", events)
	}
	advance(m, 2*time.Second)
	if act, _ := r.DebitRequestAddr(streamSrc, false, false); act != Send {
		t.Errorf("after its debt: %v, want Send", act)
	}
	if len(events) != 2 || events[1].Started {
		t.Errorf("events = %+v, want the episode ended", events)
	}
}

// Exempt clients are never charged nor refused; others of their network
// are.
func TestStreamTimeExempt(t *testing.T) {
	r, _ := streamRRL(t, "stream-time-per-second", "100ms", "exempt-clients", "192.0.2.1")
	for range 100 {
		act, ipr := r.DebitRequestAddr(streamSrc, false, false)
		if act != Send || ipr != IPExempt {
			t.Fatalf("exempt client: %v %v, want Send IPExempt", act, ipr)
		}
		r.DebitStreamTime(streamSrc, time.Second)
	}
	if n := r.GetStats(false).CacheLength; n != 0 {
		t.Errorf("the exempt client's charges made %d accounts, want none", n)
	}
	if !streamServe(r, streamSameNet, time.Second) {
		t.Error("a client of the same network, not exempt, was refused: the exempt one's time was charged")
	}
	if streamServe(r, streamSameNet, time.Second) {
		t.Error("a client not exempt was not charged")
	}
}

// qps-scale scales the budget: with the server over its qps-scale, a
// request costs its network more of its burst.
func TestStreamTimeQPSScale(t *testing.T) {
	r, m := streamRRL(t, "stream-time-per-second", "100ms", "qps-scale", "10")
	udpSrc := netip.MustParseAddr("198.51.100.1")
	for range 40 { // 40 requests in the first second: four times qps-scale
		r.DebitRequestAddr(udpSrc, true, false)
	}
	advance(m, time.Second)
	r.DebitRequestAddr(udpSrc, true, false) // the second turns: the factor is 1/4
	served := serveAtOnce(r, streamSrc, 20*time.Millisecond, 40)
	// Scaled to 25 ms a second, a 20 ms request costs 0.8 s of the
	// account's one second of credit: one in credit, the next overshoots.
	if served != 2 {
		t.Errorf("at a qps-scale factor of 1/4: served %d requests of 20 ms at once, want 2 (5 unscaled)", served)
	}
}

// Off, it costs nothing and changes nothing: a stream request is let
// through and DebitStreamTime charges no account.
func TestStreamTimeOff(t *testing.T) {
	r, _ := streamRRL(t, "responses-per-second", "5")
	if r.StreamTimed() {
		t.Error("StreamTimed with stream-time-per-second off")
	}
	for range 100 {
		if !streamServe(r, streamSrc, time.Hour) {
			t.Fatal("a stream request was refused with stream-time-per-second off")
		}
	}
	if n := r.GetStats(false).CacheLength; n != 0 {
		t.Errorf("%d accounts held, want 0", n)
	}
	var nilRRL *RRL
	nilRRL.DebitStreamTime(streamSrc, time.Second) // no panic
}

func TestStreamTimeValues(t *testing.T) {
	c := NewConfig()
	for _, kw := range []string{"stream-time-per-second", "stream-time-instant"} {
		if v, _ := c.Value(kw); v != "0" {
			t.Errorf("default %s = %q, want 0", kw, v)
		}
	}
	if c.IsActive() {
		t.Error("a default Config is active")
	}
	for _, v := range []string{"0", "100us", "100µs", "5ms", "100ms", "1.5s", "1m30s", "1h"} {
		if err := c.SetValue("stream-time-per-second", v); err != nil {
			t.Errorf("stream-time-per-second %q: %v", v, err)
		}
	}
	if err := c.SetValue("stream-time-per-second", "100ms"); err != nil {
		t.Fatal(err)
	}
	if !c.IsActive() {
		t.Error("stream-time-per-second alone does not make the Config active")
	}
	if v, _ := c.Value("stream-time-instant"); v != "100ms" || c.IsSet("stream-time-instant") {
		t.Errorf("stream-time-instant not set = %q (set %v), want the budget, 100ms", v, c.IsSet("stream-time-instant"))
	}
	if err := c.SetValue("stream-time-instant", "2s"); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Value("stream-time-instant"); v != "2s" || c.StreamTimeInstant() != 2*time.Second || c.StreamTimePerSecond() != 100*time.Millisecond {
		t.Errorf("stream-time-instant = %q, want 2s", v)
	}
	if s := c.String(); !strings.Contains(s, "stream-time-per-second 100ms; stream-time-instant 2s") {
		t.Errorf("String() = %q", s)
	}
	for _, kw := range []string{"stream-time-per-second", "stream-time-instant"} {
		for _, v := range []string{"", "100", "-1s", "+1s", " 1s", "1s ", "50us", "99µs", "1h0m0.001s", "2h", "1e3ms", "1 s", "s", ".5s", "5.s", "1d", "NaN", "0x10ms", "1_000ms"} {
			c2 := NewConfig()
			err := c2.SetValue(kw, v)
			if err == nil {
				t.Errorf("%s %q accepted", kw, v)
				continue
			}
			msg := err.Error()
			for _, want := range []string{kw, strings.TrimSpace(v), "100µs", "1h0m0s"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%s %q: error %q does not name %q", kw, v, msg, want)
				}
			}
			if got, _ := c2.Value(kw); got != "0" {
				t.Errorf("%s %q refused, but the value is now %q", kw, v, got)
			}
		}
	}
}

// A Config not made by SetValue with durations out of range has them off
// (or default), not an account arithmetic out of its range.
func TestStreamTimeSanitized(t *testing.T) {
	c := NewConfig()
	c.streamTime, c.streamInstant = time.Nanosecond, -time.Second
	r := NewRRL(c)
	if r.StreamTimed() {
		t.Error("a stream-time-per-second of 1 ns is on")
	}
	c.streamTime, c.streamInstant = time.Millisecond, time.Hour // 3,600 s of budget: capped at 100 s
	r = NewRRL(c)
	if got := r.base.prot.streamCredit; got != maxStreamCredit {
		t.Errorf("credit of a burst of 3,600 s budgets = %d, want %d", got, maxStreamCredit)
	}
}

// DebitStreamTime allocates nothing once the network's account is held.
func TestStreamTimeAllocs(t *testing.T) {
	r, _ := streamRRL(t, "stream-time-per-second", "100ms")
	r.DebitStreamTime(streamSrc, time.Millisecond)
	if n := testing.AllocsPerRun(1000, func() { r.DebitStreamTime(streamSrc, time.Millisecond) }); n != 0 {
		t.Errorf("DebitStreamTime: %v allocations a call, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() { r.DebitRequestAddr(streamSrc, false, false) }); n != 0 {
		t.Errorf("DebitRequestAddr over TCP: %v allocations a call, want 0", n)
	}
}

func BenchmarkDebitStreamTime(b *testing.B) {
	r := NewRRL(testConfig(b, nil, "stream-time-per-second", "1h"))
	r.DebitStreamTime(streamSrc, time.Millisecond)
	b.ReportAllocs()
	for b.Loop() {
		r.DebitStreamTime(streamSrc, time.Microsecond)
	}
}
