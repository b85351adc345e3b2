package rrl

import "time"

// tickInterval is how often a block ends quiet episodes, and quietPeriod how
// long an account must have been out of debt for its episode to end, as in
// BIND. Variables only so that tests can shorten them.
var (
	tickInterval = 5 * time.Second
	quietPeriod  = 60 * time.Second
)

// start makes the block live: its limiter's events come to its stats (see
// keep.go), its table metrics are reported, and its ticker ends quiet episodes (so that their stop lines are logged and the
// limited_accounts gauge falls back) and reports suppressed log lines.
func (h *RRL) start() {
	h.lifeMu.Lock()
	defer h.lifeMu.Unlock()
	if h.started || h.stopped {
		return
	}
	h.started = true
	limiters.join(h)
	// The counters are made here rather than at setup, so that a
	// configuration that fails to load leaves no series behind.
	for _, l := range h.listeners {
		h.stats.addServer(l)
	}
	liveInstances.add(h.stats)
	if !h.active {
		return
	}
	h.tickStop, h.tickDone = make(chan struct{}), make(chan struct{})
	go h.runTicker(tickInterval, h.tickStop, h.tickDone)
}

// runTicker calls tick every interval until stop is closed, and then
// closes done.
func (h *RRL) runTicker(interval time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			h.tick()
		}
	}
}

// tick is the ticker's work.
func (h *RRL) tick() {
	h.limiter.EndQuietEpisodes(quietPeriod)
	h.stats.flushSuppressed()
}

// stop takes the block out of service: its ticker ends (stop waits for it),
// its limiter goes unless another block has it, its table metrics go, and
// so do its counter series unless another block has them. It is safe to call more than once, and before start.
func (h *RRL) stop() {
	h.lifeMu.Lock()
	defer h.lifeMu.Unlock()
	if h.stopped {
		return
	}
	h.stopped = true
	h.ops.stop()
	h.kernel.close(h)
	if h.tickStop != nil {
		close(h.tickStop)
		<-h.tickDone
	}
	limiters.leave(h)
	liveInstances.remove(h.stats)
	h.stats.release()
}
