package main

import (
	"strings"
	"testing"

	"github.com/dnsrrl/rrl"
	"github.com/dnsrrl/rrl/miekgrrl"
	"github.com/miekg/dns"
)

// Each kind of response of the example zone is classified as the README
// says, over the wire.
func TestZoneResponses(t *testing.T) {
	_, port, rec := startTestServer(t)
	c := &dns.Client{Net: "tcp"} // TCP: never limited, so every query is answered
	for _, tc := range []struct {
		qname    string
		qtype    uint16
		dnssec   bool
		cat      rrl.AllowanceCategory
		name     string
		rcode    int
		hasRRSIG bool
	}{
		{"www.example.org.", dns.TypeA, false, rrl.AllowanceAnswer, "www.example.org.", dns.RcodeSuccess, false},
		{"www.example.org.", dns.TypeMX, false, rrl.AllowanceNoData, "www.example.org.", dns.RcodeSuccess, false},
		{"nope.example.org.", dns.TypeA, false, rrl.AllowanceNXDomain, "example.org.", dns.RcodeNameError, false},
		{"host.sub.example.org.", dns.TypeA, false, rrl.AllowanceReferral, "sub.example.org.", dns.RcodeSuccess, false},
		{"a.wild.example.org.", dns.TypeTXT, false, rrl.AllowanceAnswer, "*.wild.example.org.", dns.RcodeSuccess, false},
		{"b.c.wild.example.org.", dns.TypeTXT, true, rrl.AllowanceAnswer, "*.wild.example.org.", dns.RcodeSuccess, true},
		{"a.wild.example.org.", dns.TypeA, false, rrl.AllowanceNoData, "*.wild.example.org.", dns.RcodeSuccess, false},
		{"wild.example.org.", dns.TypeTXT, false, rrl.AllowanceNoData, "wild.example.org.", dns.RcodeSuccess, false},
		{"signed.example.org.", dns.TypeA, true, rrl.AllowanceAnswer, "signed.example.org.", dns.RcodeSuccess, true},
		{"www.example.com.", dns.TypeA, false, rrl.AllowanceError, "", dns.RcodeRefused, false},
	} {
		q := new(dns.Msg).SetQuestion(tc.qname, tc.qtype)
		q.SetEdns0(1232, tc.dnssec)
		n := rec.len()
		r, _, err := c.Exchange(q, "127.0.0.1:"+port)
		if err != nil {
			t.Fatalf("%s: %v", tc.qname, err)
		}
		d := rec.since(n)
		if len(d) != 1 || d[0].Tuple.AllowanceCategory != tc.cat || d[0].Tuple.SalientName != tc.name {
			t.Errorf("%s %s: decisions %+v, want %v %q", tc.qname, dns.TypeToString[tc.qtype], d, tc.cat, tc.name)
		}
		if r.Rcode != tc.rcode {
			t.Errorf("%s: rcode %d", tc.qname, r.Rcode)
		}
		hasSig := false
		for _, rr := range r.Answer {
			if sig, ok := rr.(*dns.RRSIG); ok {
				hasSig = true
				// The RRSIG alone tells the wildcard: check it does.
				if got := miekgrrl.Tuple(q, r, ""); got.SalientName != tc.name {
					t.Errorf("%s: from the RRSIG (labels %d) alone: %q", tc.qname, sig.Labels, got.SalientName)
				}
			}
		}
		if hasSig != tc.hasRRSIG {
			t.Errorf("%s: RRSIG %v, want %v", tc.qname, hasSig, tc.hasRRSIG)
		}
	}
}

// A cookie-only query (no question) gets a server cookie.
func TestCookieOnlyQuery(t *testing.T) {
	_, port, _ := startTestServer(t)
	q := new(dns.Msg)
	q.Id = dns.Id()
	q.SetEdns0(1232, false)
	q.IsEdns0().Option = append(q.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})
	r, _, err := (&dns.Client{}).Exchange(q, "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	var cookie string
	if opt := r.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if c, ok := o.(*dns.EDNS0_COOKIE); ok {
				cookie = c.Cookie
			}
		}
	}
	if r.Rcode != dns.RcodeSuccess || len(cookie) != 48 || cookie[:16] != "0102030405060708" {
		t.Errorf("rcode %d, cookie %q", r.Rcode, cookie)
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-port", "5301", "-secret", "e5e973e5a6b2a43f48e7dc849e37bfcf", "-rate", "2.5"})
	if err != nil || o.addr != "127.0.0.1:5301" || o.secret[0] != 0xe5 || o.rate != "2.5" {
		t.Errorf("%+v %v", o, err)
	}
	if _, err := parseFlags([]string{"-secret", "abc"}); err == nil {
		t.Error("short secret accepted")
	}
	if o, _ := parseFlags(nil); o.addr != "127.0.0.1:5300" || o.secret == [16]byte{} || o.requests != "0" || o.proven != "" {
		t.Errorf("defaults %+v", o)
	}
	o, err = parseFlags([]string{"-rate", "0.5", "-requests", "20", "-proven-requests", "100"})
	if err != nil || o.rate != "0.5" || o.requests != "20" || o.proven != "100" {
		t.Errorf("rates %+v %v", o, err)
	}
}

// The limiter's settings go to it as written: what its grammar refuses
// (exponents, signs, a negative or not-a-number proven allowance, which
// must not quietly mean "the default") is refused with its error, which
// names the keyword.
func TestParseFlagsOneGrammar(t *testing.T) {
	for _, tc := range []struct{ flag, value, keyword string }{
		{"-rate", "1e3", "responses-per-second"},
		{"-rate", "0.0000001", "responses-per-second"},
		{"-requests", "+5", "requests-per-second"},
		{"-proven-requests", "-5", "proven-requests-per-second"},
		{"-proven-requests", "NaN", "proven-requests-per-second"},
		{"-slip", "0x2", "slip-ratio"},
		{"-window", " 15", "window"},
	} {
		_, err := parseFlags([]string{tc.flag, tc.value})
		if err == nil || !strings.Contains(err.Error(), tc.keyword) {
			t.Errorf("%s %q: error %v, want one naming %s", tc.flag, tc.value, err, tc.keyword)
		}
	}
}

// The settings logged at start are the limiter's: proven-requests-per-second
// shows the requests-per-second it defaults to, and that it shares its
// account until it is set.
func TestSettingsReadBack(t *testing.T) {
	s, _, _ := startTestServer(t, func(o *options) { o.requests = "2" })
	want := "responses-per-second 1, slip-ratio 1, window 15, requests-per-second 2, proven-requests-per-second 2 (the requests-per-second account, shared)"
	if s.settings != want {
		t.Errorf("settings %q, want %q", s.settings, want)
	}
	s, _, _ = startTestServer(t, func(o *options) { o.requests, o.proven = "2", "2" })
	want = "responses-per-second 1, slip-ratio 1, window 15, requests-per-second 2, proven-requests-per-second 2"
	if s.settings != want {
		t.Errorf("proven set: settings %q, want %q", s.settings, want)
	}
}

// A query with neither question nor cookie is malformed.
func TestNoQuestionNoCookie(t *testing.T) {
	_, port, _ := startTestServer(t)
	q := new(dns.Msg)
	q.Id = dns.Id()
	q.SetEdns0(1232, false)
	r, _, err := (&dns.Client{}).Exchange(q, "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	if r.Rcode != dns.RcodeFormatError {
		t.Errorf("rcode %d, want FORMERR", r.Rcode)
	}
}
