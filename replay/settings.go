package replay

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dnsrrl/rrl"
)

// Setting is one keyword of the core's Config with its value, as
// Config.SetValue takes them.
type Setting struct {
	Keyword, Value string
	Origin         string // where it was given, such as "Corefile:12", for errors
}

func (s Setting) String() string { return s.Keyword + " " + s.Value }

// ParseSetting reads "keyword=value" and checks it with Config.SetValue.
func ParseSetting(s string) (Setting, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return Setting{}, fmt.Errorf("%q: want keyword=value, such as responses-per-second=5", s)
	}
	set := Setting{Keyword: strings.TrimSpace(k), Value: strings.TrimSpace(v)}
	if err := rrl.NewConfig().SetValue(set.Keyword, set.Value); err != nil {
		return Setting{}, valueError(err)
	}
	return set, nil
}

// Sweep replays the same traffic under each of Values of Keyword.
type Sweep struct {
	Keyword string
	Values  []string
}

// ParseSweep reads "keyword=v1,v2,..." and checks every value.
func ParseSweep(s string) (*Sweep, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" || v == "" {
		return nil, fmt.Errorf("%q: want keyword=v1,v2,..., such as responses-per-second=1,5,10", s)
	}
	sw := &Sweep{Keyword: strings.TrimSpace(k)}
	for _, val := range strings.Split(v, ",") {
		val = strings.TrimSpace(val)
		if err := rrl.NewConfig().SetValue(sw.Keyword, val); err != nil {
			return nil, valueError(err)
		}
		sw.Values = append(sw.Values, val)
	}
	if len(sw.Values) > maxSweep {
		return nil, fmt.Errorf("%q: at most %d values, got %d", s, maxSweep, len(sw.Values))
	}
	return sw, nil
}

// valueError is the core's error for a setting without its "rrl: "
// prefix: replay's own messages name where the setting came from (a flag,
// a Corefile line) in its place.
func valueError(err error) error {
	return errors.New(strings.TrimPrefix(err.Error(), "rrl: "))
}

// maxSweep bounds the values of a sweep: each is a limiter of its own.
const maxSweep = 64

// limiterConfig is the Config of one replayed configuration, with what the
// report needs to know of it.
type limiterConfig struct {
	cfg          *rrl.Config
	settings     []Setting
	ipv4Bits     int
	ipv6Bits     int
	maxTableSize int
	prefixes     [2][]rrl.RequestPrefix // request prefixes configured, by family (0 IPv4, 1 IPv6)
}

// newLimiterConfig applies settings in order to a new Config.
func newLimiterConfig(settings []Setting) (*limiterConfig, error) {
	lc := &limiterConfig{cfg: rrl.NewConfig(), settings: settings}
	for _, s := range settings {
		if err := lc.cfg.SetValue(s.Keyword, s.Value); err != nil {
			if s.Origin != "" {
				return nil, fmt.Errorf("%s: %w", s.Origin, err)
			}
			return nil, err
		}
	}
	lc.ipv4Bits = lc.intValue("ipv4-prefix-length")
	lc.ipv6Bits = lc.intValue("ipv6-prefix-length")
	lc.maxTableSize = lc.intValue("max-table-size")
	lc.prefixes = [2][]rrl.RequestPrefix{lc.cfg.RequestPrefixes(false), lc.cfg.RequestPrefixes(true)}
	return lc, nil
}

// on reports whether the limit of keyword is on: set to other than 0 (a
// keyword the Config does not know reads back empty, and is off).
func (lc *limiterConfig) on(keyword string) bool {
	v, _ := lc.cfg.Value(keyword)
	return v != "0" && v != ""
}

// intValue reads back an integer setting of the Config.
func (lc *limiterConfig) intValue(keyword string) int {
	v, _ := lc.cfg.Value(keyword)
	n, _ := strconv.Atoi(v)
	return n
}
