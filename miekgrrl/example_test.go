package miekgrrl_test

import (
	"crypto/rand"
	"fmt"
	"net/netip"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/dnsrrl/rrl/miekgrrl"
	"github.com/miekg/dns"
)

func ExampleTuple() {
	req := new(dns.Msg).SetQuestion("nothing-here.example.org.", dns.TypeA)
	resp := new(dns.Msg).SetRcode(req, dns.RcodeNameError)
	soa, _ := dns.NewRR("example.org. 300 IN SOA ns1.example.org. hostmaster.example.org. 1 7200 3600 1209600 300")
	resp.Ns = []dns.RR{soa}

	t := miekgrrl.Tuple(req, resp, "")
	fmt.Println(t.AllowanceCategory, t.SalientName)

	// An unsigned wildcard answer, as the handler reports it.
	req = new(dns.Msg).SetQuestion("random-123.example.org.", dns.TypeA)
	resp = new(dns.Msg).SetReply(req)
	a, _ := dns.NewRR("random-123.example.org. 300 IN A 192.0.2.1")
	resp.Answer = []dns.RR{a}
	t = miekgrrl.Tuple(req, resp, "example.org.")
	fmt.Println(t.AllowanceCategory, t.SalientName)
	// Output:
	// AllowanceNXDomain example.org.
	// AllowanceAnswer *.example.org.
}

func ExampleSlipReply() {
	req := new(dns.Msg).SetQuestion("www.example.org.", dns.TypeA)
	resp := new(dns.Msg).SetReply(req)
	a, _ := dns.NewRR("www.example.org. 300 IN A 192.0.2.1")
	resp.Answer = []dns.RR{a}

	slip := miekgrrl.SlipReply(req, resp, nil, netip.Addr{}, time.Now())
	fmt.Println(slip.Truncated, len(slip.Question), len(slip.Answer))
	// Output: true 1 0
}

func ExampleCookies() {
	// A random secret, or the one shared by every server of an anycast set.
	var secret [16]byte
	rand.Read(secret[:])
	cookies := miekgrrl.NewCookies(secret)
	client := netip.MustParseAddr("192.0.2.10")
	now := time.Now()

	// A client's first query carries only its client cookie.
	req := new(dns.Msg).SetQuestion("www.example.org.", dns.TypeA)
	req.SetEdns0(1232, false)
	req.IsEdns0().Option = append(req.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0011223344556677"})
	fmt.Println(cookies.Check(req, client, now))

	// The response gives it a server cookie...
	resp := new(dns.Msg).SetReply(req)
	cookies.AddServerCookie(req, resp, client, now)

	// ...which the client sends back with its next query.
	req.IsEdns0().Option = resp.IsEdns0().Option
	fmt.Println(cookies.Check(req, client, now.Add(time.Minute)))
	fmt.Println(cookies.Check(req, client, now.Add(2*time.Hour)))
	// Output:
	// CookieClientOnly
	// CookieValid
	// CookieBad
}

func ExampleCookies_Request() {
	var secret [16]byte
	rand.Read(secret[:])
	cookies := miekgrrl.NewCookies(secret)
	client := netip.MustParseAddr("192.0.2.10")

	// A query with a client cookie, as a server without Middleware gets it.
	req := new(dns.Msg).SetQuestion("www.example.org.", dns.TypeA)
	req.SetEdns0(1232, false)
	req.IsEdns0().Option = append(req.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0011223344556677"})

	// The option is decoded once, for the request and its replies.
	rc := cookies.Request(req, client, time.Now)
	if rc.Malformed() {
		return // answer miekgrrl.MalformedCookieReply(req)
	}
	fmt.Println(rc.State()) // proof of the source address when CookieValid

	resp := new(dns.Msg).SetReply(req)
	out := rc.Reply(resp, true) // to send, over UDP; resp is left as it was
	fmt.Println(len(out.IsEdns0().Option[0].(*dns.EDNS0_COOKIE).Cookie), resp.IsEdns0() == nil)

	// On Slip: BADCOOKIE with a fresh server cookie, since it sent a cookie.
	fmt.Println(dns.RcodeToString[rc.SlipReply(resp).Rcode])
	// Output:
	// CookieClientOnly
	// 48 true
	// BADCOOKIE
}

func ExampleMiddleware() {
	cfg := rrl.NewConfig()
	cfg.SetValue("responses-per-second", "10")
	cfg.SetValue("slip-ratio", "2")
	cfg.SetValue("requests-per-second", "20")         // refused before the zone is asked
	cfg.SetValue("proven-requests-per-second", "100") // over TCP, or with a valid server cookie
	limiter := rrl.NewRRL(cfg)

	var secret [16]byte
	rand.Read(secret[:]) // or the secret shared by every server of an anycast set
	zone := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg).SetReply(r)
		// ... answer from the zone; for an answer from a wildcard, say so:
		// miekgrrl.SetWildcardOrigin(w, "example.org.")
		w.WriteMsg(m)
	})
	h := miekgrrl.Middleware(limiter, zone, miekgrrl.Options{
		Cookies: miekgrrl.NewCookies(secret),
		OnDecision: func(d miekgrrl.Decision) {
			switch {
			case d.RequestDropped: // the zone never saw it
				fmt.Println(d.Client, "over its request limit")
			case d.Action != rrl.Send:
				fmt.Println(d.Client, d.Action, d.Tuple.SalientName)
			}
		},
	})
	srv := &dns.Server{Addr: "127.0.0.1:5300", Net: "udp", Handler: h, MsgAcceptFunc: miekgrrl.AcceptCookieOnly}
	_ = srv // srv.ListenAndServe()
}
