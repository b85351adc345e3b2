package miekgrrl

import (
	"strings"
	"testing"

	"github.com/dnsrrl/rrl"
	"github.com/miekg/dns"
)

func rrs(t testing.TB, lines ...string) []dns.RR {
	t.Helper()
	out := make([]dns.RR, 0, len(lines))
	for _, l := range lines {
		rr, err := dns.NewRR(l)
		if err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		out = append(out, rr)
	}
	return out
}

// response builds a response to a query for qname/qtype.
func response(qname string, qtype uint16, rcode int, answer, ns, extra []dns.RR) (req, resp *dns.Msg) {
	req = new(dns.Msg).SetQuestion(qname, qtype)
	resp = new(dns.Msg).SetRcode(req, rcode)
	resp.Authoritative = true
	resp.Answer, resp.Ns, resp.Extra = answer, ns, extra
	return req, resp
}

const (
	soaLine  = "example.org. 3600 IN SOA ns1.example.org. hostmaster.example.org. 1 7200 3600 1209600 3600"
	sigA     = "www.example.org. 3600 IN RRSIG A 13 3 3600 20300101000000 20200101000000 12345 example.org. c2lnbmF0dXJl"
	sigWild  = "foo.bar.example.org. 3600 IN RRSIG A 13 2 3600 20300101000000 20200101000000 12345 example.org. c2lnbmF0dXJl"
	sigWild3 = "a.b.sub.example.org. 3600 IN RRSIG TXT 13 3 3600 20300101000000 20200101000000 12345 example.org. c2lnbmF0dXJl"
)

func TestTupleClassification(t *testing.T) {
	for _, tc := range []struct {
		name     string
		qname    string
		qtype    uint16
		rcode    int
		answer   []string
		ns       []string
		extra    []string
		origin   string
		wantCat  rrl.AllowanceCategory
		wantName string
	}{
		{
			name: "answer", qname: "www.example.org.", qtype: dns.TypeA,
			answer:  []string{"www.example.org. 300 IN A 192.0.2.1"},
			ns:      []string{"example.org. 300 IN NS ns1.example.org."},
			wantCat: rrl.AllowanceAnswer, wantName: "www.example.org.",
		},
		{
			name: "answer through CNAME is named after the query", qname: "alias.example.org.", qtype: dns.TypeA,
			answer: []string{
				"alias.example.org. 300 IN CNAME www.example.org.",
				"www.example.org. 300 IN A 192.0.2.1",
			},
			wantCat: rrl.AllowanceAnswer, wantName: "alias.example.org.",
		},
		{
			name: "signed answer, not a wildcard", qname: "www.example.org.", qtype: dns.TypeA,
			answer:  []string{"www.example.org. 300 IN A 192.0.2.1", sigA},
			wantCat: rrl.AllowanceAnswer, wantName: "www.example.org.",
		},
		{
			name: "signed wildcard answer", qname: "foo.bar.example.org.", qtype: dns.TypeA,
			answer:  []string{"foo.bar.example.org. 300 IN A 192.0.2.1", sigWild},
			wantCat: rrl.AllowanceAnswer, wantName: "*.example.org.",
		},
		{
			name: "signed wildcard answer, mixed case, deeper origin", qname: "A.B.Sub.Example.ORG.", qtype: dns.TypeTXT,
			answer:  []string{`a.b.sub.example.org. 300 IN TXT "x"`, sigWild3},
			wantCat: rrl.AllowanceAnswer, wantName: "*.sub.example.org.",
		},
		{
			name: "unsigned wildcard answer, caller's origin", qname: "anything.example.org.", qtype: dns.TypeA,
			answer: []string{"anything.example.org. 300 IN A 192.0.2.1"}, origin: "example.org",
			wantCat: rrl.AllowanceAnswer, wantName: "*.example.org.",
		},
		{
			name: "unsigned wildcard answer, caller gives the wildcard itself", qname: "anything.example.org.", qtype: dns.TypeA,
			answer: []string{"anything.example.org. 300 IN A 192.0.2.1"}, origin: "*.Example.org.",
			wantCat: rrl.AllowanceAnswer, wantName: "*.example.org.",
		},
		{
			name: "NODATA with SOA", qname: "www.example.org.", qtype: dns.TypeAAAA,
			ns:      []string{soaLine},
			wantCat: rrl.AllowanceNoData, wantName: "www.example.org.",
		},
		{
			name: "NODATA with SOA and NS is still NODATA", qname: "www.example.org.", qtype: dns.TypeAAAA,
			ns:      []string{soaLine, "example.org. 300 IN NS ns1.example.org."},
			wantCat: rrl.AllowanceNoData, wantName: "www.example.org.",
		},
		{
			name: "NODATA without SOA", qname: "www.example.org.", qtype: dns.TypeAAAA,
			wantCat: rrl.AllowanceNoData, wantName: "www.example.org.",
		},
		{
			name: "signed wildcard NODATA", qname: "x.y.example.org.", qtype: dns.TypeMX,
			ns: []string{
				soaLine,
				"*.example.org. 3600 IN NSEC www.example.org. A RRSIG NSEC",
			},
			wantCat: rrl.AllowanceNoData, wantName: "*.example.org.",
		},
		{
			// *.example.org. sorts before b.example.org., an empty
			// non-terminal above a.b.example.org.: the NSEC covers it.
			name: "signed NODATA at an empty non-terminal beside a wildcard", qname: "b.example.org.", qtype: dns.TypeA,
			ns: []string{
				soaLine,
				"*.example.org. 3600 IN NSEC a.b.example.org. TXT RRSIG NSEC",
			},
			wantCat: rrl.AllowanceNoData, wantName: "b.example.org.",
		},
		{
			name: "NODATA at the wildcard itself is named after it", qname: "*.example.org.", qtype: dns.TypeMX,
			ns: []string{
				soaLine,
				"*.example.org. 3600 IN NSEC www.example.org. A RRSIG NSEC",
			},
			wantCat: rrl.AllowanceNoData, wantName: "*.example.org.",
		},
		{
			name: "unsigned wildcard NODATA, caller's origin", qname: "x.example.org.", qtype: dns.TypeMX,
			ns: []string{soaLine}, origin: "example.org.",
			wantCat: rrl.AllowanceNoData, wantName: "*.example.org.",
		},
		{
			name: "referral with glue", qname: "www.child.example.org.", qtype: dns.TypeA,
			ns: []string{
				"child.example.org. 3600 IN NS ns1.child.example.org.",
				"child.example.org. 3600 IN NS ns2.child.example.org.",
			},
			extra: []string{
				"ns1.child.example.org. 3600 IN A 192.0.2.53",
				"ns2.child.example.org. 3600 IN AAAA 2001:db8::53",
			},
			wantCat: rrl.AllowanceReferral, wantName: "child.example.org.",
		},
		{
			name: "signed referral", qname: "www.child.example.org.", qtype: dns.TypeA,
			ns: []string{
				"child.example.org. 3600 IN DS 12345 13 2 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
				"child.example.org. 3600 IN NS ns1.child.example.org.",
			},
			wantCat: rrl.AllowanceReferral, wantName: "child.example.org.",
		},
		{
			name: "wildcard origin is ignored for a referral", qname: "www.child.example.org.", qtype: dns.TypeA,
			ns: []string{"child.example.org. 3600 IN NS ns1.child.example.org."}, origin: "example.org",
			wantCat: rrl.AllowanceReferral, wantName: "child.example.org.",
		},
		{
			name: "NXDOMAIN with SOA is named after the zone", qname: "nonexistent.example.org.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: []string{soaLine},
			wantCat: rrl.AllowanceNXDomain, wantName: "example.org.",
		},
		{
			name: "NXDOMAIN after a CNAME", qname: "alias.example.org.", qtype: dns.TypeA,
			rcode:  dns.RcodeNameError,
			answer: []string{"alias.example.org. 300 IN CNAME gone.example.org."}, ns: []string{soaLine},
			wantCat: rrl.AllowanceNXDomain, wantName: "example.org.",
		},
		{
			name: "NXDOMAIN without SOA, with NS", qname: "nonexistent.example.org.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: []string{"example.org. 300 IN NS ns1.example.org."},
			wantCat: rrl.AllowanceNXDomain, wantName: "example.org.",
		},
		{
			name: "NXDOMAIN with nothing falls back to the root", qname: "nonexistent.example.org.", qtype: dns.TypeA,
			rcode:   dns.RcodeNameError,
			wantCat: rrl.AllowanceNXDomain, wantName: ".",
		},
		{
			name: "SERVFAIL", qname: "www.example.org.", qtype: dns.TypeA,
			rcode:   dns.RcodeServerFailure,
			wantCat: rrl.AllowanceError,
		},
		{
			name: "REFUSED with answers is still an error", qname: "www.example.org.", qtype: dns.TypeA,
			rcode: dns.RcodeRefused, answer: []string{"www.example.org. 300 IN A 192.0.2.1"},
			wantCat: rrl.AllowanceError,
		},
		{
			name: "FORMERR", qname: "www.example.org.", qtype: dns.TypeA,
			rcode:   dns.RcodeFormatError,
			wantCat: rrl.AllowanceError,
		},
		{
			name: "BADCOOKIE (extended rcode)", qname: "www.example.org.", qtype: dns.TypeA,
			rcode:   dns.RcodeBadCookie,
			wantCat: rrl.AllowanceError,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, resp := response(tc.qname, tc.qtype, tc.rcode, rrs(t, tc.answer...), rrs(t, tc.ns...), rrs(t, tc.extra...))
			if tc.rcode > 0xF {
				resp.SetEdns0(1232, false) // an extended rcode travels in the OPT record
			}
			// Through the wire, as a server or a fuzzer would see it.
			packed, err := resp.Pack()
			if err != nil {
				t.Fatal(err)
			}
			wire := new(dns.Msg)
			if err := wire.Unpack(packed); err != nil {
				t.Fatal(err)
			}
			for _, m := range []*dns.Msg{resp, wire} {
				got := Tuple(req, m, tc.origin)
				if got.AllowanceCategory != tc.wantCat || got.SalientName != tc.wantName {
					t.Errorf("got %v %q, want %v %q", got.AllowanceCategory, got.SalientName, tc.wantCat, tc.wantName)
				}
				if got.Class != dns.ClassINET || got.Type != tc.qtype {
					t.Errorf("class/type = %d/%d, want %d/%d", got.Class, got.Type, dns.ClassINET, tc.qtype)
				}
			}
		})
	}
}

func TestTupleOddMessages(t *testing.T) {
	t.Run("nil response", func(t *testing.T) {
		if got := Tuple(nil, nil, ""); got.AllowanceCategory != rrl.AllowanceError {
			t.Errorf("got %+v", got)
		}
	})
	t.Run("question only in the request", func(t *testing.T) {
		req := new(dns.Msg).SetQuestion("www.example.org.", dns.TypeMX)
		resp := &dns.Msg{MsgHdr: dns.MsgHdr{Response: true, Rcode: dns.RcodeNameError}}
		got := Tuple(req, resp, "")
		if got.Type != dns.TypeMX || got.AllowanceCategory != rrl.AllowanceNXDomain || got.SalientName != "." {
			t.Errorf("got %+v", got)
		}
	})
	t.Run("cookie-only exchange", func(t *testing.T) {
		req := cookieQuery("x.", "0102030405060708")
		req.Question = nil
		resp := new(dns.Msg).SetReply(req)
		got := Tuple(req, resp, "")
		want := rrl.ResponseTuple{AllowanceCategory: rrl.AllowanceNoData, SalientName: "."}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
		if got := Tuple(nil, resp, ""); got != want {
			t.Errorf("without request: got %+v, want %+v", got, want)
		}
	})
	t.Run("nil records", func(t *testing.T) {
		req, resp := response("www.example.org.", dns.TypeA, 0, []dns.RR{nil}, []dns.RR{nil}, []dns.RR{nil})
		got := Tuple(req, resp, "")
		if got.AllowanceCategory != rrl.AllowanceNoData {
			t.Errorf("got %+v", got)
		}
	})
	t.Run("RRSIG with labels 0 (wildcard at the root)", func(t *testing.T) {
		req, resp := response("foo.", dns.TypeA, 0, rrs(t,
			"foo. 300 IN A 192.0.2.1",
			"foo. 3600 IN RRSIG A 13 0 3600 20300101000000 20200101000000 1 . c2ln"), nil, nil)
		if got := Tuple(req, resp, ""); got.SalientName != "*." {
			t.Errorf("got %+v", got)
		}
	})
	t.Run("RRSIG claiming more labels than the owner has", func(t *testing.T) {
		req, resp := response("foo.example.", dns.TypeA, 0, rrs(t,
			"foo.example. 300 IN A 192.0.2.1",
			"foo.example. 3600 IN RRSIG A 13 9 3600 20300101000000 20200101000000 1 example. c2ln"), nil, nil)
		if got := Tuple(req, resp, ""); got.SalientName != "foo.example." {
			t.Errorf("got %+v", got)
		}
	})
	t.Run("root wildcard origin", func(t *testing.T) {
		req, resp := response("foo.", dns.TypeA, 0, rrs(t, "foo. 300 IN A 192.0.2.1"), nil, nil)
		for _, o := range []string{".", "*."} {
			if got := Tuple(req, resp, o); got.SalientName != "*." {
				t.Errorf("origin %q: got %+v", o, got)
			}
		}
	})
}

func TestIsBelow(t *testing.T) {
	for _, tc := range []struct {
		name, origin string
		want         bool
	}{
		{"a.example.org.", "example.org.", true},
		{"a.Example.ORG", "example.org.", true},
		{"example.org.", "example.org.", false},
		{"aexample.org.", "example.org.", false},
		{"org.", "example.org.", false},
		{"a.", ".", true},
		{".", ".", false},
	} {
		if got := isBelow(tc.name, tc.origin); got != tc.want {
			t.Errorf("isBelow(%q, %q) = %v", tc.name, tc.origin, got)
		}
	}
}

// Tuple must not allocate: it runs for every response.
func TestTupleAllocations(t *testing.T) {
	cases := map[string]func() (*dns.Msg, *dns.Msg, string){
		"answer": func() (*dns.Msg, *dns.Msg, string) {
			req, resp := response("www.example.org.", dns.TypeA, 0, rrs(t, "www.example.org. 300 IN A 192.0.2.1"), nil, nil)
			return req, resp, ""
		},
		"NXDOMAIN": func() (*dns.Msg, *dns.Msg, string) {
			req, resp := response("x.example.org.", dns.TypeA, 3, nil, rrs(t, soaLine), nil)
			return req, resp, ""
		},
		"referral": func() (*dns.Msg, *dns.Msg, string) {
			req, resp := response("www.child.example.org.", dns.TypeA, 0, nil, rrs(t, "child.example.org. 3600 IN NS ns1.child.example.org."), nil)
			return req, resp, ""
		},
		"signed wildcard": func() (*dns.Msg, *dns.Msg, string) {
			req, resp := response("foo.bar.example.org.", dns.TypeA, 0, rrs(t, "foo.bar.example.org. 300 IN A 192.0.2.1", sigWild), nil, nil)
			return req, resp, ""
		},
		"unsigned wildcard": func() (*dns.Msg, *dns.Msg, string) {
			req, resp := response("foo.example.org.", dns.TypeA, 0, rrs(t, "foo.example.org. 300 IN A 192.0.2.1"), nil, nil)
			return req, resp, "Example.org"
		},
		"signed wildcard NODATA": func() (*dns.Msg, *dns.Msg, string) {
			req, resp := response("x.example.org.", dns.TypeMX, 0, nil, rrs(t, soaLine, "*.example.org. 3600 IN NSEC www.example.org. A RRSIG NSEC"), nil)
			return req, resp, ""
		},
	}
	for name, mk := range cases {
		req, resp, origin := mk()
		Tuple(req, resp, origin) // first sight of a wildcard builds its name
		if n := testing.AllocsPerRun(100, func() { Tuple(req, resp, origin) }); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
}

func BenchmarkTuple(b *testing.B) {
	req, resp := response("www.example.org.", dns.TypeA, 0, rrs(b, "www.example.org. 300 IN A 192.0.2.1"), rrs(b, "example.org. 300 IN NS ns1.example.org."), nil)
	b.ReportAllocs()
	for b.Loop() {
		Tuple(req, resp, "")
	}
}

func BenchmarkTupleSignedWildcard(b *testing.B) {
	req, resp := response("foo.bar.example.org.", dns.TypeA, 0, rrs(b, "foo.bar.example.org. 300 IN A 192.0.2.1", sigWild), nil, nil)
	b.ReportAllocs()
	for b.Loop() {
		Tuple(req, resp, "")
	}
}

// Past the bound of the table, wildcard names are still right.
func TestWildcardTableBound(t *testing.T) {
	defer func(n int) { maxWildcards = n }(maxWildcards)
	n := 0
	if m := wildcards.Load(); m != nil {
		n = len(*m)
	}
	maxWildcards = n + 2
	for i, origin := range []string{"a.bound.test.", "B.bound.test", "c.bound.test.", "d.bound.test."} {
		want := "*." + strings.ToLower(strings.TrimSuffix(origin, ".")) + "."
		for range 2 {
			if got := wildcardName(origin); got != want {
				t.Fatalf("%d: %q, want %q", i, got, want)
			}
		}
	}
	if m := wildcards.Load(); len(*m) > maxWildcards {
		t.Errorf("table grew to %d past its bound %d", len(*m), maxWildcards)
	}
}

// Answers synthesised from a DNAME are accounted under the DNAME's owner,
// however many names below it are asked.
func TestTupleDNAME(t *testing.T) {
	for _, qn := range []string{"a1.old.example.org.", "A2.b.Old.example.org."} {
		target := strings.TrimSuffix(strings.ToLower(qn), "old.example.org.") + "new.example.net."
		req, resp := response(qn, dns.TypeA, 0, rrs(t,
			"old.example.org. 300 IN DNAME new.example.net.",
			"old.example.org. 300 IN RRSIG DNAME 13 3 300 20300101000000 20200101000000 1 example.org. c2ln",
			qn+" 300 IN CNAME "+target,
			target+" 300 IN A 192.0.2.1"), nil, nil)
		if got := Tuple(req, resp, ""); got.AllowanceCategory != rrl.AllowanceAnswer || got.SalientName != "old.example.org." {
			t.Errorf("%s: %+v", qn, got)
		}
	}
	// A DNAME at the query name itself redirects nothing: the answer is the
	// DNAME record, accounted under the query name.
	req, resp := response("old.example.org.", dns.TypeDNAME, 0, rrs(t, "old.example.org. 300 IN DNAME new.example.net."), nil, nil)
	if got := Tuple(req, resp, ""); got.SalientName != "old.example.org." {
		t.Errorf("DNAME query: %+v", got)
	}
	// A DNAME elsewhere (further down a CNAME chain) does not rename the
	// query name's account.
	req, resp = response("www.example.org.", dns.TypeA, 0, rrs(t,
		"www.example.org. 300 IN CNAME x.old.example.com.",
		"old.example.com. 300 IN DNAME new.example.net.",
		"x.old.example.com. 300 IN CNAME x.new.example.net.",
		"x.new.example.net. 300 IN A 192.0.2.1"), nil, nil)
	if got := Tuple(req, resp, ""); got.SalientName != "www.example.org." {
		t.Errorf("DNAME down the chain: %+v", got)
	}
}

// TestTupleLeavesSizeUnknown: Tuple does not measure the message, which
// would cost every caller a walk over it; the caller sets Size when the
// RRL needs it.
func TestTupleLeavesSizeUnknown(t *testing.T) {
	req, resp := response("www.example.org.", dns.TypeTXT, 0,
		rrs(t, "www.example.org. 300 IN TXT \""+strings.Repeat("x", 200)+"\""), nil, nil)
	if got := Tuple(req, resp, "").Size; got != 0 {
		t.Errorf("Size %d, want 0 (unknown)", got)
	}
}
