package miekgrrl

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Request decodes the option once and gives what the replies need: its
// state, whether it is malformed, the reply with the request's young server
// cookie as it came or a fresh one, and the slip reply.
func TestRequestCookie(t *testing.T) {
	clock := newTestClock()
	cookies := NewCookies([16]byte{1})
	client := netip.MustParseAddr("192.0.2.1")
	young := issuedCookie(cookies, client, clock.now().Add(-10*time.Minute))
	stale := issuedCookie(cookies, client, clock.now().Add(-40*time.Minute))
	fresh := issuedCookie(cookies, client, clock.now())
	answer := new(dns.Msg).SetReply(query("www.example.org."))
	for _, tc := range []struct {
		name      string
		cookie    string
		state     CookieState
		malformed bool
		reply     string // the reply's cookie
		slip      int    // the slip reply's rcode
	}{
		{"none", "", CookieNone, false, "", dns.RcodeSuccess},
		{"client only", testClientCookie, CookieClientOnly, false, fresh, dns.RcodeBadCookie},
		{"young", young, CookieValid, false, young, dns.RcodeBadCookie},
		{"stale", stale, CookieValid, false, fresh, dns.RcodeBadCookie},
		{"wrong", testClientCookie + "01000000" + stale[24:32] + "0000000000000000", CookieBad, false, fresh, dns.RcodeBadCookie},
		{"malformed", "0102030405", CookieBad, true, "", dns.RcodeSuccess},
	} {
		req := cookieQuery("www.example.org.", tc.cookie)
		rc := cookies.Request(req, client, clock.now)
		if rc.State() != tc.state || rc.Malformed() != tc.malformed {
			t.Errorf("%s: state %v, malformed %v; want %v, %v", tc.name, rc.State(), rc.Malformed(), tc.state, tc.malformed)
		}
		out := rc.Reply(answer, true)
		if got := respCookie(out); got != tc.reply {
			t.Errorf("%s: reply cookie %q, want %q", tc.name, got, tc.reply)
		}
		if tc.reply == "" && out != answer {
			t.Errorf("%s: a reply without a cookie is a copy", tc.name)
		}
		if answer.IsEdns0() != nil {
			t.Fatalf("%s: the handler's message was changed", tc.name)
		}
		slip := rc.SlipReply(answer)
		if slip.Rcode != tc.slip || slip.Truncated == (tc.slip == dns.RcodeBadCookie) {
			t.Errorf("%s: slip rcode %d TC %v, want rcode %d", tc.name, slip.Rcode, slip.Truncated, tc.slip)
		}
		if tc.slip == dns.RcodeBadCookie && respCookie(slip) != fresh {
			t.Errorf("%s: BADCOOKIE cookie %q, want a fresh one %q", tc.name, respCookie(slip), fresh)
		}
	}
}

// Request reads the clock only for a request with a COOKIE option, and a
// nil Cookies makes no cookie.
func TestRequestCookieClockAndNil(t *testing.T) {
	var reads int
	now := func() time.Time { reads++; return time.Now() }
	client := netip.MustParseAddr("192.0.2.1")
	NewCookies([16]byte{1}).Request(cookieQuery("a.", ""), client, now)
	if reads != 0 {
		t.Errorf("clock read %d times without a cookie", reads)
	}
	var none *Cookies
	rc := none.Request(cookieQuery("a.", testClientCookie), client, now)
	if reads != 1 || rc.State() != CookieClientOnly {
		t.Errorf("clock read %d times, state %v; want 1, CookieClientOnly", reads, rc.State())
	}
	answer := new(dns.Msg).SetReply(query("a."))
	if rc.Reply(answer, false) != answer || rc.SlipReply(answer).Rcode == dns.RcodeBadCookie {
		t.Error("a nil Cookies made a cookie")
	}
}

// TooLargeReply is TC=1, never BADCOOKIE, with a fresh server cookie for a
// request with a client cookie and none for one without.
func TestRequestCookieTooLargeReply(t *testing.T) {
	clock := newTestClock()
	cookies := NewCookies([16]byte{1})
	client := netip.MustParseAddr("192.0.2.1")
	fresh := issuedCookie(cookies, client, clock.now())
	for cookie, want := range map[string]string{testClientCookie: fresh, "": ""} {
		req := cookieQuery("www.example.org.", cookie)
		rc := cookies.Request(req, client, clock.now)
		m := rc.TooLargeReply(new(dns.Msg).SetReply(req))
		if !m.Truncated || m.Rcode != dns.RcodeSuccess || respCookie(m) != want {
			t.Errorf("cookie %q: TC %v, rcode %d, cookie %q; want TC, NOERROR, cookie %q", cookie, m.Truncated, m.Rcode, respCookie(m), want)
		}
	}
}
