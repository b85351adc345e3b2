package rrl

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	core "github.com/dnsrrl/rrl"
)

// observe is the limiter's observer: it is told once when an account starts
// being limited and once when it stops, and logs each, as BIND does, rather
// than a line per dropped packet. Stop and eviction lines have a budget of
// their own, so that a flood of start lines cannot hide the ends of
// episodes; the ticker (see tick) reports what either budget left out.
func (s *instanceStats) observe(ev core.Event) {
	if ev.Started {
		s.limited.add(1)
	} else {
		s.limited.add(-1)
	}
	var start string
	if ev.Started {
		start = describe(ev, s.reportOnly)
		s.episodes.begin(ev.Account, start)
	} else {
		start = s.episodes.end(ev.Account)
	}
	logs := &s.logs
	if !ev.Started {
		logs = &s.stopLogs
	}
	if suppressed, ok := logs.allow(time.Now()); ok {
		msg := start
		if !ev.Started {
			msg = describeStop(ev, start, s.reportOnly)
		}
		if suppressed > 0 {
			msg += " (" + strconv.FormatInt(suppressed, 10) + " earlier lines suppressed)"
		}
		log.Info(msg)
	}
}

// flushSuppressed logs how many lines either budget left out since the last
// line, so that the count is not held back until the next episode.
func (s *instanceStats) flushSuppressed() {
	if n := s.logs.takeSuppressed(); n > 0 {
		log.Infof("%d lines about accounts starting to be limited suppressed (at most %d per second)", n, maxLogLinesPerSecond)
	}
	if n := s.stopLogs.takeSuppressed(); n > 0 {
		log.Infof("%d lines about accounts no longer limited suppressed (at most %d per second)", n, maxLogLinesPerSecond)
	}
}

// maxEpisodes bounds the start lines kept to describe the matching stop (a
// variable for the tests): a
// spoofed flood can start an episode for each of max-table-size accounts.
var maxEpisodes = 10000

// episodes remembers the start line of each account being limited, by the
// core's Account, so that a stop line can name the network and the tuple even
// when the stop comes from EndQuietEpisodes or an eviction, which do not.
type episodes struct {
	mu sync.Mutex
	m  map[uint64]string
}

func (e *episodes) begin(account uint64, line string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[uint64]string{}
	}
	if len(e.m) < maxEpisodes {
		e.m[account] = line
	}
}

// end forgets the episode and returns its start line, "" if unknown.
func (e *episodes) end(account uint64) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	line, ok := e.m[account]
	if ok {
		delete(e.m, account)
	}
	return line
}

// describeStop renders a stop or eviction. With the start line it names what
// the start named; without it (the table of episodes was full, or the start
// predates a reload) it says what the event itself knows.
func describeStop(ev core.Event, start string, reportOnly bool) string {
	if start == "" {
		return describe(ev, reportOnly)
	}
	what := strings.TrimPrefix(start, "would ")
	what = strings.TrimPrefix(what, "limit ")
	var b strings.Builder
	if reportOnly {
		b.WriteString("would ")
	}
	b.WriteString("stop limiting ")
	b.WriteString(what)
	if ev.Evicted {
		b.WriteString(" (account recycled: its set in the table was full)")
	}
	return b.String()
}

// limitedCount counts accounts being limited; it never goes below zero, in
// case an episode's start predates a reload.
type limitedCount struct{ n atomic.Int64 }

func (c *limitedCount) add(d int64) {
	for {
		old := c.n.Load()
		next := max(old+d, 0)
		if c.n.CompareAndSwap(old, next) {
			return
		}
	}
}

func (c *limitedCount) value() int64 { return c.n.Load() }

// maxLogLinesPerSecond bounds the start and stop lines of one server block:
// a spoofed flood from thousands of networks must not turn into a log flood.
const maxLogLinesPerSecond = 20

// logLimiter allows maxLogLinesPerSecond lines per wall-clock second and
// counts the rest, so that the next line can say how many were left out.
type logLimiter struct {
	mu         sync.Mutex
	second     int64
	lines      int
	suppressed int64
}

// allow reports whether a line may be logged now, with the number of lines
// suppressed since the last one that was.
func (l *logLimiter) allow(now time.Time) (suppressed int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sec := now.Unix(); sec != l.second {
		l.second, l.lines = sec, 0
	}
	if l.lines >= maxLogLinesPerSecond {
		l.suppressed++
		return 0, false
	}
	l.lines++
	suppressed, l.suppressed = l.suppressed, 0
	return suppressed, true
}

// takeSuppressed returns the number of lines suppressed since the last one
// allowed, and forgets it.
func (l *logLimiter) takeSuppressed() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.suppressed
	l.suppressed = 0
	return n
}

// limitNouns names what an allowance limits, in the words of BIND's log.
var limitNouns = map[core.LimitKind]string{
	core.LimitResponses: "responses",
	core.LimitReferrals: "referral responses",
	core.LimitNoData:    "NODATA responses",
	core.LimitNXDomains: "NXDOMAIN responses",
	core.LimitErrors:    "error responses",
	core.LimitAll:       "all responses",
	core.LimitAllBytes:  "response bytes",
}

// describe renders an event as one log line, such as
// "limit NXDOMAIN responses to 192.0.2.0/24 for example.org. (nxdomains-per-second)".
// For a request prefix the network is the prefix that tripped, at the
// length of its pair: "limit requests from 10.1.0.0/18 (ipv4-request-prefixes)";
// for a network over its time budget, "limit stream requests from
// 192.0.2.0/24 (stream-time-per-second)".
func describe(ev core.Event, reportOnly bool) string {
	var b strings.Builder
	if reportOnly {
		b.WriteString("would ")
	}
	if !ev.Started {
		b.WriteString("stop limiting ")
	} else {
		b.WriteString("limit ")
	}
	switch {
	case ev.LimitKind == core.LimitStreamTime: // a budget of time, of requests not over UDP
		b.WriteString("stream requests from ")
	case ev.LimitKind.Request():
		b.WriteString("requests from ")
	default:
		noun, ok := limitNouns[ev.LimitKind]
		if !ok {
			noun = "responses"
		}
		b.WriteString(noun)
		b.WriteString(" to ")
	}
	if ev.Network.IsValid() {
		b.WriteString(ev.Network.String())
	} else {
		// A stop from EndQuietEpisodes or an eviction whose start was not
		// kept: the core no longer knows the network.
		b.WriteString("account " + strconv.FormatUint(ev.Account, 10) + " (network not recorded)")
	}
	if name := ev.Tuple.SalientName; name != "" && !ev.Evicted && tupleNamed(ev) {
		b.WriteString(" for ")
		b.WriteString(name)
		if ev.Tuple.AllowanceCategory == core.AllowanceAnswer {
			b.WriteString(" " + dns.Class(ev.Tuple.Class).String() + " " + dns.Type(ev.Tuple.Type).String())
		}
	}
	if ev.Evicted {
		b.WriteString(" (account recycled: its set in the table was full)")
	} else {
		b.WriteString(" (" + ev.LimitKind.String() + ")")
	}
	return b.String()
}

// tupleNamed reports whether the event's account is per name: the
// response kinds but errors, whose account is the network's alone, as are
// those of all-per-second, all-bytes-per-second and the request limits.
func tupleNamed(ev core.Event) bool { return ev.LimitKind < core.LimitErrors }
