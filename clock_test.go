package rrl

import (
	"context"
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
