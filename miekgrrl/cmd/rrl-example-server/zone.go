package main

import (
	"crypto"
	_ "embed"
	"strings"

	"github.com/miekg/dns"
)

//go:embed zone.db
var zoneText string

// zone is a minimal authoritative zone: enough to produce every kind of
// response the limiter tells apart, not a general server.
type zone struct {
	origin string
	soa    dns.RR
	rrs    map[string][]dns.RR     // by lower-case owner
	sigs   map[string][]*dns.RRSIG // by lower-case owner, signed RRsets only
	names  map[string]bool         // owners and the empty non-terminals above them
	cuts   map[string]bool         // delegation points
}

// signedNames are the owners whose RRsets are signed at start-up.
var signedNames = []string{"signed.example.org.", "*.wild.example.org."}

func loadZone(text, origin string) (*zone, error) {
	z := &zone{origin: origin, rrs: map[string][]dns.RR{}, sigs: map[string][]*dns.RRSIG{},
		names: map[string]bool{}, cuts: map[string]bool{}}
	zp := dns.NewZoneParser(strings.NewReader(text), origin, "zone.db")
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		name := strings.ToLower(rr.Header().Name)
		z.rrs[name] = append(z.rrs[name], rr)
		switch rr.Header().Rrtype {
		case dns.TypeSOA:
			z.soa = rr
		case dns.TypeNS:
			if name != origin {
				z.cuts[name] = true
			}
		}
		for n := name; dns.IsSubDomain(origin, n); {
			z.names[n] = true
			i, end := dns.NextLabel(n, 0)
			if end {
				break
			}
			n = n[i:]
		}
	}
	return z, zp.Err()
}

// sign signs the RRsets of the signedNames with a key made for the run: the
// signatures are there to show RRSIG-based wildcard detection, not to be
// validated from a trust anchor.
func (z *zone) sign(key *dns.DNSKEY, priv crypto.Signer) error {
	for _, name := range signedNames {
		byType := map[uint16][]dns.RR{}
		for _, rr := range z.rrs[name] {
			byType[rr.Header().Rrtype] = append(byType[rr.Header().Rrtype], rr)
		}
		for t, set := range byType {
			sig := &dns.RRSIG{
				Hdr:         dns.RR_Header{Name: name, Rrtype: dns.TypeRRSIG, Class: dns.ClassINET, Ttl: set[0].Header().Ttl},
				TypeCovered: t, Algorithm: key.Algorithm, OrigTtl: set[0].Header().Ttl,
				Expiration: 2051222400, Inception: 1704067200, // 2035-01-01, 2024-01-01
				KeyTag: key.KeyTag(), SignerName: z.origin,
			}
			if err := sig.Sign(priv, set); err != nil {
				return err
			}
			z.sigs[name] = append(z.sigs[name], sig)
		}
	}
	return nil
}

// answer is what lookup found.
type answer struct {
	rcode             int
	aa                bool
	answer, ns, extra []dns.RR
	wildcardOrigin    string // the parent of the wildcard used, if any
}

// lookup answers qname/qtype from the zone. dnssec adds RRSIGs where there
// are some.
func (z *zone) lookup(qname string, qtype uint16, dnssec bool) answer {
	name := strings.ToLower(qname)
	if !dns.IsSubDomain(z.origin, name) {
		return answer{rcode: dns.RcodeRefused}
	}
	if cut := z.cutAbove(name); cut != "" {
		return answer{ns: z.rrs[cut], extra: z.glue(z.rrs[cut])}
	}
	owner, wildcard := name, ""
	if !z.names[name] {
		encloser := z.closestEncloser(name)
		if _, ok := z.rrs["*."+encloser]; !ok {
			return answer{rcode: dns.RcodeNameError, aa: true, ns: []dns.RR{z.soa}}
		}
		owner, wildcard = "*."+encloser, encloser
	}
	var a answer
	a.aa, a.wildcardOrigin = true, wildcard
	for _, rr := range z.rrs[owner] {
		if rr.Header().Rrtype == qtype || qtype == dns.TypeANY {
			a.answer = append(a.answer, synthesise(rr, qname))
		}
	}
	if dnssec {
		for _, sig := range z.sigs[owner] {
			if sig.TypeCovered == qtype {
				a.answer = append(a.answer, synthesise(sig, qname))
			}
		}
	}
	if len(a.answer) == 0 {
		a.ns = []dns.RR{z.soa}
	}
	return a
}

// synthesise returns rr owned by qname (a copy when the owner differs, as for
// a wildcard).
func synthesise(rr dns.RR, qname string) dns.RR {
	if strings.EqualFold(rr.Header().Name, qname) {
		return rr
	}
	c := dns.Copy(rr)
	c.Header().Name = qname
	return c
}

// cutAbove returns the delegation point at or above name, if any.
func (z *zone) cutAbove(name string) string {
	for n := name; n != z.origin; {
		if z.cuts[n] {
			return n
		}
		i, end := dns.NextLabel(n, 0)
		if end {
			break
		}
		n = n[i:]
	}
	return ""
}

// closestEncloser returns the longest existing ancestor of name.
func (z *zone) closestEncloser(name string) string {
	for n := name; ; {
		if z.names[n] || n == z.origin {
			return n
		}
		i, end := dns.NextLabel(n, 0)
		if end {
			return z.origin
		}
		n = n[i:]
	}
}

// glue returns the address records of in-zone name servers in nsset.
func (z *zone) glue(nsset []dns.RR) []dns.RR {
	var out []dns.RR
	for _, rr := range nsset {
		if ns, ok := rr.(*dns.NS); ok {
			out = append(out, z.rrs[strings.ToLower(ns.Ns)]...)
		}
	}
	return out
}
