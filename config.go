package rrl

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Config holds the settings of an RRL. Create it with NewConfig, change it
// with SetValue, and hand it to NewRRL, which takes a copy: later changes to
// the Config do not reach an RRL already made.
//
// The keywords are BIND's rate-limit options, with the same meanings and units:
//
//	keyword                     value                                default
//	window                      seconds, 1 to 3600                   15
//	ipv4-prefix-length          bits, 1 to 32                        24
//	ipv6-prefix-length          bits, 1 to 128                       56
//	responses-per-second        responses/s, 0 (off) or 0.01 to 1e6  0
//	referrals-per-second        responses/s, 0 (off) or 0.01 to 1e6  responses-per-second
//	nodata-per-second           responses/s, 0 (off) or 0.01 to 1e6  responses-per-second
//	nxdomains-per-second        responses/s, 0 (off) or 0.01 to 1e6  responses-per-second
//	errors-per-second           responses/s, 0 (off) or 0.01 to 1e6  responses-per-second
//	all-per-second              responses/s, 0 (off) or 0.01 to 1e6  0
//	requests-per-second         requests/s, 0 (off) or 0.01 to 1e6   0
//	proven-requests-per-second  requests/s, 0 (off) or 0.01 to 1e6   requests-per-second
//	slip-ratio                  0 (never slip) to 10                 2
//	qps-scale                   requests/s, 0 (off) or 1 to 1e6      0
//	max-table-size              accounts, 1 to 268435456             100000
//	exempt-clients              addresses or CIDR prefixes           none
//	ipv4-request-prefixes       LENGTH:ALLOWANCE pairs, 1 to 4       none
//	ipv6-request-prefixes       LENGTH:ALLOWANCE pairs, 1 to 4       none
//	all-bytes-per-second        bytes/s, 0 (off) or 512 to 1e9       0
//	nocookie-udp-size           bytes, 0 (off) or 128 to 65535       0
//	stream-time-per-second      duration, 0 (off) or 100µs to 1h     0
//	stream-time-instant         duration, 0 or 100µs to 1h           stream-time-per-second
//
// Values are strict: rates are plain decimal numbers (digits with an
// optional fraction, such as 10 or 0.5), durations numbers with units
// (100ms, 1.5s; 0 alone for off), the others whole numbers (digits
// only); signs, exponents, spaces and hexadecimal are refused.
// exempt-clients takes addresses and prefixes separated by spaces or commas;
// each SetValue call adds to the list.
//
// requests-per-second limits the requests of a client network, whatever
// their transport. proven-requests-per-second, once set, gives requests
// whose source address is proven (over TCP and the other connection
// transports, or over UDP with a valid server cookie) an account and an
// allowance of their own, so that an operator can let honest resolvers
// that use cookies ask more than unproven UDP sources, and so that spoofed
// UDP requests cannot spend the allowance of the network's real clients.
// Until it is set, proven requests share the network's request account.
// Set to 0, it lifts the request limit from proven sources, even when
// requests-per-second is set.
//
// The last six keywords go beyond BIND. ipv4-request-prefixes and
// ipv6-request-prefixes each take up to MaxRequestPrefixes pairs
// LENGTH:ALLOWANCE, separated by spaces or commas ("32:5 20:400
// 18:1200"): distinct prefix lengths (1 to 32, 1 to 128) and allowances
// in requests per second, in the grammar and range of
// requests-per-second (0 turns a pair off). Each pair gives every prefix
// of that length an account of its own beside the network's
// requests-per-second account, so that a flood spread over many networks
// is held by a wider prefix and one heavy host by a narrower one. A
// second SetValue replaces the list; an empty value clears it. They
// limit unproven requests only (see RRL.DebitRequest).
//
// all-bytes-per-second is all-per-second counted in bytes: a budget of
// UDP response bytes per second to one client network, over every name
// and category (see ResponseTuple.Size). nocookie-udp-size is BIND's
// option of that name: a UDP response longer than it, to a request
// without a valid server cookie, is not sent; Debit answers Slip with
// RTTooLarge so that a truncated reply goes instead.
//
// stream-time-per-second is a budget of handling time per client network
// for requests that are not over UDP (TCP, TLS, HTTPS, QUIC, gRPC: their
// source is proven, so the threat is load, not reflection): each such
// request is charged, after its work, with the wall time it took (see
// RRL.DebitStreamTime), and while its network has spent more than its
// budget its stream requests are refused before any work (DebitRequest,
// with LimitStreamTime). stream-time-instant is the burst: how much time
// a network that has been quiet may spend at once, by default one
// second's budget (at most 100 seconds' budget: more counts as that).
// qps-scale scales the budget; exempt-clients are never charged.
type Config struct {
	window           int64 // nanoseconds
	ipv4PrefixLength int
	ipv6PrefixLength int
	rates            [LimitKindLast]float64 // per second; 0 is off
	set              uint32                 // keywords set by SetValue, a bit each (keywordBits)
	slipRatio        int
	qpsScale         float64
	maxTableSize     int
	exempt           []netip.Prefix

	prefixes        [2][MaxRequestPrefixes]RequestPrefix // by family: 0 IPv4, 1 IPv6
	prefixCount     [2]int
	noCookieUDPSize int // bytes; 0 is off

	streamTime    time.Duration // stream-time-per-second, a second; 0 is off
	streamInstant time.Duration // stream-time-instant; 0 is the default, streamTime

	nowFunc  func() time.Time
	manual   *ManualClock // SetClock; if set, nowFunc is nil
	observer func(Event)

	recordLimited bool // SetRecordLimited (record.go)
}

// NewConfig returns a Config with every default set. A default Config limits
// nothing: set responses-per-second (or another allowance) to turn RRL on.
func NewConfig() *Config {
	return &Config{
		window:           15 * int64(time.Second),
		ipv4PrefixLength: 24,
		ipv6PrefixLength: 56,
		slipRatio:        2,
		maxTableSize:     100000,
	}
}

// rateKeywords maps the keyword of each allowance to its kind.
var rateKeywords = func() map[string]LimitKind {
	m := map[string]LimitKind{}
	for k := range LimitKindLast {
		if k.plainRate() {
			m[k.String()] = k
		}
	}
	return m
}()

// SetValue sets the setting named by keyword (see Config for the list) from
// its text form. It returns an error, naming the keyword, the value and what
// is allowed, for an unknown keyword or a value that is unparsable, out of
// range, negative, NaN or infinite; the Config is then unchanged.
func (c *Config) SetValue(keyword, value string) error {
	if err := c.setValue(keyword, value); err != nil {
		return err
	}
	c.set |= keywordBits[keyword]
	return nil
}

// IsSet reports whether SetValue has set keyword on c. A setting not set
// has its default, which for the per-category rates is
// responses-per-second and for proven-requests-per-second is
// requests-per-second (Value returns it). To copy a Config's settings,
// copy those set: setting proven-requests-per-second, even to the value
// Value reads back, gives proven sources accounts of their own.
func (c *Config) IsSet(keyword string) bool { return c.set&keywordBits[keyword] != 0 }

// keywordBits gives each keyword a bit of Config.set.
var keywordBits = func() map[string]uint32 {
	m := map[string]uint32{}
	for i, k := range Keywords() {
		m[k] = 1 << i
	}
	return m
}()

func (c *Config) setValue(keyword, value string) error {
	if r, ok := rateKeywords[keyword]; ok {
		f, err := parseRate(keyword, value, minRate, maxRate)
		if err != nil {
			return err
		}
		c.rates[r] = f
		return nil
	}
	switch keyword {
	case "window":
		n, err := parseInt(keyword, value, 1, 3600)
		if err != nil {
			return err
		}
		c.window = int64(n) * int64(time.Second)
	case "ipv4-prefix-length":
		n, err := parseInt(keyword, value, 1, 32)
		if err != nil {
			return err
		}
		c.ipv4PrefixLength = n
	case "ipv6-prefix-length":
		n, err := parseInt(keyword, value, 1, 128)
		if err != nil {
			return err
		}
		c.ipv6PrefixLength = n
	case "slip-ratio":
		n, err := parseInt(keyword, value, 0, 10)
		if err != nil {
			return err
		}
		c.slipRatio = n
	case "max-table-size":
		n, err := parseInt(keyword, value, 1, maxTableSize)
		if err != nil {
			return err
		}
		c.maxTableSize = n
	case "qps-scale":
		f, err := parseRate(keyword, value, 1, maxRate)
		if err != nil {
			return fmt.Errorf("rrl: %s %q: want a plain decimal number (such as 5 or 0.5), 0 (off) or from 1 to %d", keyword, value, int(maxRate))
		}
		c.qpsScale = f
	case "exempt-clients":
		prefixes, err := parsePrefixes(keyword, value)
		if err != nil {
			return err
		}
		c.exempt = append(c.exempt, prefixes...)
	case "ipv4-request-prefixes", "ipv6-request-prefixes":
		fam := familyOf(keyword == "ipv6-request-prefixes")
		list, n, err := parseRequestPrefixes(keyword, value, 32+96*fam)
		if err != nil {
			return err
		}
		c.prefixes[fam], c.prefixCount[fam] = list, n
	case "all-bytes-per-second":
		f, err := parseRate(keyword, value, minBytesRate, maxBytesRate)
		if err != nil {
			return err
		}
		c.rates[LimitAllBytes] = f
	case "stream-time-per-second":
		d, err := parseDuration(keyword, value, minStreamTime, maxStreamTime)
		if err != nil {
			return err
		}
		c.streamTime = d
	case "stream-time-instant":
		d, err := parseDuration(keyword, value, minStreamTime, maxStreamTime)
		if err != nil {
			return fmt.Errorf("rrl: %s %q: want a duration with units (such as 100ms or 1.5s), 0 (one second's budget, the default) or from %v to %v", keyword, value, minStreamTime, maxStreamTime)
		}
		c.streamInstant = d
	case "nocookie-udp-size":
		n, err := parseInt(keyword, value, 0, 65535)
		if err != nil || (n > 0 && n < minNoCookieUDPSize) {
			return fmt.Errorf("rrl: %s %q: want a whole number (digits only), 0 (off) or from %d to 65535", keyword, value, minNoCookieUDPSize)
		}
		c.noCookieUDPSize = n
	default:
		return fmt.Errorf("rrl: unknown keyword %q (value %q)%s", keyword, value, unknownKeyword(keyword))
	}
	return nil
}

// SetNowFunc replaces the clock with fn, for tests. Debit then reads fn on
// every call, under a lock that all Debits share. The RRL keeps its own
// time monotonic: a step of fn backwards counts as no time, after which time
// runs on at fn's pace; a step forward counts for at most a day; so no step
// locks a client out or overflows anything. fn is read as wall time: a
// monotonic reading, as time.Now gives, is ignored. A clock that the caller steps
// rather than tells is cheaper as a ManualClock (SetClock). SetNowFunc
// replaces a clock given by SetClock; a nil fn restores the built-in clock.
func (c *Config) SetNowFunc(fn func() time.Time) { c.nowFunc, c.manual = fn, nil }

// SetClock replaces the clock with m, which its owner moves (see
// ManualClock): for replays, simulations and tests that set the time
// rather than tell it. It replaces a function given by SetNowFunc; a nil m
// restores the built-in clock.
func (c *Config) SetClock(m *ManualClock) { c.manual, c.nowFunc = m, nil }

// SetObserver registers fn to be told when an account starts being limited
// and when it stops, once per episode (BIND logs these two events). fn is
// called synchronously by Debit, outside any lock; it must be quick and safe
// for concurrent use. A nil fn, the default, costs nothing.
func (c *Config) SetObserver(fn func(Event)) { c.observer = fn }

// sanitized returns a copy of c for an RRL to keep: with its own exempt
// list, and with the defaults in place of settings out of range, as in a
// zero Config that NewConfig did not make.
func (c *Config) sanitized() Config {
	d := NewConfig()
	s := *c
	s.exempt = append([]netip.Prefix(nil), c.exempt...)
	if s.window < int64(time.Second) || s.window > 3600*int64(time.Second) {
		s.window = d.window
	}
	if s.ipv4PrefixLength < 1 || s.ipv4PrefixLength > 32 {
		s.ipv4PrefixLength = d.ipv4PrefixLength
	}
	if s.ipv6PrefixLength < 1 || s.ipv6PrefixLength > 128 {
		s.ipv6PrefixLength = d.ipv6PrefixLength
	}
	if s.slipRatio < 0 || s.slipRatio > 10 {
		s.slipRatio = d.slipRatio
	}
	if s.maxTableSize < 1 || s.maxTableSize > maxTableSize {
		s.maxTableSize = d.maxTableSize
	}
	if s.noCookieUDPSize < minNoCookieUDPSize || s.noCookieUDPSize > 65535 {
		s.noCookieUDPSize = 0
	}
	if s.streamTime < minStreamTime || s.streamTime > maxStreamTime {
		s.streamTime = 0
	}
	if s.streamInstant < minStreamTime || s.streamInstant > maxStreamTime {
		s.streamInstant = 0
	}
	if f := s.rates[LimitAllBytes]; f < minBytesRate || f > maxBytesRate {
		s.rates[LimitAllBytes] = 0
	}
	s.sanitizePrefixes()
	return s
}

// IsActive reports whether the Config limits anything: whether some
// allowance, a request limit, all-per-second, all-bytes-per-second,
// stream-time-per-second or nocookie-udp-size is non-zero. nocookie-udp-size acts alone: a Config
// that sets nothing else is active.
func (c *Config) IsActive() bool {
	for k := range LimitKindLast {
		if c.rate(k) > 0 {
			return true
		}
	}
	return c.noCookieUDPSize > 0 || c.streamTime > 0
}

// rate returns the effective allowance r: the per-category ones fall back to
// responses-per-second when not set, proven-requests-per-second to
// requests-per-second.
func (c *Config) rate(k LimitKind) float64 {
	if k < LimitRequests && !c.IsSet(k.String()) {
		return c.rates[LimitResponses]
	}
	if k == LimitProvenRequests && !c.IsSet(k.String()) {
		return c.rates[LimitRequests]
	}
	if k == LimitIPv4RequestPrefixes || k == LimitIPv6RequestPrefixes {
		return c.slowestPrefix(familyOf(k == LimitIPv6RequestPrefixes))
	}
	return c.rates[k]
}

// Value returns the setting named by keyword in the form SetValue reads,
// so that a caller can read settings and defaults back: the effective
// value, such as responses-per-second for a per-category rate not set, and
// for exempt-clients the prefixes separated by spaces, or "" for none
// (which SetValue refuses: there is nothing to set). IsSet tells a value
// set from a default. It returns an error for an unknown keyword.
func (c *Config) Value(keyword string) (string, error) {
	if r, ok := rateKeywords[keyword]; ok {
		return formatRate(c.rate(r)), nil
	}
	switch keyword {
	case "window":
		return strconv.FormatInt(c.window/int64(time.Second), 10), nil
	case "ipv4-prefix-length":
		return strconv.Itoa(c.ipv4PrefixLength), nil
	case "ipv6-prefix-length":
		return strconv.Itoa(c.ipv6PrefixLength), nil
	case "slip-ratio":
		return strconv.Itoa(c.slipRatio), nil
	case "qps-scale":
		return formatRate(c.qpsScale), nil
	case "max-table-size":
		return strconv.Itoa(c.maxTableSize), nil
	case "exempt-clients":
		s := make([]string, len(c.exempt))
		for i, p := range c.exempt {
			s[i] = p.String()
		}
		return strings.Join(s, " "), nil
	case "ipv4-request-prefixes", "ipv6-request-prefixes":
		return formatRequestPrefixes(c.RequestPrefixes(keyword == "ipv6-request-prefixes")), nil
	case "all-bytes-per-second":
		return formatRate(c.rates[LimitAllBytes]), nil
	case "nocookie-udp-size":
		return strconv.Itoa(c.noCookieUDPSize), nil
	case "stream-time-per-second":
		return formatDuration(c.streamTime), nil
	case "stream-time-instant":
		return formatDuration(c.StreamTimeInstant()), nil
	}
	return "", fmt.Errorf("rrl: unknown keyword %q%s", keyword, unknownKeyword(keyword))
}

// String returns the settings as keyword-value pairs ("window 15;
// ipv4-prefix-length 24; ..."), with the values that Value returns, in the
// order of the table in the Config documentation; exempt-clients and the
// request prefixes only when some are set. For a Config not made by NewConfig, these are the values
// held, some of which NewRRL replaces by defaults.
func (c *Config) String() string {
	var b strings.Builder
	for _, k := range Keywords() {
		v, _ := c.Value(k)
		if v == "" { // exempt-clients or request prefixes, none set
			continue
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(k + " " + v)
	}
	return b.String()
}

// RequestPrefixes returns the pairs of ipv6-request-prefixes (ipv6 true)
// or ipv4-request-prefixes, in the order they were given; nil for none.
func (c *Config) RequestPrefixes(ipv6 bool) []RequestPrefix {
	fam := familyOf(ipv6)
	if c.prefixCount[fam] == 0 {
		return nil
	}
	return append([]RequestPrefix(nil), c.prefixes[fam][:c.prefixCount[fam]]...)
}

// NoCookieUDPSize returns nocookie-udp-size: the longest UDP response, in
// bytes, that goes to a request without a valid server cookie; 0 is off.
func (c *Config) NoCookieUDPSize() int { return c.noCookieUDPSize }

// StreamTimePerSecond returns stream-time-per-second: the wall time a
// second that the stream requests of one client network may take; 0 is
// off.
func (c *Config) StreamTimePerSecond() time.Duration { return c.streamTime }

// StreamTimeInstant returns stream-time-instant, the burst of
// stream-time-per-second: as set, or by default one second's budget.
func (c *Config) StreamTimeInstant() time.Duration {
	if c.streamInstant > 0 {
		return c.streamInstant
	}
	return c.streamTime
}

// AllBytesPerSecond returns all-bytes-per-second, in bytes a second; 0 is off.
func (c *Config) AllBytesPerSecond() float64 { return c.rates[LimitAllBytes] }

// slowestPrefix returns the smallest allowance above 0 among the pairs of
// family fam, or 0 if none is on. The RRL keeps it as the allowance of the
// kind, whose episode slack (see limit) is then the longest of its pairs.
func (c *Config) slowestPrefix(fam int) float64 {
	slowest := 0.0
	for _, p := range c.prefixes[fam][:c.prefixCount[fam]] {
		if p.Rate > 0 && (slowest == 0 || p.Rate < slowest) {
			slowest = p.Rate
		}
	}
	return slowest
}

// sanitizePrefixes drops, from a Config not made by SetValue, the pairs
// out of range. A pair set to 0 (off) is in range: it keeps its place,
// by which Stats.RequestPrefixDrops counts the pairs after it.
func (c *Config) sanitizePrefixes() {
	for fam := range c.prefixes {
		n := 0
		for _, p := range c.prefixes[fam][:min(max(c.prefixCount[fam], 0), MaxRequestPrefixes)] {
			if p.Bits >= 1 && p.Bits <= 32+96*fam && (p.Rate == 0 || p.Rate >= minRate) && p.Rate <= maxRate {
				c.prefixes[fam][n] = p
				n++
			}
		}
		c.prefixCount[fam] = n
	}
}
