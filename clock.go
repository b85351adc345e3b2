package rrl

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Time inside an RRL is an int64 count of nanoseconds on a monotonic scale.
//
// Reading the system clock costs more than the rest of a Debit, so by default
// Debit reads a process-wide coarse clock instead: one goroutine stores the
// monotonic time every coarseTick, and Debit loads it atomically. The
// goroutine runs only while some RRL is in use: after idleTicks ticks with no
// reader it exits, and the next reader starts it again. Allowances are
// therefore earned in steps of coarseTick (1 ms), which is far below the
// interval of any sensible rate; debits are never lost, so the long-run rate
// is exact.
const (
	coarseTick = time.Millisecond
	idleTicks  = 1000
)

// maxClock bounds internal time (about 146 years) so that adding a window or
// an interval to it can never overflow.
const maxClock = int64(1) << 62

// maxStep bounds one forward step of an injected clock.
const maxStep = int64(24 * time.Hour)

var processStart = time.Now()

// coarseClock is the shared ticking clock. now and state share a cache
// line that only the ticker writes in steady state (readers write state
// once per tick at most), so readers on many cores do not contend.
type coarseClock struct {
	now   atomic.Int64  // nanoseconds since processStart, monotonic
	state atomic.Uint32 // clockStopped, clockRead or clockUnread
	mu    sync.Mutex    // serialises starting and stopping the ticker

	exited chan struct{} // under mu: closed when the ticker last started exits
}

// The ticker's states: stopped; running and read since the last tick;
// running and not read since the last tick.
const (
	clockStopped = iota
	clockRead
	clockUnread
)

var coarse coarseClock

// read returns the coarse time. It is small enough to be inlined; the
// first read after a tick, and a read while the ticker is stopped, go
// through wake.
func (c *coarseClock) read() int64 {
	if c.state.Load() != clockRead {
		return c.wake()
	}
	return c.now.Load()
}

// wake tells the ticker it has a reader, starting it if need be.
func (c *coarseClock) wake() int64 {
	if c.state.CompareAndSwap(clockUnread, clockRead) || c.state.Load() == clockRead {
		return c.now.Load()
	}
	return c.start()
}

func (c *coarseClock) start() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.Load() != clockStopped {
		return c.now.Load()
	}
	now := max(int64(time.Since(processStart)), c.now.Load())
	c.now.Store(now)
	c.state.Store(clockRead)
	c.exited = make(chan struct{})
	go c.tick(c.exited)
	return now
}

// tick advances the clock every coarseTick and stops after idleTicks ticks
// without a reader, closing exited.
func (c *coarseClock) tick(exited chan struct{}) {
	defer close(exited)
	t := time.NewTicker(coarseTick)
	defer t.Stop()
	unused := 0
	for range t.C {
		c.now.Store(int64(time.Since(processStart)))
		if c.state.Swap(clockUnread) == clockRead {
			unused = 0
			continue
		}
		if unused++; unused < idleTicks {
			continue
		}
		c.mu.Lock()
		stopped := c.state.CompareAndSwap(clockUnread, clockStopped)
		c.mu.Unlock()
		if stopped {
			return
		}
		unused = 0
	}
}

// WaitClockIdle waits until the goroutine of the process-wide clock has
// exited, or until ctx is done, and then returns ctx.Err(). The goroutine
// starts with the first Debit of an RRL that uses the built-in clock and
// exits about one second (idleTicks ticks) after the last one; an RRL with
// an injected clock (Config.SetNowFunc) never starts it. Tests that check
// for leaked goroutines call it after their last Debit.
func WaitClockIdle(ctx context.Context) error { return coarse.waitIdle(ctx) }

func (c *coarseClock) waitIdle(ctx context.Context) error {
	for {
		c.mu.Lock()
		exited, stopped := c.exited, c.state.Load() == clockStopped
		c.mu.Unlock()
		if exited == nil {
			return nil // never started
		}
		select {
		case <-exited:
			if stopped {
				return nil
			}
			// It had stopped and restarted; wait for the new one.
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// injectedClock is internal time for a clock that the caller gives: a
// function the RRL calls on every reading (Config.SetNowFunc), or a
// ManualClock that its owner sets. Either way it adds up the forward steps
// of the caller's clock, read as wall time (a monotonic reading, as
// time.Now gives, is ignored), and ignores backward ones, so a clock
// stepped back neither freezes nor rewinds the RRL. A forward step counts
// for at most maxStep, which is longer than any account remembers
// anything, so a clock stepped far ahead (even past the year 2262, where
// int64 nanoseconds end) resets accounts as a long silence would, and
// internal time stays far from overflowing.
type injectedClock struct {
	fn  func() time.Time // nil for a ManualClock, which Set moves
	now atomic.Int64     // internal time, written under mu

	mu       sync.Mutex // orders the steps, so that none counts twice
	lastWall time.Time
}

// read returns internal time: for a ManualClock, one atomic load, small
// enough to be inlined into the debit; for a function, readFn.
func (c *injectedClock) read() int64 {
	if c.fn == nil {
		return c.now.Load()
	}
	return c.readFn()
}

// readFn calls fn under the lock, so that concurrent readings are ordered.
func (c *injectedClock) readFn() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stepTo(c.fn())
	return c.now.Load()
}

// stepTo moves the clock to wall, under the lock: it adds the step from
// the last wall time, by wallAfter, to internal time.
func (c *injectedClock) stepTo(wall time.Time) {
	if d := wallAfter(c.lastWall, wall); d > 0 {
		now := c.now.Load()
		c.now.Store(now + min(d, maxClock-now))
	}
	c.lastWall = wall
}

// wall returns the caller's clock: fn's reading, or the ManualClock's.
func (c *injectedClock) wall() time.Time {
	if c.fn != nil {
		return c.fn()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastWall
}

// A ManualClock is a clock that moves only when its owner sets it, for
// RRLs that run on a time of their own: a replay of captured traffic sets
// it to each message's timestamp, a simulation to its simulated time, a
// test by hand. Config.SetClock gives it to the RRLs made from a Config;
// several RRLs may share one. A Debit reads it with one atomic load, where
// a clock given by Config.SetNowFunc costs a call and a lock on every
// Debit. Like that clock, it counts a step back as no time, after which
// time runs on from there, and a step forward as at most a day. A
// ManualClock is safe for concurrent use; the zero ManualClock reads the
// zero Time.
type ManualClock struct {
	c injectedClock
}

// NewManualClock returns a ManualClock that reads start.
func NewManualClock(start time.Time) *ManualClock {
	m := new(ManualClock)
	m.c.lastWall = start
	return m
}

// Set moves the clock to t, by its wall clock reading: a monotonic one,
// as time.Now gives, is ignored.
func (m *ManualClock) Set(t time.Time) {
	m.c.mu.Lock()
	m.c.stepTo(t)
	m.c.mu.Unlock()
}

// wallAfter returns how far t is after from by their wall clocks, in
// nanoseconds: 0 if t is not after from, and at most maxStep. It is a
// fraction of the work of t.Sub(from), which looks at monotonic readings
// and checks its sum for overflow; a replay sets its clock once a
// message.
func wallAfter(from, t time.Time) int64 {
	fs, ts := from.Unix(), t.Unix()
	switch {
	case ts < fs:
		return 0
	case uint64(ts)-uint64(fs) > uint64(maxStep/int64(time.Second)):
		return maxStep
	}
	return max(0, (ts-fs)*int64(time.Second)+int64(t.Nanosecond()-from.Nanosecond()))
}

// Now returns the time the clock was last set to.
func (m *ManualClock) Now() time.Time { return m.c.wall() }
