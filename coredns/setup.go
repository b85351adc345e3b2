package rrl

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	clog "github.com/coredns/coredns/plugin/pkg/log"
	"github.com/coredns/coredns/plugin/pkg/transport"

	core "github.com/dnsrrl/rrl"
	"github.com/dnsrrl/rrl/miekgrrl"
)

const pluginName = "rrl"

var log = clog.NewWithPlugin(pluginName)

func init() { plugin.Register(pluginName, setup) }

func setup(c *caddy.Controller) error {
	h, err := parse(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	cfg := dnsserver.GetConfig(c)
	// Only plain DNS runs over bare UDP; DoT, DoH, DoQ and gRPC all run over
	// a handshake that proves the client's address, so none can reflect.
	h.streamOnly = cfg.Transport != "" && cfg.Transport != transport.DNS
	for _, host := range listenHosts(cfg) {
		h.stats.addServer(cfg.Transport + "://" + net.JoinHostPort(host, cfg.Port))
	}
	if !h.active {
		log.Warningf("no allowance set for %v: nothing will be limited", h.Zones)
	}
	c.OnStartup(func() error {
		h.traced = cfg.Handler("trace") != nil
		liveInstances.add(h.stats)
		return nil
	})
	c.OnShutdown(func() error { liveInstances.remove(h.stats); return nil })

	cfg.AddPlugin(func(next plugin.Handler) plugin.Handler {
		h.Next = next
		return h
	})
	return nil
}

// listenHosts returns the hosts the server block listens on; no bind
// directive means every address, which the server names with an empty host.
func listenHosts(cfg *dnsserver.Config) []string {
	if len(cfg.ListenHosts) == 0 {
		return []string{""}
	}
	return cfg.ListenHosts
}

// keywordsWithOneValue are the block directives that take exactly one value
// and go straight to the core's Config.SetValue, which checks the range.
var keywordsWithOneValue = map[string]bool{
	"window":               true,
	"ipv4-prefix-length":   true,
	"ipv6-prefix-length":   true,
	"responses-per-second": true,
	"nodata-per-second":    true,
	"nxdomains-per-second": true,
	"referrals-per-second": true,
	"errors-per-second":    true,
	"requests-per-second":  true,
	"all-per-second":       true,
	"slip-ratio":           true,
	"qps-scale":            true,
	"max-table-size":       true,
}

// parse reads the rrl directive of one server block into a handler that has
// its own table: blocks never share accounts, even on one listener.
func parse(c *caddy.Controller) (*RRL, error) {
	var h *RRL
	for c.Next() {
		if h != nil {
			return nil, plugin.ErrOnce
		}
		zones, err := parseZones(c)
		if err != nil {
			return nil, err
		}
		cfg, opts, err := parseBlock(c)
		if err != nil {
			return nil, err
		}
		h = newHandler(zones, cfg, opts)
	}
	if h == nil {
		return nil, c.ArgErr()
	}
	return h, nil
}

// parseZones normalizes the zones given after "rrl", defaulting to the server
// block's. A zone that does not normalize is refused rather than ignored, so
// that a typo cannot silently leave a zone unprotected.
func parseZones(c *caddy.Controller) ([]string, error) {
	args := c.RemainingArgs()
	for _, a := range args {
		if len(plugin.Host(a).NormalizeExact()) == 0 {
			return nil, c.Errf("invalid zone %q", a)
		}
	}
	zones := plugin.OriginsFromArgsOrServerBlock(args, c.ServerBlockKeys)
	if len(zones) == 0 {
		return nil, c.Err("no zone to limit")
	}
	return zones, nil
}

// defaultMaxTableSize is the core's default max-table-size (BIND's too).
const defaultMaxTableSize = 100000

// options are the settings of the plugin itself, beside the core's Config.
type options struct {
	reportOnly   bool
	maxTableSize int // as given to the core, for the metrics
	secret       [16]byte
	previous     *[16]byte
}

// parseBlock reads the block after "rrl [ZONES...]". Each directive may
// appear once (exempt-clients excepted, which adds up), because a second
// value silently winning is how a limit ends up not what the operator read.
func parseBlock(c *caddy.Controller) (*core.Config, options, error) {
	cfg := core.NewConfig()
	opts := options{secret: processSecret(), maxTableSize: defaultMaxTableSize}
	seen := map[string]bool{}
	for c.NextBlock() {
		kw := c.Val()
		canonical := kw
		if kw == "log-only" { // BIND's name for report-only
			canonical = "report-only"
		}
		if seen[canonical] && kw != "exempt-clients" {
			return nil, opts, c.Errf("%s given more than once", kw)
		}
		seen[canonical] = true
		args := c.RemainingArgs()
		if err := parseDirective(c, cfg, &opts, kw, args); err != nil {
			return nil, opts, err
		}
	}
	return cfg, opts, nil
}

// parseDirective applies one line of the block.
func parseDirective(c *caddy.Controller, cfg *core.Config, opts *options, kw string, args []string) error {
	switch {
	case keywordsWithOneValue[kw]:
		if len(args) != 1 {
			return c.Errf("%s takes exactly one value, got %d", kw, len(args))
		}
		if err := cfg.SetValue(kw, args[0]); err != nil {
			return c.Err(coreMessage(err))
		}
		if kw == "max-table-size" {
			opts.maxTableSize, _ = strconv.Atoi(args[0])
		}
	case kw == "exempt-clients":
		if len(args) == 0 {
			return c.Errf("%s needs at least one address or CIDR prefix", kw)
		}
		if err := cfg.SetValue(kw, strings.Join(args, " ")); err != nil {
			return c.Err(coreMessage(err))
		}
	case kw == "report-only" || kw == "log-only":
		if len(args) != 0 {
			return c.Errf("%s takes no value, got %d", kw, len(args))
		}
		opts.reportOnly = true
	case kw == "cookie-secret":
		return parseSecrets(c, opts, args)
	default:
		return c.Errf("unknown property %q", kw)
	}
	return nil
}

// coreMessage returns the core's error text without its "rrl: " prefix,
// which plugin.Error already adds.
func coreMessage(err error) string { return strings.TrimPrefix(err.Error(), "rrl: ") }

// parseSecrets reads "cookie-secret HEX [PREVIOUS]": the second secret is
// the one being rotated out, still accepted in cookies but never issued.
func parseSecrets(c *caddy.Controller, opts *options, args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return c.Errf("cookie-secret takes one secret and optionally the previous one (32 hex digits each), got %d values", len(args))
	}
	s, err := parseSecret(args[0])
	if err != nil {
		return c.Errf("cookie-secret %q: %v", args[0], err)
	}
	opts.secret = s
	if len(args) == 2 {
		p, err := parseSecret(args[1])
		if err != nil {
			return c.Errf("cookie-secret previous %q: %v", args[1], err)
		}
		opts.previous = &p
	}
	return nil
}

// parseSecret decodes a 128-bit secret written as 32 hex digits.
func parseSecret(s string) ([16]byte, error) {
	var out [16]byte
	if len(s) != 2*len(out) {
		return out, fmt.Errorf("want exactly 32 hex digits, got %d characters", len(s))
	}
	if _, err := hex.Decode(out[:], []byte(s)); err != nil {
		return out, fmt.Errorf("want exactly 32 hex digits: %v", err)
	}
	return out, nil
}

var (
	secretOnce sync.Once
	secret     [16]byte
)

// processSecret returns a random cookie secret drawn once per process, so
// that a reload, or another server block on the same listener, keeps
// accepting the server cookies clients already hold.
func processSecret() [16]byte {
	secretOnce.Do(func() {
		if _, err := rand.Read(secret[:]); err != nil {
			panic("rrl: no randomness for the cookie secret: " + err.Error())
		}
	})
	return secret
}

// newCookies makes the cookie checker from the parsed secrets.
func newCookies(opts options) *miekgrrl.Cookies {
	ck := miekgrrl.NewCookies(opts.secret)
	if opts.previous != nil {
		ck.SetPrevious(*opts.previous)
	}
	return ck
}
