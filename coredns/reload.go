package rrl

import "sync"

// restartTracker remembers the blocks started while a reload is under way,
// so that if the reload fails they can be stopped: caddy runs no shutdown
// callback of an instance that failed to start.
type restartTracker struct {
	mu    sync.Mutex
	owner any // the configuration being replaced; nil when no reload is under way
	new   []*RRL
}

var restarts restartTracker

// begin notes that the configuration owner is being replaced.
func (r *restartTracker) begin(owner any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.owner != owner {
		r.owner, r.new = owner, nil
	}
}

// started notes a block of configuration gen that started; it is a block of
// the replacement when a reload of another configuration is under way.
func (r *restartTracker) started(gen any, h *RRL) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.owner != nil && r.owner != gen {
		r.new = append(r.new, h)
	}
}

// failed stops the blocks the failed replacement of owner started.
func (r *restartTracker) failed(owner any) {
	r.mu.Lock()
	var stale []*RRL
	if r.owner == owner {
		stale, r.owner, r.new = r.new, nil, nil
	}
	r.mu.Unlock()
	for _, h := range stale {
		h.stop()
	}
}

// done notes that owner has shut down: the reload, if any, worked.
func (r *restartTracker) done(owner any) {
	r.mu.Lock()
	if r.owner == owner {
		r.owner, r.new = nil, nil
	}
	r.mu.Unlock()
}
