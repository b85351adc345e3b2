package miekgrrl

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// roundTrip packs and unpacks m, as the client would see it.
func roundTrip(t *testing.T, m *dns.Msg) *dns.Msg {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatalf("pack: %v", err)
	}
	out := new(dns.Msg)
	if err := out.Unpack(b); err != nil {
		t.Fatalf("unpack: %v", err)
	}
	return out
}

func TestSlipReplyTC(t *testing.T) {
	client := netip.MustParseAddr("192.0.2.1")
	now := time.Unix(1700000000, 0)
	answer := rrs(t, "www.example.org. 300 IN A 192.0.2.1")
	for _, tc := range []struct {
		name      string
		rcode     int
		withOPT   bool
		cookie    string
		cookies   *Cookies
		wantRcode int
	}{
		{name: "answer, no EDNS", wantRcode: dns.RcodeSuccess},
		{name: "answer, EDNS", withOPT: true, wantRcode: dns.RcodeSuccess},
		{name: "NXDOMAIN keeps its rcode", rcode: dns.RcodeNameError, withOPT: true, wantRcode: dns.RcodeNameError},
		{name: "client cookie but no Cookies: TC", withOPT: true, cookie: "0102030405060708", wantRcode: dns.RcodeSuccess},
		{name: "Cookies but no client cookie: TC", withOPT: true, cookies: NewCookies([16]byte{1}), wantRcode: dns.RcodeSuccess},
		{name: "Cookies, malformed cookie: TC", withOPT: true, cookie: "0102", cookies: NewCookies([16]byte{1}), wantRcode: dns.RcodeSuccess},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := new(dns.Msg).SetQuestion("www.example.org.", dns.TypeA)
			req.Id, req.CheckingDisabled = 4242, true
			if tc.withOPT {
				req = cookieQuery("www.example.org.", tc.cookie)
				req.Id = 4242
				req.IsEdns0().SetDo()
			}
			resp := new(dns.Msg).SetRcode(req, tc.rcode)
			resp.Authoritative = true
			resp.Answer = answer
			resp.Ns = rrs(t, soaLine)

			got := roundTrip(t, SlipReply(req, resp, tc.cookies, client, now))
			if !got.Response || !got.Truncated || got.Authoritative {
				t.Errorf("flags QR=%v TC=%v AA=%v, want QR TC !AA", got.Response, got.Truncated, got.Authoritative)
			}
			if got.Id != req.Id || got.RecursionDesired != req.RecursionDesired || got.CheckingDisabled != req.CheckingDisabled {
				t.Errorf("header not copied from the request: %+v", got.MsgHdr)
			}
			if got.Rcode != tc.wantRcode {
				t.Errorf("rcode %s, want %s", dns.RcodeToString[got.Rcode], dns.RcodeToString[tc.wantRcode])
			}
			if len(got.Question) != 1 || got.Question[0] != req.Question[0] {
				t.Errorf("question %v", got.Question)
			}
			if len(got.Answer)+len(got.Ns) != 0 {
				t.Errorf("records in answer or authority: %v %v", got.Answer, got.Ns)
			}
			opt := got.IsEdns0()
			if tc.withOPT != (opt != nil) || len(got.Extra) != map[bool]int{true: 1}[tc.withOPT] {
				t.Fatalf("additional %v, want an OPT record only if the request had one", got.Extra)
			}
			if opt != nil && (len(opt.Option) != 0 || opt.UDPSize() != defaultUDPSize || !opt.Do()) {
				t.Errorf("OPT %v: want no options, size %d, DO copied", opt, defaultUDPSize)
			}
		})
	}
}

func TestSlipReplyTCKeepsHandlersOPT(t *testing.T) {
	req := cookieQuery("www.example.org.", "")
	resp := new(dns.Msg).SetReply(req)
	resp.SetEdns0(1400, false)
	resp.IsEdns0().Option = append(resp.IsEdns0().Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID, Nsid: "6869"})
	got := SlipReply(req, resp, nil, netip.Addr{}, time.Time{})
	opt := got.IsEdns0()
	if opt == nil || opt.UDPSize() != 1400 || len(opt.Option) != 0 {
		t.Errorf("OPT %v, want size 1400 and no options", opt)
	}
}

func TestSlipReplyBadCookie(t *testing.T) {
	c := NewCookies([16]byte{9})
	client := netip.MustParseAddr("2001:db8::1")
	now := time.Unix(1700000000, 0)
	for _, cookie := range []string{
		"0102030405060708", // client cookie only
		"0102030405060708" + strings.Repeat("ab", 16),           // someone else's server cookie
		"0102030405060708" + "010000005cf79f111f8130c3eee29480", // ours, but for another client
	} {
		req := cookieQuery("www.example.org.", cookie)
		req.RecursionDesired = false
		resp := new(dns.Msg).SetRcode(req, dns.RcodeNameError)
		resp.Authoritative = true
		resp.Ns = rrs(t, soaLine)

		got := roundTrip(t, SlipReply(req, resp, c, client, now))
		if got.Rcode != dns.RcodeBadCookie {
			t.Errorf("rcode %d, want BADCOOKIE (23)", got.Rcode)
		}
		if got.Truncated || got.Authoritative || !got.Response || got.Id != req.Id {
			t.Errorf("header %+v", got.MsgHdr)
		}
		if len(got.Question) != 1 || len(got.Answer)+len(got.Ns) != 0 {
			t.Errorf("sections: %v", got)
		}
		sent := respCookie(got)
		if !strings.HasPrefix(sent, "0102030405060708") || len(sent) != 48 {
			t.Fatalf("cookie %q: want the client cookie and a 16-byte server cookie", sent)
		}
		if st := c.Check(cookieQuery("www.example.org.", sent), client, now); st != CookieValid {
			t.Errorf("the server cookie sent does not validate: %v", st)
		}
	}
}

func TestSlipReplyOddInput(t *testing.T) {
	c := NewCookies([16]byte{1})
	client := netip.MustParseAddr("192.0.2.1")
	if SlipReply(nil, nil, c, client, time.Time{}) != nil {
		t.Error("nil in, not nil out")
	}
	// No request: built from the response.
	resp := new(dns.Msg).SetRcode(new(dns.Msg).SetQuestion("a.example.", dns.TypeA), dns.RcodeNameError)
	got := SlipReply(nil, resp, c, client, time.Time{})
	if !got.Truncated || got.Rcode != dns.RcodeNameError || len(got.Question) != 1 || got.Id != resp.Id {
		t.Errorf("from response only: %v", got)
	}
	// Cookie-only exchange: no question, BADCOOKIE.
	req := cookieQuery("x.", "0102030405060708")
	req.Question = nil
	got = roundTrip(t, SlipReply(req, nil, c, client, time.Time{}))
	if got.Rcode != dns.RcodeBadCookie || len(got.Question) != 0 {
		t.Errorf("cookie-only: %v", got)
	}
	// Without Cookies, a TC reply without question.
	got = roundTrip(t, SlipReply(req, nil, nil, client, time.Time{}))
	if !got.Truncated || len(got.Question) != 0 {
		t.Errorf("cookie-only without Cookies: %v", got)
	}
}

// A slip reply to a signed request ends with a TSIG record for the same key,
// for the server to sign.
func TestSlipReplyTSIG(t *testing.T) {
	now := time.Unix(1700000000, 0)
	c := NewCookies([16]byte{1})
	client := netip.MustParseAddr("192.0.2.1")
	for _, cc := range []string{"", "0102030405060708"} {
		req := cookieQuery("www.example.org.", cc)
		req.SetTsig(tsigKey, dns.HmacSHA256, 200, now.Unix()-5)
		resp := new(dns.Msg).SetReply(req)
		s := SlipReply(req, resp, c, client, now)
		ts := s.IsTsig()
		if ts == nil || ts.Hdr.Name != tsigKey || ts.Algorithm != dns.HmacSHA256 || ts.Fudge != 200 ||
			ts.TimeSigned != uint64(now.Unix()) || ts.OrigId != req.Id || ts.Hdr.Class != dns.ClassANY {
			t.Fatalf("cookie %q: TSIG %v", cc, ts)
		}
		if s.IsEdns0() == nil || (cc != "") != (s.Rcode == dns.RcodeBadCookie) {
			t.Errorf("cookie %q: reply %v", cc, s)
		}
		if _, _, err := dns.TsigGenerate(s, tsigSecret, "", false); err != nil {
			t.Errorf("cookie %q: cannot be signed: %v", cc, err)
		}
	}
	// The handler's TSIG record, with its error, wins over the request's.
	req := query("www.example.org.")
	req.SetTsig(tsigKey, dns.HmacSHA256, 300, now.Unix())
	resp := new(dns.Msg).SetReply(req)
	resp.SetTsig("other.", dns.HmacSHA512, 100, now.Unix())
	resp.IsTsig().Error = dns.RcodeBadTime
	if ts := SlipReply(req, resp, nil, client, now).IsTsig(); ts == nil || ts.Hdr.Name != "other." || ts.Algorithm != dns.HmacSHA512 || ts.Error != dns.RcodeBadTime {
		t.Errorf("TSIG %v", ts)
	}
	// Unsigned request, no TSIG.
	if SlipReply(query("www.example.org."), resp, nil, client, now).IsTsig() != nil {
		t.Error("TSIG in a slip reply to an unsigned request")
	}
}

// Over the wire: a client with the key gets signed slip replies, TC=1 and
// BADCOOKIE, and verifies them.
func TestIntegrationSlipTSIG(t *testing.T) {
	lim := newLimiter(t, newTestClock(), "responses-per-second", "1", "slip-ratio", "1")
	addr := startTSIGServer(t, Middleware(lim, signingHandler, Options{Cookies: NewCookies([16]byte{1})}))
	if r := tsigExchange(t, addr, ""); len(r.Answer) != 1 || r.IsTsig() == nil {
		t.Fatalf("first query: %v", r)
	}
	r := tsigExchange(t, addr, "")
	if !r.Truncated || r.IsTsig() == nil || r.IsTsig().MACSize == 0 {
		t.Errorf("TC reply not signed: %v", r)
	}
	r = tsigExchange(t, addr, "0102030405060708")
	if r.Rcode != dns.RcodeBadCookie || r.IsTsig() == nil || r.IsTsig().MACSize == 0 || len(respCookie(r)) != 48 {
		t.Errorf("BADCOOKIE reply not signed: %v", r)
	}
}
