package miekgrrl

import (
	"strings"

	"github.com/dnsrrl/rrl"
	"github.com/miekg/dns"
)

// Tuple classifies resp for accounting by the rules BIND 9 applies:
//
//   - NOERROR with answers: AllowanceAnswer, named after the query name;
//   - NOERROR without answers, with NS records and no SOA in the authority
//     section: AllowanceReferral, named after the delegation point (the owner
//     of the NS records);
//   - any other NOERROR: AllowanceNoData, named after the query name;
//   - NXDOMAIN: AllowanceNXDomain, named after the zone (the owner of the SOA
//     in the authority section; see nxdomainName for the fallbacks);
//   - any other rcode: AllowanceError, with no name.
//
// An answer synthesised from a DNAME record is named after the owner of the
// DNAME (the name the server found, in BIND's terms): the answer section
// holds a DNAME owned by an ancestor of the query name. So one DNAME is one
// account however many names below it are asked.
//
// An answer or NODATA synthesised from a wildcard is named "*.<origin>" so
// that one wildcard is one account however many names it answers for. It is
// recognised from the RRSIG over the answer (its Labels field counts fewer
// labels than the owner name), from an NSEC owned by the wildcard in a signed
// NODATA, or from wildcardOrigin: the parent of the wildcard that produced
// the response ("example.org" for *.example.org), given by a caller that
// knows; "" means not told.
//
// Class and type come from the question of resp, or of req (which may be
// nil) when resp has none. A response without any question, such as the
// answer to a cookie-only query (RFC 7873 section 5.4), is NODATA for the
// root name. A nil resp is an error.
//
// Size is left 0 (unknown): measuring a message is a walk over it, which
// only nocookie-udp-size and all-bytes-per-second need. A caller sets it
// when the RRL's NeedsResponseSize says so, to the length it writes
// (dns.Msg.Len, or the bytes of a packed message), as the middleware does.
//
// Tuple allocates nothing, except once per distinct wildcard origin: those
// names are built once and kept (see wildcardName).
func Tuple(req, resp *dns.Msg, wildcardOrigin string) rrl.ResponseTuple {
	var t rrl.ResponseTuple
	if resp == nil {
		t.AllowanceCategory = rrl.AllowanceError
		return t
	}
	q, hasQ := question(req, resp)
	if hasQ {
		t.Class, t.Type = q.Qclass, q.Qtype
	}
	qname := "."
	if hasQ && q.Name != "" {
		qname = q.Name
	}

	soa, ns := authority(resp.Ns)
	nsCount := 0
	if soa == nil && ns != nil {
		nsCount = 1
	}
	t.AllowanceCategory = rrl.NewAllowanceCategory(resp.Rcode, countRRs(resp.Answer), nsCount)

	switch t.AllowanceCategory {
	case rrl.AllowanceAnswer:
		t.SalientName = qname
		if d := dnameOwner(resp.Answer, qname); d != "" {
			t.SalientName = d
		} else if w := signedWildcard(resp.Answer, qname); w != "" {
			t.SalientName = w
		} else if wildcardOrigin != "" {
			t.SalientName = wildcardName(wildcardOrigin)
		}
	case rrl.AllowanceNoData:
		t.SalientName = qname
		if w := nsecWildcard(resp.Ns, qname); w != "" {
			t.SalientName = w
		} else if wildcardOrigin != "" {
			t.SalientName = wildcardName(wildcardOrigin)
		}
	case rrl.AllowanceReferral:
		t.SalientName = ns.Header().Name
	case rrl.AllowanceNXDomain:
		t.SalientName = nxdomainName(soa, ns)
	}
	return t
}

// question returns the question of resp, or else of req.
func question(req, resp *dns.Msg) (dns.Question, bool) {
	if len(resp.Question) > 0 {
		return resp.Question[0], true
	}
	if req != nil && len(req.Question) > 0 {
		return req.Question[0], true
	}
	return dns.Question{}, false
}

// authority returns the first SOA and the first NS record of the authority
// section. A NODATA response carries the SOA and a referral does not, which is
// how the two are told apart when both have no answer.
func authority(rrs []dns.RR) (soa, ns dns.RR) {
	for _, rr := range rrs {
		if rr == nil {
			continue
		}
		switch rr.Header().Rrtype {
		case dns.TypeSOA:
			if soa == nil {
				soa = rr
			}
		case dns.TypeNS:
			if ns == nil {
				ns = rr
			}
		}
	}
	return soa, ns
}

// countRRs counts the records of a section, skipping nil entries that a
// careless handler may leave.
func countRRs(rrs []dns.RR) int {
	n := 0
	for _, rr := range rrs {
		if rr != nil {
			n++
		}
	}
	return n
}

// dnameOwner returns the owner of the first DNAME record of the answer
// section owned by an ancestor of qname, or "" if there is none: the answer
// was then synthesised from that DNAME (RFC 6672).
func dnameOwner(answer []dns.RR, qname string) string {
	for _, rr := range answer {
		if d, ok := rr.(*dns.DNAME); ok && d != nil && isBelow(qname, d.Hdr.Name) {
			return d.Hdr.Name
		}
	}
	return ""
}

// nxdomainName names the account of an NXDOMAIN response: the zone, so that
// the endless supply of undefined names in it is one account. The zone is the
// owner of the SOA in the authority section. Without SOA (a server that omits
// it) the owner of an NS record there is the next best guess; with neither,
// the root name, so that all such responses to one network share a single
// account rather than spreading a flood over one account per random name.
func nxdomainName(soa, ns dns.RR) string {
	switch {
	case soa != nil:
		return soa.Header().Name
	case ns != nil:
		return ns.Header().Name
	}
	return "."
}

// signedWildcard returns "*.<origin>" when an RRSIG over the records owned
// by qname says that they were synthesised from a wildcard: its Labels field
// counts the labels of the wildcard's owner without the "*", fewer than
// qname has. It returns "" otherwise.
func signedWildcard(answer []dns.RR, qname string) string {
	for _, rr := range answer {
		sig, ok := rr.(*dns.RRSIG)
		if !ok || sig == nil || !strings.EqualFold(sig.Hdr.Name, qname) {
			continue
		}
		labels := int(sig.Labels)
		if labels >= dns.CountLabel(qname) {
			return ""
		}
		i, _ := dns.PrevLabel(qname, labels)
		return wildcardName(qname[i:])
	}
	return ""
}

// nsecWildcard returns the owner of an NSEC record of the authority section
// that is a wildcard ("*.<origin>") above qname: in a signed NODATA
// synthesised from a wildcard, that NSEC proves the type absent at the
// wildcard. The same NSEC can instead prove that qname is an empty
// non-terminal (its next name is then below qname), which is no wildcard.
// NSEC3 hashes its owners, so there the caller must say.
func nsecWildcard(ns []dns.RR, qname string) string {
	for _, rr := range ns {
		nsec, ok := rr.(*dns.NSEC)
		if !ok || nsec == nil {
			continue
		}
		owner := nsec.Hdr.Name
		if len(owner) < 2 || owner[0] != '*' || owner[1] != '.' {
			continue
		}
		if isBelow(qname, owner[2:]) && !isBelow(nsec.NextDomain, qname) {
			return owner
		}
	}
	return ""
}

// isBelow reports whether name is strictly below origin, ignoring ASCII case
// and trailing dots.
func isBelow(name, origin string) bool {
	name, origin = strings.TrimSuffix(name, "."), strings.TrimSuffix(origin, ".")
	if origin == "" {
		return name != ""
	}
	if len(name) <= len(origin)+1 || name[len(name)-len(origin)-1] != '.' {
		return false
	}
	return strings.EqualFold(name[len(name)-len(origin):], origin)
}
