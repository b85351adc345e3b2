package replay

import (
	"fmt"
	"io"
	"net"
	"slices"
	"strings"

	"github.com/coredns/caddy/caddyfile"
	"github.com/dnsrrl/rrl"
	"github.com/dnsrrl/rrl/miekgrrl"
)

// Corefile is what the first rrl block of a Corefile says: the core's
// settings, the zones it limits, and the plugin's own directives.
type Corefile struct {
	Settings      []Setting
	Zones         []string // fully qualified, lower case
	ReportOnly    bool
	CookieSecrets [][16]byte // current first, then the previous one
}

// ParseCorefile reads the first rrl block of the Corefile in r (named file
// in errors), as the CoreDNS plugin reads it: the zones on the rrl line,
// else the server block's; every core keyword applied with
// Config.SetValue; report-only (or log-only) and cookie-secret noted.
// Errors give the file and line.
func ParseCorefile(file string, r io.Reader) (*Corefile, error) {
	blocks, err := caddyfile.Parse(file, r, nil)
	if err != nil {
		return nil, err
	}
	for _, b := range blocks {
		if toks, ok := b.Tokens["rrl"]; ok {
			return parseRRLBlock(file, b.Keys, toks)
		}
	}
	return nil, fmt.Errorf("%s: no rrl block", file)
}

func parseRRLBlock(file string, keys []string, toks []caddyfile.Token) (*Corefile, error) {
	d := caddyfile.NewDispenserTokens(file, toks)
	cf := &Corefile{}
	d.Next() // "rrl"
	args := d.RemainingArgs()
	zones, err := blockZones(args, keys)
	if err != nil {
		return nil, d.Err(err.Error())
	}
	cf.Zones = zones
	cfg := rrl.NewConfig() // checks each setting as it comes, for its line
	seen := map[string]bool{}
	for d.NextBlock() {
		kw := d.Val()
		canonical := kw
		if kw == "log-only" {
			canonical = "report-only"
		}
		if seen[canonical] && kw != "exempt-clients" {
			return nil, d.Errf("%s given more than once", kw)
		}
		seen[canonical] = true
		vals := d.RemainingArgs()
		var value string // the core's setting of kw, if it is one
		core := true
		switch kw {
		case "report-only", "log-only":
			if len(vals) != 0 {
				return nil, d.Errf("%s takes no value, got %d", kw, len(vals))
			}
			cf.ReportOnly, core = true, false
		case "cookie-secret":
			secrets, err := miekgrrl.ParseSecrets(vals)
			if err != nil {
				return nil, d.Errf("cookie-secret: %v", err)
			}
			cf.CookieSecrets, core = secrets, false
		case "exempt-clients":
			if len(vals) == 0 {
				return nil, d.Errf("%s needs at least one address or CIDR prefix", kw)
			}
			value = strings.Join(vals, " ")
		default:
			if !slices.Contains(rrl.Keywords(), kw) {
				return nil, d.Errf("unknown property %q; the properties are %s, report-only, log-only, cookie-secret", kw, strings.Join(rrl.Keywords(), ", "))
			}
			if len(vals) != 1 {
				return nil, d.Errf("%s takes exactly one value, got %d", kw, len(vals))
			}
			value = vals[0]
		}
		if !core {
			continue
		}
		if err := cfg.SetValue(kw, value); err != nil {
			return nil, d.Err(strings.TrimPrefix(err.Error(), "rrl: "))
		}
		cf.Settings = append(cf.Settings, Setting{kw, value, fmt.Sprintf("%s:%d", d.File(), d.Line())})
	}
	return cf, nil
}

// blockZones returns the zones of an rrl block: those on its line, else the
// server block's keys, fully qualified and in lower case.
func blockZones(args, keys []string) ([]string, error) {
	src := args
	if len(src) == 0 {
		src = keys
	}
	var zones []string
	for _, k := range src {
		z, err := zoneOf(k)
		if err != nil {
			return nil, err
		}
		zones = append(zones, z)
	}
	return zones, nil
}

// zoneOf normalises a zone or server block key ("dns://example.org:53").
func zoneOf(key string) (string, error) {
	z := key
	if i := strings.Index(z, "://"); i >= 0 {
		z = z[i+3:]
	}
	if h, _, err := net.SplitHostPort(z); err == nil {
		z = h
	} else if strings.HasPrefix(z, ":") || strings.HasSuffix(z, ":") {
		z = strings.Trim(z, ":")
	}
	if z == "" {
		z = "."
	}
	if strings.Contains(z, "/") {
		return "", fmt.Errorf("zone %q: a reverse zone written as a network is not supported here; list the zones on the rrl line", key)
	}
	z = strings.ToLower(z)
	if !strings.HasSuffix(z, ".") {
		z += "."
	}
	return z, nil
}
