package rrl

import (
	"fmt"
	"net"
	"strings"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	clog "github.com/coredns/coredns/plugin/pkg/log"

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
	gen := c.Context() // one per loading of the Corefile
	for _, host := range listenHosts(cfg) {
		listener := cfg.Transport + "://" + net.JoinHostPort(host, cfg.Port)
		h.listeners = append(h.listeners, listener)
		if other, clash := listenerSecrets.check(gen, listener, h.secret, h.Zones); clash {
			log.Warningf("the blocks of %v and %v on %s have different cookie secrets: a server cookie that one issues is not valid in the other, so a client that moves between them is limited again", other, h.Zones, listener)
		}
	}
	if !h.active {
		log.Warningf("no allowance set for %v: nothing will be limited", h.Zones)
	}
	if h.unprovenOpen {
		log.Warningf("proven-requests-per-second is set for %v without requests-per-second: requests from unproven sources are not limited at all, so a client escapes its proven limit by sending no cookie; set requests-per-second too", h.Zones)
	}
	if err := setupKernel(c, h); err != nil { // kernel-drop (kernel.go)
		return plugin.Error(pluginName, err)
	}
	carried := limiters.adopt(h)
	c.OnStartup(func() error {
		h.traced = cfg.Handler("trace") != nil
		h.start()
		logCarry(h.Zones, carried)
		restarts.started(gen, h)
		return nil
	})
	// A reload that fails after this block's replacement started leaves the
	// replacement running nowhere: the old instance's OnRestartFailed stops
	// it. OnShutdown runs on every reload and at the end; OnFinalShutdown
	// only at the end; stop is safe to call more than once.
	c.OnStartup(func() error { return h.ops.start(h) }) // status and log-limited (status.go)
	c.OnRestart(func() error { restarts.begin(gen); return nil })
	c.OnRestartFailed(func() error { restarts.failed(gen); return nil })
	c.OnShutdown(func() error { h.stop(); restarts.done(gen); return nil })
	c.OnFinalShutdown(func() error { h.stop(); return nil })

	cfg.AddPlugin(func(next plugin.Handler) plugin.Handler {
		h.Next = next
		return h
	})
	return nil
}

// logCarry says, once the block has started, what a reload did with the
// accounts of the block it replaced.
func logCarry(zones []string, c carry) {
	switch c {
	case carryKept:
		log.Infof("kept accounts for %v: its settings are unchanged", zones)
	case carryReset:
		log.Infof("reset accounts for %v: its settings or listeners changed, so its table starts empty", zones)
	}
}

// unprovenOpen reports whether proven-requests-per-second limits requests
// while requests-per-second does not: a request that carries no valid server
// cookie over UDP is unproven, and unproven requests are then not limited at
// all, so that a client limited as proven escapes by dropping its cookie.
func unprovenOpen(cfg *core.Config) bool {
	proven, _ := cfg.Value("proven-requests-per-second")
	unproven, _ := cfg.Value("requests-per-second")
	return proven != "0" && unproven == "0"
}

// listenHosts returns the hosts the server block listens on; no bind
// directive means every address, which the server names with an empty host.
func listenHosts(cfg *dnsserver.Config) []string {
	if len(cfg.ListenHosts) == 0 {
		return []string{""}
	}
	return cfg.ListenHosts
}

// coreKeywords are the block directives that go straight to the core's
// Config.SetValue, which checks the value and names the allowed range.
var coreKeywords = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range core.Keywords() {
		m[k] = true
	}
	return m
}()

// listKeywords are the core keywords whose value is a list of
// LENGTH:ALLOWANCE pairs, which the block may give as several arguments.
var listKeywords = map[string]bool{
	"ipv4-request-prefixes": true,
	"ipv6-request-prefixes": true,
}

// parse reads the rrl directive of one server block into a handler that has
// its own table: blocks never share accounts, even on one listener.
func parse(c *caddy.Controller) (*RRL, error) {
	var h *RRL
	for c.Next() {
		if h != nil {
			return nil, c.Err("rrl may appear only once in a server block; give all its zones and settings in one block")
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
		h.ops = newOps(opts.ops)
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
	if len(args) > 0 {
		block := plugin.OriginsFromArgsOrServerBlock(nil, c.ServerBlockKeys)
		for _, z := range zones {
			if !overlaps(z, block) {
				return nil, c.Errf("zone %s is outside the server block's zones %v: no query for it reaches this block", z, block)
			}
		}
	}
	return zones, nil
}

// overlaps reports whether zone contains or lies inside one of zones.
func overlaps(zone string, zones []string) bool {
	for _, z := range zones {
		if isSubDomain(z, zone) || isSubDomain(zone, z) {
			return true
		}
	}
	return false
}

// options are the settings of the plugin itself, beside the core's Config.
type options struct {
	reportOnly bool
	secret     [16]byte
	previous   *[16]byte
	ops        opsOptions    // status and log-limited (status.go)
	kernel     kernelOptions // kernel-drop (kernel.go)
}

// parseBlock reads the block after "rrl [ZONES...]". Each directive may
// appear once (exempt-clients excepted, which adds up), because a second
// value silently winning is how a limit ends up not what the operator read.
func parseBlock(c *caddy.Controller) (*core.Config, options, error) {
	cfg := core.NewConfig()
	opts := options{secret: processSecret()}
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
	if err := checkKernel(c, cfg, opts.kernel, seen); err != nil {
		return nil, opts, err
	}
	return cfg, opts, nil
}

// parseDirective applies one line of the block.
func parseDirective(c *caddy.Controller, cfg *core.Config, opts *options, kw string, args []string) error {
	switch {
	case kw == "exempt-clients":
		if len(args) == 0 {
			return c.Errf("%s needs at least one address or CIDR prefix", kw)
		}
		if err := cfg.SetValue(kw, strings.Join(args, " ")); err != nil {
			return c.Err(coreMessage(err))
		}
	case listKeywords[kw]:
		// "ipv4-request-prefixes 32:5 20:400 18:1200": the pairs may come
		// as several arguments (or in one, with commas); the core reads
		// them joined and names the pair it refuses.
		if len(args) == 0 {
			return c.Errf("%s needs at least one LENGTH:ALLOWANCE pair", kw)
		}
		if err := cfg.SetValue(kw, strings.Join(args, " ")); err != nil {
			return c.Err(coreMessage(err))
		}
	case coreKeywords[kw]:
		if len(args) != 1 {
			return c.Errf("%s takes exactly one value, got %d", kw, len(args))
		}
		if err := cfg.SetValue(kw, args[0]); err != nil {
			return c.Err(coreMessage(err))
		}
	case kw == "report-only" || kw == "log-only":
		if len(args) != 0 {
			return c.Errf("%s takes no value, got %d", kw, len(args))
		}
		opts.reportOnly = true
	case kw == "cookie-secret":
		return parseSecrets(c, opts, args)
	case kw == "status":
		return parseStatus(c, cfg, &opts.ops, args)
	case kw == "log-limited":
		return parseLogLimited(c, cfg, &opts.ops, args)
	case kw == "kernel-drop" || kw == "kernel-drop-after" || kw == "kernel-drop-for":
		return parseKernel(c, &opts.kernel, kw, args)
	default:
		return c.Err(unknownProperty(kw))
	}
	return nil
}

// pluginKeywords are the block's directives beside the core's keywords.
var pluginKeywords = []string{"report-only", "log-only", "cookie-secret", "status", "log-limited",
	"kernel-drop", "kernel-drop-after", "kernel-drop-for"}

// unknownProperty is the error for a directive the block does not know: it
// names the nearest one, if one is near, and lists them all.
func unknownProperty(kw string) string {
	props := append(core.Keywords(), pluginKeywords...)
	list := strings.Join(props, ", ")
	if s := core.Suggest(kw, props); s != "" {
		return fmt.Sprintf("unknown property %q; did you mean %q? The properties are %s", kw, s, list)
	}
	return fmt.Sprintf("unknown property %q; the properties are %s", kw, list)
}

// coreMessage returns the core's error text without its "rrl: " prefix,
// which plugin.Error already adds.
func coreMessage(err error) string { return strings.TrimPrefix(err.Error(), "rrl: ") }

// parseSecrets reads "cookie-secret HEX [PREVIOUS]": the second secret is
// the one being rotated out, still accepted in cookies but never issued.
// Errors never repeat a secret: Corefile errors end up in logs.
func parseSecrets(c *caddy.Controller, opts *options, args []string) error {
	secrets, err := miekgrrl.ParseSecrets(args)
	if err != nil {
		return c.Errf("cookie-secret: %v", err)
	}
	opts.secret = secrets[0]
	if len(secrets) == 2 {
		opts.previous = &secrets[1]
	}
	return nil
}

// newCookies makes the cookie checker from the parsed secrets.
func newCookies(opts options) *miekgrrl.Cookies {
	ck := miekgrrl.NewCookies(opts.secret)
	if opts.previous != nil {
		ck.SetPrevious(*opts.previous)
	}
	return ck
}
