package replay

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// ZoneFile is one zone file of a Corefile's file directive, as the file
// plugin reads it: the path (already joined to the server block's root, if
// relative) and the zones it is loaded as.
type ZoneFile struct {
	Path    string
	Origins []string // fully qualified, lower case
	At      string   // "Corefile:12", for errors
}

// ZoneData is what the file plugin knows of the zones it serves, as far as
// rate limiting needs it: which names exist, which are wildcards, aliases
// (CNAME, DNAME) or delegations. With it a replay tells, as the plugin tells
// its rrl, which answers were synthesised from a wildcard: a capture shows
// only the synthesised name, and without this each random name under a
// wildcard would be an account of its own.
//
// Its memory is proportional to the names of the zones.
type ZoneData struct {
	zones   map[string]*zoneNames // by origin
	origins []string              // longest first, for the closest match
}

// zoneNames is one zone: its names, and the names with others below them.
type zoneNames struct {
	origin string
	names  map[string]nameInfo
	below  map[string]bool // names strictly above some name of the zone
}

// nameInfo is what a lookup needs of a name's records.
type nameInfo struct {
	cname string // target of its CNAME, "" if none
	dname bool
	ns    bool // a delegation (NS records below the apex)
}

// ReadZones reads the zone files of the Corefile's file directives (those
// of the server block of its first rrl block). It returns nil, and no
// error, when there are none. A file that cannot be opened or parsed is an
// error naming the directive's place and the path, as CoreDNS would not
// serve the zone.
func (cf *Corefile) ReadZones() (*ZoneData, error) {
	if len(cf.ZoneFiles) == 0 {
		return nil, nil
	}
	return ReadZoneFiles(cf.ZoneFiles)
}

// ReadZoneFiles reads zone files as the file plugin reads them, each once
// per origin it is loaded as: the SOA must be owned by the origin, and an
// NSEC3 record is refused.
func ReadZoneFiles(files []ZoneFile) (*ZoneData, error) {
	d := &ZoneData{zones: make(map[string]*zoneNames)}
	for _, f := range files {
		for _, origin := range f.Origins {
			z, err := readZone(f.Path, origin)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && !filepath.IsAbs(f.Path) {
					err = fmt.Errorf("%w (a relative path is read as CoreDNS reads it: under the block's root, from the working directory)", err)
				}
				if _, parse := errors.AsType[*dns.ParseError](err); parse {
					return nil, fmt.Errorf("%s: %w", f.At, err) // it names the file and line
				}
				return nil, fmt.Errorf("%s: file %s: %w", f.At, f.Path, err)
			}
			if _, ok := d.zones[origin]; !ok {
				d.origins = append(d.origins, origin)
			}
			d.zones[origin] = z
		}
	}
	slices.SortFunc(d.origins, func(a, b string) int { return dns.CountLabel(b) - dns.CountLabel(a) })
	return d, nil
}

func readZone(path, origin string) (*zoneNames, error) {
	f, err := os.Open(filepath.Clean(path))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z := &zoneNames{origin: origin, names: make(map[string]nameInfo), below: make(map[string]bool)}
	zp := dns.NewZoneParser(f, origin, path)
	zp.SetIncludeAllowed(true)
	soa := false
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		h := rr.Header()
		name := strings.ToLower(h.Name)
		switch h.Rrtype {
		case dns.TypeSOA:
			if name != origin {
				return nil, fmt.Errorf("SOA owner %s is not the origin %s", h.Name, origin)
			}
			soa = true
			continue // the apex's SOA and NS are not names of the tree
		case dns.TypeNSEC3, dns.TypeNSEC3PARAM:
			return nil, fmt.Errorf("%s: NSEC3 zones are not served by the file plugin", h.Name)
		case dns.TypeNS:
			if name == origin {
				continue
			}
		case dns.TypeRRSIG:
			if c := rr.(*dns.RRSIG).TypeCovered; c == dns.TypeSOA || (c == dns.TypeNS && name == origin) {
				continue
			}
		}
		if !dns.IsSubDomain(origin, name) {
			continue
		}
		z.add(name, rr)
	}
	if err := zp.Err(); err != nil {
		return nil, err
	}
	if !soa {
		return nil, fmt.Errorf("no SOA record for origin %s", origin)
	}
	return z, nil
}

// add records rr, owned by name.
func (z *zoneNames) add(name string, rr dns.RR) {
	info := z.names[name]
	switch rr := rr.(type) {
	case *dns.CNAME:
		info.cname = strings.ToLower(rr.Target)
	case *dns.DNAME:
		info.dname = true
	case *dns.NS:
		info.ns = true
	}
	if _, seen := z.names[name]; !seen {
		for p := parent(name); p != "" && dns.IsSubDomain(z.origin, p) && !z.below[p]; p = parent(p) {
			z.below[p] = true
		}
	}
	z.names[name] = info
}

// parent returns name without its first label, "" for the root.
func parent(name string) string {
	i, end := dns.NextLabel(name, 0)
	if end {
		return ""
	}
	return name[i:]
}

// maxChase bounds the CNAME lookups of one question, as the file plugin
// gives up past eight.
const maxChase = 8

// WildcardOrigin returns the origin of the wildcard that the file plugin
// would name as having synthesised its response to a question for qname
// and qtype ("wild.example.org." for *.wild.example.org.), or "" when none.
// That is the origin the plugin hands miekgrrl.Tuple.
//
// It follows the plugin's lookup: from the zone's apex down to qname, a
// DNAME or a delegation on the way ends the search; a missing name
// remembers the wildcard beside it; if qname is missing too, the deepest
// such wildcard answers, unless an empty non-terminal lies between it and
// qname. A CNAME (of qname, or of the wildcard) is chased, and a wildcard
// met there is the one named, as the plugin records the last it met.
func (d *ZoneData) WildcardOrigin(qname string, qtype uint16) string {
	if d == nil {
		return ""
	}
	return d.lookup(strings.ToLower(qname), qtype, 0)
}

// zone returns the zone of qname: the longest origin above it.
func (d *ZoneData) zone(qname string) *zoneNames {
	for _, o := range d.origins {
		if dns.IsSubDomain(o, qname) {
			return d.zones[o]
		}
	}
	return nil
}

func (d *ZoneData) lookup(qname string, qtype uint16, depth int) string {
	z := d.zone(qname)
	if z == nil || depth > maxChase {
		return ""
	}
	if qname == z.origin && (qtype == dns.TypeSOA || qtype == dns.TypeNS) {
		return ""
	}
	var (
		wild      string // the deepest wildcard beside a missing name
		wildFound bool   // it has records (else an empty non-terminal)
		info      nameInfo
		found     bool
	)
	for _, part := range z.path(qname) {
		info, found = z.names[part]
		if !found {
			w := "*." + parent(part)
			if _, ok := z.names[w]; ok {
				wild, wildFound = w, true
			} else if z.hasDescendant(w) {
				wild, wildFound = w, false
			}
			continue
		}
		if info.dname && part != qname {
			return "" // synthesised from the DNAME, which miekgrrl.Tuple names
		}
		if info.ns && part != z.origin && !(qtype == dns.TypeDS && part == qname) {
			return "" // a referral
		}
	}
	if found {
		if info.cname != "" && qtype != dns.TypeCNAME {
			return d.chase(z, info.cname, qtype, depth+1)
		}
		return ""
	}
	if wild == "" || !wildFound || z.closerENT(qname, wild) {
		return ""
	}
	origin := wild[2:]
	if c := z.names[wild].cname; c != "" && qtype != dns.TypeCNAME {
		if o := d.chase(z, c, qtype, depth+1); o != "" {
			return o
		}
	}
	return origin
}

// chase follows a CNAME to target as the file plugin does: through the
// CNAMEs of names that exist, and by a new lookup (which may meet a
// wildcard) of a name that does not.
func (d *ZoneData) chase(z *zoneNames, target string, qtype uint16, depth int) string {
	for ; depth <= maxChase; depth++ {
		if !dns.IsSubDomain(z.origin, target) {
			return d.lookup(target, qtype, depth)
		}
		info, ok := z.names[target]
		if !ok {
			return d.lookup(target, qtype, depth)
		}
		if z.delegated(target, qtype) || info.cname == "" {
			return ""
		}
		target = info.cname
	}
	return ""
}

// delegated reports whether a delegation lies on the way to name.
func (z *zoneNames) delegated(name string, qtype uint16) bool {
	for _, part := range z.path(name) {
		if info := z.names[part]; info.ns && part != z.origin && !(qtype == dns.TypeDS && part == name) {
			return true
		}
	}
	return false
}

// path returns the names from the zone's origin down to qname, which is in
// the zone.
func (z *zoneNames) path(qname string) []string {
	var out []string
	for n := qname; ; n = parent(n) {
		out = append(out, n)
		if n == z.origin || n == "" {
			break
		}
	}
	slices.Reverse(out)
	return out
}

// hasDescendant reports what the plugin's tree search does: that name is
// missing and some name lies below it (an empty non-terminal).
func (z *zoneNames) hasDescendant(name string) bool {
	_, exists := z.names[name]
	return !exists && z.below[name]
}

// closerENT reports whether an empty non-terminal lies between the
// wildcard's parent and qname: it is then the closest encloser, and the
// wildcard does not apply (RFC 4592).
func (z *zoneNames) closerENT(qname, wild string) bool {
	p := wild[2:]
	for n := parent(qname); n != "" && n != p && dns.IsSubDomain(p, n); n = parent(n) {
		if z.hasDescendant(n) {
			return true
		}
	}
	return false
}
