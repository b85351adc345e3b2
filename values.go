package rrl

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The values of the settings, as SetValue reads them and Value writes
// them: the keywords, the ranges, and the parsers of numbers, rates,
// prefixes and request prefixes, each refusing a value with the keyword,
// the value and what it wants.

// minRate and maxRate bound every per-second keyword but 0 (off), keeping
// the cost of one response between 1 µs and 100 s.
const (
	minRate = 0.01
	maxRate = 1e6
)

// all-bytes-per-second is 0 (off) or from minBytesRate to maxBytesRate:
// at least one response of unknown size (UnknownResponseSize) a second.
// nocookie-udp-size is 0 (off) or at least minNoCookieUDPSize, BIND's floor.
const (
	minBytesRate       = UnknownResponseSize
	maxBytesRate       = 1e9
	minNoCookieUDPSize = 128
)

// stream-time-per-second and stream-time-instant are 0 (off, or for
// stream-time-instant the default: one second's budget) or from
// minStreamTime to maxStreamTime. Below 100 µs a second one request to a
// slow upstream would lock a network out for the whole window; above an
// hour a second no server has the goroutines to spend.
const (
	minStreamTime = 100 * time.Microsecond
	maxStreamTime = time.Hour
)

// maxTableSize bounds max-table-size so that bucket numbers fit in 32 bits
// (Event.Account holds one) with room to spare.
const maxTableSize = 1 << 28

// Keywords returns the keywords SetValue accepts, in the order of the table
// in the Config documentation.
func Keywords() []string {
	return []string{"window", "ipv4-prefix-length", "ipv6-prefix-length",
		"responses-per-second", "referrals-per-second", "nodata-per-second", "nxdomains-per-second", "errors-per-second",
		"all-per-second", "requests-per-second", "proven-requests-per-second", "slip-ratio", "qps-scale", "max-table-size", "exempt-clients",
		"ipv4-request-prefixes", "ipv6-request-prefixes", "all-bytes-per-second", "nocookie-udp-size",
		"stream-time-per-second", "stream-time-instant"}
}

func parseInt(keyword, value string, min, max int) (int, error) {
	n, err := strconv.Atoi(value)
	if err != nil || !digits.MatchString(value) || n < min || n > max {
		return 0, fmt.Errorf("rrl: %s %q: want a whole number (digits only) from %d to %d", keyword, value, min, max)
	}
	return n, nil
}

// parseDuration reads a duration as time.ParseDuration does ("100ms",
// "1.5s", "1m30s"), but strictly: no sign, no spaces, and a unit after
// every number; "0" alone is 0 (off). Other values must lie from lo to hi.
func parseDuration(keyword, value string, lo, hi time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(value)
	if value == "0" {
		return 0, nil
	}
	if err != nil || !plainDuration.MatchString(value) || d < lo || d > hi {
		return 0, fmt.Errorf("rrl: %s %q: want a duration with units (such as 100ms or 1.5s), 0 (off) or from %v to %v", keyword, value, lo, hi)
	}
	return d, nil
}

// formatDuration writes a duration in the form parseDuration reads.
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return d.String()
}

// parseRate reads a rate: a plain decimal number, 0 (off) or from lo to hi.
func parseRate(keyword, value string, lo, hi float64) (float64, error) {
	f, err := readRate(value, lo, hi)
	if err != nil {
		return 0, fmt.Errorf("rrl: %s %q: want a plain decimal number (such as 5 or 0.5), 0 (off) or from %g to %d", keyword, value, lo, int(hi))
	}
	return f, nil
}

// readRate is parseRate without the keyword in its error.
func readRate(value string, lo, hi float64) (float64, error) {
	f, err := strconv.ParseFloat(value, 64)
	if err != nil || !plainDecimal.MatchString(value) || (f > 0 && f < lo) || f > hi {
		return 0, strconv.ErrRange
	}
	return f, nil
}

// The value grammar is strict, so that a typo is refused rather than read
// as something the operator did not mean: whole numbers are digits only,
// and rates digits with an optional fraction. Signs, exponents ("1e3"),
// bare points (".5", "5."), spaces, hexadecimal and underscores are refused.
var (
	digits       = regexp.MustCompile(`^[0-9]+$`)
	plainDecimal = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
	// plainDuration is time.ParseDuration's grammar without its sign.
	plainDuration = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`)
)

// parsePrefixes reads addresses and CIDR prefixes separated by spaces or commas.
// An address stands for itself (a /32 or /128); IPv4-mapped IPv6 forms are
// taken as IPv4, as client addresses are. A prefix with bits set past its
// length ("10.0.0.1/8") is refused: taken as its network it would exempt
// more than it says.
func parsePrefixes(keyword, value string) ([]netip.Prefix, error) {
	fields := strings.FieldsFunc(value, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
	if len(fields) == 0 {
		return nil, fmt.Errorf("rrl: %s %q: want one or more addresses or CIDR prefixes", keyword, value)
	}
	out := make([]netip.Prefix, 0, len(fields))
	for _, f := range fields {
		p, err := parsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("rrl: %s %q: %q is not an address or CIDR prefix", keyword, value, f)
		}
		if p != p.Masked() {
			return nil, fmt.Errorf("rrl: %s %q: %s has bits set past its prefix length; write the network, %s, or the address alone", keyword, value, f, p.Masked())
		}
		out = append(out, p)
	}
	return out, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap().WithZone("")
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// formatRate writes a rate as a plain decimal number.
func formatRate(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// MaxRequestPrefixes is the most LENGTH:ALLOWANCE pairs that
// ipv4-request-prefixes and ipv6-request-prefixes each take.
const MaxRequestPrefixes = 4

// UnknownResponseSize is what all-bytes-per-second charges for a response
// whose ResponseTuple.Size is 0 (unknown): the largest UDP response a
// client without EDNS accepts.
const UnknownResponseSize = 512

// RequestPrefix is one pair of ipv4-request-prefixes or
// ipv6-request-prefixes: every prefix of Bits bits of the source address
// has an account that allows Rate requests per second (0: the pair is
// off).
type RequestPrefix struct {
	Bits int
	Rate float64
}

// familyOf numbers an address family: 0 for IPv4, 1 for IPv6.
func familyOf(ipv6 bool) int {
	if ipv6 {
		return 1
	}
	return 0
}

// parseRequestPrefixes reads LENGTH:ALLOWANCE pairs separated by spaces or
// commas, at most MaxRequestPrefixes of them, with distinct lengths from 1
// to maxBits. An empty value is an empty list.
func parseRequestPrefixes(keyword, value string, maxBits int) (list [MaxRequestPrefixes]RequestPrefix, n int, err error) {
	fields := strings.FieldsFunc(value, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
	bad := func(why string) error {
		return fmt.Errorf("rrl: %s %q: %s; want up to %d pairs LENGTH:ALLOWANCE separated by spaces or commas, "+
			"LENGTH a whole number from 1 to %d, each length once, ALLOWANCE requests per second, "+
			"a plain decimal number, 0 (off) or from %g to %d", keyword, value, why, MaxRequestPrefixes, maxBits, minRate, int(maxRate))
	}
	if len(fields) > MaxRequestPrefixes {
		return list, 0, bad(strconv.Itoa(len(fields)) + " pairs")
	}
	for _, f := range fields {
		length, allowance, ok := strings.Cut(f, ":")
		if !ok {
			return list, 0, bad(strconv.Quote(f) + " is not LENGTH:ALLOWANCE")
		}
		bits, err := strconv.Atoi(length)
		if err != nil || !digits.MatchString(length) || bits < 1 || bits > maxBits {
			return list, 0, bad("length " + strconv.Quote(length) + " is out of range")
		}
		rate, err := readRate(allowance, minRate, maxRate)
		if err != nil {
			return list, 0, bad("allowance " + strconv.Quote(allowance) + " is out of range")
		}
		for _, p := range list[:n] {
			if p.Bits == bits {
				return list, 0, bad("length " + length + " is given twice")
			}
		}
		list[n] = RequestPrefix{Bits: bits, Rate: rate}
		n++
	}
	return list, n, nil
}

// formatRequestPrefixes writes pairs in the form parseRequestPrefixes reads.
func formatRequestPrefixes(list []RequestPrefix) string {
	s := make([]string, len(list))
	for i, p := range list {
		s[i] = strconv.Itoa(p.Bits) + ":" + formatRate(p.Rate)
	}
	return strings.Join(s, " ")
}
