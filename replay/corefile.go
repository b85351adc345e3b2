package replay

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/coredns/caddy/caddyfile"
	"github.com/dnsrrl/rrl"
	"github.com/dnsrrl/rrl/miekgrrl"
	"github.com/miekg/dns"
)

// Corefile is what the first rrl block of a Corefile says: the core's
// settings, the zones it limits, and the plugin's own directives.
type Corefile struct {
	Settings      []Setting
	Zones         []string // fully qualified, lower case
	ReportOnly    bool
	CookieSecrets [][16]byte // current first, then the previous one

	// ZoneFiles are the file directives of the rrl block's server block,
	// whose zones ReadZones reads.
	ZoneFiles []ZoneFile

	// OtherBlocks are the zones of each later rrl block, which a replay
	// does not apply: it replays one configuration.
	OtherBlocks [][]string
}

// ParseCorefile reads the first rrl block of the Corefile in r (named file
// in errors), as the CoreDNS plugin reads it: the zones on the rrl line,
// else the server block's, a network written as a zone (10.0.0.0/8) read
// as its reverse zones as CoreDNS reads it; every core keyword applied
// with Config.SetValue; report-only (or log-only) and cookie-secret noted.
// The zones of later rrl blocks are listed in OtherBlocks. Errors give the
// file and line.
func ParseCorefile(file string, r io.Reader) (*Corefile, error) {
	blocks, err := caddyfile.Parse(file, r, nil)
	if err != nil {
		return nil, err
	}
	var cf *Corefile
	for _, b := range blocks {
		toks, ok := b.Tokens["rrl"]
		if !ok {
			continue
		}
		// A later block is read whole too, so that an error in it, which
		// would keep CoreDNS from starting, is not passed over.
		block, err := parseRRLBlock(file, b.Keys, toks)
		if err != nil {
			return nil, err
		}
		if cf == nil {
			cf = block
			if cf.ZoneFiles, err = zoneFiles(file, b.Keys, b.Tokens); err != nil {
				return nil, err
			}
			continue
		}
		cf.OtherBlocks = append(cf.OtherBlocks, block.Zones)
	}
	if cf == nil {
		return nil, fmt.Errorf("%s: no rrl block", file)
	}
	return cf, nil
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
	if len(args) > 0 {
		if err := withinBlock(zones, keys); err != nil {
			return nil, d.Err(err.Error())
		}
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
		case "status", "log-limited": // what an operator sees, not what is limited
			core = false
		case "kernel-drop", "kernel-drop-after", "kernel-drop-for":
			// Where refusals are made cheaper, not what is refused: a
			// network in the kernel sends nothing the server would answer.
			core = false
		case "exempt-clients":
			if len(vals) == 0 {
				return nil, d.Errf("%s needs at least one address or CIDR prefix", kw)
			}
			value = strings.Join(vals, " ")
		case "ipv4-request-prefixes", "ipv6-request-prefixes":
			// A list of pairs, written as separate arguments or as one.
			if len(vals) == 0 {
				return nil, d.Errf("%s needs at least one LENGTH:ALLOWANCE pair, such as 32:5 20:400", kw)
			}
			value = strings.Join(vals, " ")
		default:
			if !slices.Contains(rrl.Keywords(), kw) {
				// The plugin's message: the nearest property, if one is
				// near, and all of them.
				props := append(rrl.Keywords(), "report-only", "log-only", "cookie-secret", "status", "log-limited",
					"kernel-drop", "kernel-drop-after", "kernel-drop-for")
				hint := "the"
				if s := rrl.Suggest(kw, props); s != "" {
					hint = fmt.Sprintf("did you mean %q? The", s)
				}
				return nil, d.Errf("unknown property %q; %s properties are %s", kw, hint, strings.Join(props, ", "))
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
			return nil, d.Err(valueError(err).Error())
		}
		cf.Settings = append(cf.Settings, Setting{kw, value, fmt.Sprintf("%s:%d", d.File(), d.Line())})
	}
	if err := onlyOne(&d); err != nil {
		return nil, err
	}
	return cf, nil
}

// zoneFiles returns the file directives of a server block, each path
// joined to the block's root if relative, as the file plugin opens it.
func zoneFiles(file string, keys []string, tokens map[string][]caddyfile.Token) ([]ZoneFile, error) {
	root := ""
	if toks := tokens["root"]; len(toks) > 0 {
		d := caddyfile.NewDispenserTokens(file, toks)
		if d.Next() && d.NextArg() {
			root = d.Val()
		}
	}
	var out []ZoneFile
	d := caddyfile.NewDispenserTokens(file, tokens["file"])
	for d.Next() {
		at := fmt.Sprintf("%s:%d", d.File(), d.Line())
		if !d.NextArg() {
			return nil, d.ArgErr()
		}
		path := d.Val()
		origins, err := blockZones(d.RemainingArgs(), keys)
		if err != nil {
			return nil, d.Err(err.Error())
		}
		if !filepath.IsAbs(path) && root != "" {
			path = filepath.Join(root, path)
		}
		out = append(out, ZoneFile{Path: path, Origins: origins, At: at})
		for d.NextBlock() { // reload, fallthrough: nothing a replay needs
			d.RemainingArgs()
		}
	}
	return out, nil
}

// withinBlock refuses, as the plugin does, a zone on the rrl line that
// neither contains nor lies inside one of the server block's zones: no
// query for it reaches the block.
func withinBlock(zones, keys []string) error {
	block, err := blockZones(nil, keys)
	if err != nil {
		return err
	}
	for _, z := range zones {
		if !slices.ContainsFunc(block, func(b string) bool { return dns.IsSubDomain(b, z) || dns.IsSubDomain(z, b) }) {
			return fmt.Errorf("zone %s is outside the server block's zones %v: no query for it reaches this block", z, block)
		}
	}
	return nil
}

// onlyOne refuses a second rrl in a server block, once d has read the
// first, as the plugin does: CoreDNS would not start.
func onlyOne(d *caddyfile.Dispenser) error {
	if d.Next() {
		return d.Err("rrl may appear only once in a server block; give all its zones and settings in one block")
	}
	return nil
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
		z, err := zonesOf(k)
		if err != nil {
			return nil, err
		}
		zones = append(zones, z...)
	}
	return zones, nil
}

// zonesOf normalises a zone or server block key ("dns://example.org:53"):
// one zone, or the reverse zones of a network ("10.0.0.0/8", with a port
// after the mask if any).
func zonesOf(key string) ([]string, error) {
	if strings.TrimSpace(key) == "" {
		// It would read as the root zone: every name, silently.
		return nil, errors.New(`zone "": empty; write . for the root zone`)
	}
	z := key
	if i := strings.Index(z, "://"); i >= 0 {
		z = z[i+3:]
	}
	if strings.Contains(z, "/") {
		if i := strings.LastIndex(z, ":"); i >= 0 {
			if _, err := strconv.Atoi(z[i+1:]); err == nil {
				z = z[:i]
			}
		}
		p, err := netip.ParsePrefix(z)
		if err != nil {
			return nil, fmt.Errorf("zone %q: neither a name nor a network (%v)", key, err)
		}
		if p.Addr().Is6() && (z[0] == ':' || z[0] == '0') {
			// CoreDNS refuses these ("invalid CIDR") and would not start.
			return nil, fmt.Errorf("zone %q: CoreDNS refuses an IPv6 network that begins with : or 0", key)
		}
		return reverseZones(p), nil
	}
	if h, _, err := net.SplitHostPort(z); err == nil {
		z = h
	} else if strings.HasPrefix(z, ":") || strings.HasSuffix(z, ":") {
		z = strings.Trim(z, ":")
	}
	if z == "" {
		z = "."
	}
	z = dns.Fqdn(strings.ToLower(z))
	if _, ok := dns.IsDomainName(z); !ok || !dns.IsFqdn(z) { // "\" ends in an escaped dot
		return nil, fmt.Errorf("zone %q: not a valid domain name", key)
	}
	return []string{z}, nil
}

// reverseZones returns the reverse zones of network p, as CoreDNS reads a
// network written as a zone: p split into the networks of the next
// octet boundary (IPv4) or nibble boundary (IPv6), since a reverse name
// has a label an octet or a nibble; each named under in-addr.arpa. or
// ip6.arpa.
func reverseZones(p netip.Prefix) []string {
	p = p.Masked()
	digit := 8
	if p.Addr().Is6() {
		digit = 4
	}
	bits := (p.Bits() + digit - 1) / digit * digit
	labels := (p.Addr().BitLen() - bits) / digit // of the address's reverse name, below the zone
	var zones []string
	a := p.Addr()
	for range 1 << (bits - p.Bits()) { // at most 128 (IPv4) or 8 (IPv6)
		name, _ := dns.ReverseAddr(a.String())
		off := 0
		for range labels {
			off, _ = dns.NextLabel(name, off)
		}
		zones = append(zones, name[off:])
		a = nextNetwork(a, bits)
	}
	return zones
}

// nextNetwork returns the address of the network of bits bits after a's.
func nextNetwork(a netip.Addr, bits int) netip.Addr {
	b := a.AsSlice()
	for i := bits - 1; i >= 0; i-- { // add 1 at bit bits-1, carrying
		mask := byte(0x80) >> (i % 8)
		if b[i/8] ^= mask; b[i/8]&mask != 0 {
			break
		}
	}
	next, _ := netip.AddrFromSlice(b)
	return next
}
