package rrl

import (
	"sync/atomic"
	"time"
)

// RRL limits responses and requests per client network. It is safe for
// concurrent use, and a Debit takes no lock: it changes an account with one
// compare-and-swap, and counts its outcome in statistics kept in stripes.
type RRL struct {
	cfg      Config
	hash     hashKey
	nets     netMasks
	accounts accounts
	stats    stripes
	injected *injectedClock // nil: the built-in coarse clock
	base     allowances     // as configured
	qps      *qpsScaler     // nil unless qps-scale is set
	observer func(Event)    // nil unless Config.SetObserver

	// checked is set when exempt-clients, requests-per-second,
	// proven-requests-per-second, all-per-second, qps-scale or a
	// protection of prefixes.go is: a UDP response then takes the path
	// with every check rather than going straight to its tuple's account.
	checked bool

	// provenApart is set when proven-requests-per-second is: proven
	// requests then have accounts of their own.
	provenApart bool

	// record is the record of accounts being limited that Limited reads,
	// nil unless Config.SetRecordLimited (see record.go).
	record *limitedRecord

	// watch is the watch of the busiest accounts that Top reads, nil
	// until the first Top (see watch.go); telling is set while a charge
	// has anyone to tell: the record, the observer or the armed watch
	// (see charge.go).
	watch   atomic.Pointer[topWatch]
	telling atomic.Bool
}

// tellsAlways reports whether every charge has someone to tell: the record
// or the observer, set for the RRL's life (see telling).
func (r *RRL) tellsAlways() bool { return r.record != nil || r.observer != nil }

// NewRRL returns an RRL with a copy of cfg. A nil cfg means NewConfig(),
// which limits nothing. In a Config not made by NewConfig, settings out of
// their range take their defaults: a zero window, prefix length or
// max-table-size does, while a zero rate or slip-ratio is in range and
// kept. The table is allocated as it fills, never beyond max-table-size
// accounts.
func NewRRL(cfg *Config) *RRL {
	if cfg == nil {
		cfg = NewConfig()
	}
	r := &RRL{cfg: cfg.sanitized(), hash: newHashKey(), observer: cfg.observer}
	r.accounts, r.stats = newAccounts(r.cfg.maxTableSize), newStripes()
	if r.observer != nil {
		r.accounts.evicted = r.reportEvicted
	}
	r.nets = netMasksOf(r.cfg.ipv4PrefixLength, r.cfg.ipv6PrefixLength)
	if cfg.recordLimited {
		r.record = new(limitedRecord)
	}
	r.telling.Store(r.tellsAlways())
	switch {
	case cfg.manual != nil:
		r.injected = &cfg.manual.c
	case cfg.nowFunc != nil:
		r.injected = &injectedClock{fn: cfg.nowFunc, lastWall: cfg.nowFunc()}
	}
	r.base = allowancesOf(&r.cfg)
	if r.cfg.qpsScale > 0 {
		r.qps = newQPSScaler(r.cfg.qpsScale, r.base)
	}
	r.provenApart = r.cfg.IsSet(LimitProvenRequests.String())
	perNetwork := r.base.limits[LimitRequests].on() || r.base.limits[LimitProvenRequests].on() || r.base.limits[LimitAll].on()
	r.checked = perNetwork || len(r.cfg.exempt) > 0 || r.qps != nil || r.base.prot.on()
	return r
}

func (r *RRL) now() int64 {
	if r.injected != nil {
		return r.injected.read()
	}
	return coarse.read()
}

// GetStats returns the counters accumulated since the last zeroing and, if
// zeroAfter is true, zeroes them. CacheLength is the number of accounts held.
func (r *RRL) GetStats(zeroAfter bool) Stats {
	var sum Stats
	if r == nil {
		return sum
	}
	for i := range r.stats {
		r.stats[i].addTo(&sum, zeroAfter)
	}
	sum.CacheLength = r.accounts.held()
	// Counted once, as reasons; the fields say the same by name.
	sum.AllBytesDrops, sum.TooLarge = sum.RTReasons[RTAllBytesLimit], sum.RTReasons[RTTooLarge]
	sum.RequestPrefixLengths = r.cfg.prefixLengths()
	return sum
}

// allowances returns the allowances as qps-scale scales them now, or as
// configured when it is not set.
func (r *RRL) allowances() *allowances {
	if r.qps != nil {
		return r.qps.scaled.Load()
	}
	return &r.base
}

// limit returns allowance k as qps-scale scales it now.
func (r *RRL) limit(k LimitKind) limit { return r.allowances().limits[k] }

// EndQuietEpisodes ends the limiting episodes of accounts that have been
// out of debt for at least quiet (a request account, which never goes into
// debt: that has held full credit for an interval, as Debit has it, for at
// least quiet), reporting each to the observer as a stop
// (with Account and the limit set, and Network and Tuple zero), and returns
// how many it ended. Debit ends an episode only when the account is asked
// about again, and the victim of a spoofed flood usually is not once the
// flood stops: a server that logs episodes calls this every few seconds
// (BIND reports an account idle for 60 seconds).
//
// Each call sweeps part of the table, at most 32,768 buckets (163,840
// accounts, 2 MB), and the next call resumes where it stopped, so that no
// call takes long and Debits run on meanwhile: a table of the default size
// is swept whole by every call, and in a larger one an episode ends within
// max-table-size/163,840 calls, rounded up. A table that holds few
// accounts is swept quickly, since pages of the table not yet used are
// skipped.
func (r *RRL) EndQuietEpisodes(quiet time.Duration) int {
	if r == nil {
		return 0
	}
	now := r.now()
	var before [LimitKindLast]int64
	al := r.allowances()
	for k := range before {
		before[k] = now - min(int64(max(quiet, 0)), maxClock) - al.episodeSlack(LimitKind(k)) // no overflow
	}
	ended := r.accounts.sweep(now, &before)
	if r.observer != nil {
		for _, g := range ended {
			r.observer(Event{Limit: g.kind.String(), LimitKind: g.kind, Account: g.account})
		}
	}
	return len(ended)
}

// reportEvicted tells the observer that an account in a limiting episode
// lost its place to a new account.
func (r *RRL) reportEvicted(g gone) {
	r.observer(Event{Evicted: true, Limit: g.kind.String(), LimitKind: g.kind, Account: g.account})
}
