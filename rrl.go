package rrl

import (
	"time"
)

// RRL limits responses and requests per client network. It is safe for
// concurrent use, and a Debit takes no lock: it changes an account with one
// compare-and-swap, and counts its outcome in statistics kept in stripes.
type RRL struct {
	cfg      Config
	hash     hashKey
	nets     netMasks
	table    *bucketTable
	stats    stripes
	injected *injectedClock       // nil: the built-in coarse clock
	limits   [LimitKindLast]limit // interval 0 is off
	qps      *qpsScaler           // nil unless qps-scale is set
	observer func(Event)          // nil unless Config.SetObserver
	prot     protection           // request prefixes, all-bytes-per-second, nocookie-udp-size

	// checked is set when exempt-clients, requests-per-second,
	// proven-requests-per-second, all-per-second or qps-scale is: a UDP
	// response then takes the path with every check rather than going
	// straight to its tuple's account.
	checked bool

	// provenApart is set when proven-requests-per-second is: proven
	// requests then have accounts of their own.
	provenApart bool

	// record is the record of accounts being limited that Limited reads,
	// nil unless Config.SetRecordLimited (see limited.go).
	record *limitedRecord
}

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
	r.table, r.stats = newBucketTable(r.cfg.maxTableSize), newStripes()
	r.nets = netMasksOf(r.cfg.ipv4PrefixLength, r.cfg.ipv6PrefixLength)
	if cfg.recordLimited {
		r.record = new(limitedRecord)
	}
	switch {
	case cfg.manual != nil:
		r.injected = &cfg.manual.c
	case cfg.nowFunc != nil:
		r.injected = &injectedClock{fn: cfg.nowFunc, lastWall: cfg.nowFunc()}
	}
	for i := range r.limits {
		k := LimitKind(i)
		f := r.cfg.rate(k)
		if f <= 0 {
			continue
		}
		interval := int64(float64(time.Second) / f)
		if k.Request() {
			r.limits[k] = requestLimitOf(interval)
		} else {
			r.limits[k] = limitOf(interval, r.cfg.window).withSlip(k, r.cfg.slipRatio)
		}
	}
	if r.cfg.qpsScale > 0 {
		r.qps = newQPSScaler(r.cfg.qpsScale, r.limits, r.cfg.window)
	}
	r.provenApart = r.cfg.IsSet(LimitProvenRequests.String())
	r.checked = r.initProtection() || len(r.cfg.exempt) > 0 || r.limits[LimitRequests].on() || r.limits[LimitProvenRequests].on() ||
		r.limits[LimitAll].on() || r.qps != nil
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
	// Counted once, as reasons; the fields say the same by name.
	sum.AllBytesDrops, sum.TooLarge = sum.RTReasons[RTAllBytesLimit], sum.RTReasons[RTTooLarge]
	sum.RequestPrefixLengths = r.cfg.prefixLengths()
	return sum
}

// limit is an allowance in the units of an account's balance, nanoseconds:
// what one response costs, the most credit an account can hold (one
// second's worth of responses, but at least one response, so that rates
// below 1/s work), and how deep it can sink into debt (window seconds, or
// one response).
//
// The request limits sink into no debt (debt 0): a refused request is not
// charged, so a network that asks faster than its allowance is still
// served its allowance every second (the generic cell rate algorithm). A
// response account sinks into debt, as BIND's do, because its limit is
// the penalty box that keeps a reflection's victim quiet for as long as a
// flood lasts; the request limits are about the server's load, and a
// client that asks too fast should get its share, not be locked out.
//
// slip is slip-ratio for the allowances whose limited responses may slip
// (answers, referrals, NODATA and NXDOMAIN), scaled by qps-scale, and 0
// for the others (errors, which never slip, and the per-network limits):
// an account of such a limit in debt is dropped.
type limit struct {
	interval, credit, debt int64
	slip                   int
}

// limitOf is the limit of a response allowance of one response per
// interval, in an RRL whose window is window.
func limitOf(interval, window int64) limit {
	return limit{interval, max(int64(time.Second), interval), max(window, interval), 0}
}

// withSlip returns l with the slip ratio ratio if k's responses may slip.
func (l limit) withSlip(k LimitKind, ratio int) limit {
	if k < LimitErrors {
		l.slip = ratio
	}
	return l
}

// requestLimitOf is the limit of a request allowance of one request per
// interval: it sinks into no debt.
func requestLimitOf(interval int64) limit {
	return limit{interval, max(int64(time.Second), interval), 0, 0}
}

func (l limit) on() bool { return l.interval > 0 }

// episodeSlack is how long before now an account's tat lies once it is out
// of its limiting episode: 0 for an account that goes into debt (out of
// debt), and for one that never does (a request account, refused rather
// than charged) a whole interval more than full credit, so that a network
// asking too fast is one episode (see balance.limitedAfter).
func (l limit) episodeSlack() int64 {
	if l.debt != 0 {
		return 0
	}
	return l.credit + l.interval
}

// limit returns allowance k, scaled by qps-scale when that is set (see
// qpsScaler.setFactor).
func (r *RRL) limit(k LimitKind) limit {
	if r.qps != nil {
		return r.qps.scaled.Load().limits[k]
	}
	return r.limits[k]
}

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
	for k := range before {
		before[k] = now - min(int64(max(quiet, 0)), maxClock) - r.limits[k].episodeSlack() // no overflow
	}
	ended := r.table.sweep(now, &before)
	if r.observer != nil {
		for _, g := range ended {
			r.observer(Event{Limit: g.kind.String(), LimitKind: g.kind, Account: g.account})
		}
	}
	return len(ended)
}
