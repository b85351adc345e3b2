package rrl

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCoarseClock checks that the built-in clock never runs backwards, that
// it advances, and that it stops ticking when unused and starts again on
// the next read. The waits are bounded and assert no durations.
func TestCoarseClock(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the idle ticker to stop")
	}
	prev := coarse.read()
	for range 100_000 {
		now := coarse.read()
		if now < prev {
			t.Fatalf("clock ran backwards: %d after %d", now, prev)
		}
		prev = now
	}
	start := coarse.read()
	deadline := time.Now().Add(5 * time.Second)
	for coarse.read() == start {
		if time.Now().After(deadline) {
			t.Fatal("the clock did not advance in 5 s")
		}
		time.Sleep(time.Millisecond)
	}

	// With no reader for idleTicks ticks, the ticker exits, and
	// WaitClockIdle sees it exit.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := WaitClockIdle(ctx); err != nil {
		t.Fatalf("the ticker still runs 10 s after the last read: %v", err)
	}
	if s := coarse.state.Load(); s != clockStopped {
		t.Fatalf("WaitClockIdle returned with the ticker in state %d", s)
	}
	stale := coarse.now.Load()
	time.Sleep(5 * time.Millisecond)
	if now := coarse.read(); now <= stale || coarse.state.Load() != clockRead {
		t.Errorf("a read after the ticker stopped returned %d (stale %d) and state %d", now, stale, coarse.state.Load())
	}
	// A context that ends first ends the wait.
	done, stop := context.WithCancel(context.Background())
	stop()
	if err := WaitClockIdle(done); err != context.Canceled {
		t.Errorf("WaitClockIdle with a cancelled context while the ticker runs: %v", err)
	}
}

// TestManualClock checks that a ManualClock reads what it was set to, that
// the RRLs sharing it move together, and that SetClock and SetNowFunc
// replace each other.
func TestManualClock(t *testing.T) {
	start := newTestClock().Now()
	clock := NewManualClock(start)
	if got := clock.Now(); !got.Equal(start) {
		t.Fatalf("Now = %v, want %v", got, start)
	}
	c := testConfig(t, nil, "responses-per-second", "1", "window", "10", "slip-ratio", "0")
	c.SetClock(clock)
	one, two := NewRRL(c), NewRRL(c)
	src, a := udp("192.0.2.1"), answer("www.example.")
	for _, r := range []*RRL{one, two} {
		if got := actions(r, src, a, 3); got != "SDD" {
			t.Fatalf("before the clock moves: %s, want SDD", got)
		}
	}
	later := start.Add(3 * time.Second)
	clock.Set(later)
	if got := clock.Now(); !got.Equal(later) {
		t.Errorf("Now = %v after Set(%v)", got, later)
	}
	for _, r := range []*RRL{one, two} {
		if got := actions(r, src, a, 3); got != "SDD" {
			t.Errorf("3 s later (debt paid off by 1 s a second): %s, want SDD", got)
		}
	}

	called := false
	c.SetNowFunc(func() time.Time { called = true; return start })
	if r := NewRRL(c); r.injected == nil || r.injected.fn == nil || !called {
		t.Error("SetNowFunc after SetClock: the RRL does not read the function")
	}
	called = false
	c.SetClock(clock)
	if r := NewRRL(c); r.injected != &clock.c || called {
		t.Error("SetClock after SetNowFunc: the RRL does not read the ManualClock alone")
	}
	c.SetClock(nil)
	if r := NewRRL(c); r.injected != nil {
		t.Error("SetClock(nil): the RRL does not read the built-in clock")
	}
}

// TestManualClockConcurrent sets a ManualClock, a millisecond at a time,
// while goroutines debit one account: run under -race it checks that a
// reading needs no lock. No step is lost or counted twice: the RRL's time
// ends a second on, and the account sends no more than that second allows
// on top of its first allowance.
func TestManualClockConcurrent(t *testing.T) {
	const goroutines, perG, steps = 8, 2000, 1000
	clock := NewManualClock(newTestClock().Now())
	c := testConfig(t, nil, "responses-per-second", "10", "slip-ratio", "0")
	c.SetClock(clock)
	r := NewRRL(c)
	before := r.now()
	src, a := udp("192.0.2.1"), answer("www.example.")
	var sent atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range perG {
				if act, _, _ := r.Debit(src, a); act == Send {
					sent.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		for range steps {
			clock.Set(clock.Now().Add(time.Millisecond))
		}
	})
	wg.Wait()
	if got := r.now() - before; got != int64(steps*time.Millisecond) {
		t.Errorf("the RRL's time moved %v, want %v", time.Duration(got), steps*time.Millisecond)
	}
	// 1 s of steps earns at most 10 more responses than the first 10.
	if got := sent.Load(); got < 10 || got > 20 {
		t.Errorf("sent %d, want 10 to 20", got)
	}
}

// TestWallAfter checks the step that ManualClock.Set counts against
// time.Time.Sub, at the edges: within a second, across one, backwards,
// beyond maxStep, between the ends of time.Time's range, and with
// monotonic readings, which time.Now gives and wallAfter does not read.
func TestWallAfter(t *testing.T) {
	base := time.Date(2026, 12, 3, 10, 0, 0, 999_999_999, time.UTC)
	mono := time.Now()
	for _, c := range []struct {
		name     string
		from, to time.Time
		want     int64
	}{
		{"same", base, base, 0},
		{"a nanosecond on", base, base.Add(1), 1},
		{"across a second", base, base.Add(1500 * time.Millisecond), int64(1500 * time.Millisecond)},
		{"a nanosecond back", base, base.Add(-1), 0},
		{"a second back, later nanoseconds", base.Add(time.Second), base.Add(2), 0},
		{"a day", base, base.Add(24 * time.Hour), maxStep},
		{"a day and a nanosecond", base, base.Add(24*time.Hour + 1), maxStep},
		{"a year", base, base.AddDate(1, 0, 0), maxStep},
		{"from the zero time", time.Time{}, base, maxStep},
		{"to the zero time", base, time.Time{}, 0},
		{"the ends of time", time.Unix(-1<<62, 0), time.Unix(1<<62, 0), maxStep},
		{"other zones", base.In(time.FixedZone("east", 3600)), base.Add(time.Second).In(time.UTC), int64(time.Second)},
		{"one with a monotonic reading", mono, mono.Add(time.Second).Round(0), int64(time.Second)},
		{"both with monotonic readings", mono, mono.Add(time.Second), int64(time.Second)},
	} {
		if got := wallAfter(c.from, c.to); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
		if want := min(max(0, int64(c.to.Sub(c.from))), maxStep); want != c.want {
			t.Errorf("%s: the test wants %d, time.Time.Sub says %d", c.name, c.want, want)
		}
	}
}
