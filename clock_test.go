package rrl

import (
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

	// With no reader for idleTicks ticks, the ticker exits.
	deadline = time.Now().Add(10 * time.Second)
	for coarse.state.Load() != clockStopped {
		if time.Now().After(deadline) {
			t.Fatal("the ticker still runs 10 s after the last read")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stale := coarse.now.Load()
	time.Sleep(5 * time.Millisecond)
	if now := coarse.read(); now <= stale || coarse.state.Load() != clockRead {
		t.Errorf("a read after the ticker stopped returned %d (stale %d) and state %d", now, stale, coarse.state.Load())
	}
}
