package rrl

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"

	core "github.com/dnsrrl/rrl"
)

// A reload builds every server block anew. Were each to build a fresh table,
// every reload would hand every client network a fresh second's allowance
// (a second burst in the middle of a flood) and empty every penalty box. So
// a block whose zones, listeners and rrl settings are those of a running
// block takes over that block's limiter, with its accounts.
//
// A block whose settings changed starts with a fresh table: every account,
// its debt, its slip count and its episode are gone, as at startup, and the
// log says so. Its accounts are not carried over, because what an account
// means (its network's prefix length, its allowance, its window) is what the
// settings say.

// sharedLimiter is a limiter and the running blocks that use it: one block,
// or during a reload the old block and its replacement.
type sharedLimiter struct {
	key     keepKey
	limiter *core.RRL

	// mu guards live and stats, and is held while an event is observed, so
	// that an event counted in one block's stats is handed over with them.
	mu    sync.RWMutex
	live  []*RRL         // started and not stopped, oldest first
	stats *instanceStats // where the limiter's events go: the newest live block's
}

// keepKey says which blocks may share a limiter: the same zones, on the same
// listeners, with the same settings.
type keepKey struct {
	where    string // zones and listeners
	settings string // settingsString
}

// newSharedLimiter builds the limiter of a block whose events go to stats.
func newSharedLimiter(cfg *core.Config, stats *instanceStats) *sharedLimiter {
	s := &sharedLimiter{stats: stats}
	cfg.SetObserver(s.observe)
	s.limiter = core.NewRRL(cfg)
	return s
}

// observe is the limiter's observer: it passes the event to the stats of the
// newest live block, which count the limited accounts and log the episode.
// Events are rare (once per episode start or end), so the lock costs little.
func (s *sharedLimiter) observe(ev core.Event) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.stats.observe(ev)
}

// settingsString is the canonical form of a block's settings: two blocks
// with the same string limit alike. Every setting of the plugin must be in
// it, core keywords and plugin options alike: a setting left out would let
// a reload that changes it keep a limiter built with the old value. The
// cookie secrets go in as a digest, so that the string can never leak them.
func settingsString(cfg *core.Config, opts options) string {
	var b strings.Builder
	for _, k := range core.Keywords() {
		if !cfg.IsSet(k) { // a default is the same on both sides of a reload
			continue
		}
		v, _ := cfg.Value(k)
		b.WriteString(k + " " + v + "; ")
	}
	if opts.reportOnly {
		b.WriteString("report-only; ")
	}
	// status and log-limited need the limiter to keep its record of limited
	// accounts (core.Config.SetRecordLimited); their addresses and periods
	// are not the limiter's business.
	if opts.ops.status != "" || opts.ops.logEvery > 0 {
		b.WriteString("record-limited; ")
	}
	d := sha256.New()
	d.Write(opts.secret[:])
	if opts.previous != nil {
		d.Write(opts.previous[:])
	}
	b.WriteString("cookie-secret " + hex.EncodeToString(d.Sum(nil)))
	return b.String()
}

// keepRegistry holds the limiters of the running blocks, by keepKey. An
// entry goes when the last block that uses it stops, so that it never holds
// more than the running blocks.
type keepRegistry struct {
	mu sync.Mutex
	m  map[keepKey]*sharedLimiter
}

var limiters = &keepRegistry{m: map[keepKey]*sharedLimiter{}}

// carry says what a block did with the accounts of the block it replaces.
type carry int

const (
	carryNone  carry = iota // no running block had its zones
	carryKept               // a running block had its zones, listeners and settings
	carryReset              // a running block had its zones, with other settings or listeners
)

// adopt gives h the limiter of the running block with h's key, if there is
// one, and says what became of the accounts. h's listeners must be set.
func (r *keepRegistry) adopt(h *RRL) carry {
	key := keepKey{where: strings.Join(h.Zones, " ") + " on " + strings.Join(h.listeners, " "), settings: h.settings}
	h.shared.key = key
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.m[key]; s != nil {
		h.shared, h.limiter, h.stats.limiter = s, s.limiter, s.limiter
		return carryKept
	}
	zones := strings.Join(h.Zones, " ") + " on "
	for k := range r.m {
		if strings.HasPrefix(k.where, zones) {
			return carryReset
		}
	}
	return carryNone
}

// join notes that h started: its stats receive the limiter's events from
// now on, with the count of limited accounts and the episodes under way.
func (r *keepRegistry) join(h *RRL) {
	s := h.shared
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[s.key] = s // the newest block's, should two limiters ever have one key
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live = append(s.live, h)
	s.handOver(h.stats)
}

// leave notes that h stopped. If its stats had the limiter's events, the
// newest block still live gets them back (a reload that failed after its
// blocks started stops them, and the old blocks serve on). When no block is
// left, the entry goes. It is safe to call for a block that never joined.
func (r *keepRegistry) leave(h *RRL) {
	s := h.shared
	r.mu.Lock()
	defer r.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, l := range s.live {
		if l == h {
			s.live = append(s.live[:i:i], s.live[i+1:]...)
			break
		}
	}
	if len(s.live) == 0 {
		if r.m[s.key] == s {
			delete(r.m, s.key)
		}
		return
	}
	if s.stats == h.stats {
		s.handOver(s.live[len(s.live)-1].stats)
	}
}

// handOver moves the events, the count of limited accounts and the start
// lines of the episodes under way to stats. s.mu must be held.
func (s *sharedLimiter) handOver(to *instanceStats) {
	from := s.stats
	if from == to {
		return
	}
	to.limited.add(from.limited.value())
	from.limited.add(-from.limited.value())
	from.episodes.moveTo(&to.episodes)
	s.stats = to
}

// moveTo moves the episodes of e to dst, within dst's bound.
func (e *episodes) moveTo(dst *episodes) {
	e.mu.Lock()
	m := e.m
	e.m = nil
	e.mu.Unlock()
	for account, line := range m {
		dst.begin(account, line)
	}
}

// size is the number of limiters held, for the tests.
func (r *keepRegistry) size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}
