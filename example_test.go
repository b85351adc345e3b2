package rrl_test

import (
	"fmt"
	"log"
	"net"
	"net/netip"
	"time"

	"github.com/dnsrrl/rrl"
)

// A server builds one RRL from its configuration, then asks Debit about
// every response before sending it.
func Example() {
	cfg := rrl.NewConfig()
	for kw, v := range map[string]string{"responses-per-second": "2", "slip-ratio": "2"} {
		if err := cfg.SetValue(kw, v); err != nil {
			log.Fatal(err)
		}
	}
	limiter := rrl.NewRRL(cfg)

	client := &net.UDPAddr{IP: net.ParseIP("192.0.2.1"), Port: 33333}
	clientSentCookie := false
	response := &rrl.ResponseTuple{
		Class:             1, // IN
		Type:              1, // A
		AllowanceCategory: rrl.NewAllowanceCategory(0, 1, 0),
		SalientName:       "www.example.com.",
	}
	for range 5 {
		switch action, _, _ := limiter.Debit(client, response); action {
		case rrl.Send:
			fmt.Println("send the response")
		case rrl.Slip:
			if clientSentCookie {
				fmt.Println("send BADCOOKIE with a fresh server cookie")
			} else {
				fmt.Println("send a truncated reply: TC=1, the question only")
			}
		case rrl.Drop:
			fmt.Println("send nothing")
		}
	}
	// Output:
	// send the response
	// send the response
	// send a truncated reply: TC=1, the question only
	// send nothing
	// send a truncated reply: TC=1, the question only
}

// SetValue refuses bad values with an error that names the keyword, the
// value and what is allowed.
func ExampleConfig_SetValue() {
	cfg := rrl.NewConfig()
	fmt.Println(cfg.SetValue("window", "0"))
	fmt.Println(cfg.SetValue("nxdomains-per-second", "-3"))
	fmt.Println(cfg.SetValue("exempt-clients", "192.0.2.0/24, 2001:db8::/32"))
	// Output:
	// rrl: window "0": want a whole number (digits only) from 1 to 3600
	// rrl: nxdomains-per-second "-3": want a plain decimal number (such as 5 or 0.5), 0 (off) or from 0.01 to 1000000
	// <nil>
}

// An observer hears once when an account starts being limited and once
// when it stops, so a server can log episodes rather than packets.
func ExampleConfig_SetObserver() {
	cfg := rrl.NewConfig()
	cfg.SetValue("responses-per-second", "1")
	cfg.SetObserver(func(e rrl.Event) {
		verb := "stop limiting"
		if e.Started {
			verb = "limit"
		}
		fmt.Printf("%s responses to %s for %s\n", verb, e.Network, e.Tuple.SalientName)
	})
	limiter := rrl.NewRRL(cfg)
	src := netip.MustParseAddr("2001:db8:1:2::53")
	nx := &rrl.ResponseTuple{AllowanceCategory: rrl.AllowanceNXDomain, SalientName: "example.org."}
	for range 100 {
		limiter.DebitAddr(src, true, nx)
	}
	// Output:
	// limit responses to 2001:db8:1::/56 for example.org.
}

// A ManualClock runs limiters on a time of their own: here, the
// timestamps of captured responses, replayed faster than they came. A
// burst of ten in one second is limited; ten seconds later, the victim's
// account has paid its debt, and the next response is sent.
func ExampleManualClock() {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := rrl.NewManualClock(start)
	cfg := rrl.NewConfig()
	cfg.SetValue("responses-per-second", "2")
	cfg.SetValue("slip-ratio", "0")
	cfg.SetClock(clock)
	limiter := rrl.NewRRL(cfg)
	victim := netip.MustParseAddr("192.0.2.7")
	answer := &rrl.ResponseTuple{Class: 1, Type: 16, AllowanceCategory: rrl.AllowanceAnswer, SalientName: "example.org."}
	debit := func(at time.Duration) {
		clock.Set(start.Add(at))
		act, _, _ := limiter.DebitAddr(victim, true, answer)
		fmt.Printf("%v %v\n", at, act)
	}
	for i := range 10 {
		debit(time.Duration(i) * 100 * time.Millisecond)
	}
	debit(11 * time.Second)
	// Output:
	// 0s Send
	// 100ms Send
	// 200ms Drop
	// 300ms Drop
	// 400ms Drop
	// 500ms Drop
	// 600ms Drop
	// 700ms Drop
	// 800ms Drop
	// 900ms Drop
	// 11s Send
}

// A program that reads rrl settings with keywords of its own beside the
// core's names the one most likely meant when it meets a keyword it does
// not know.
func ExampleSuggest() {
	keywords := append(rrl.Keywords(), "report-only", "cookie-secret")
	for _, kw := range []string{"responses-per-secnd", "cookie_secret", "Window", "frobnicate"} {
		if s := rrl.Suggest(kw, keywords); s != "" {
			fmt.Printf("%s: did you mean %s?\n", kw, s)
		} else {
			fmt.Printf("%s: no keyword is near\n", kw)
		}
	}
	// Output:
	// responses-per-secnd: did you mean responses-per-second?
	// cookie_secret: did you mean cookie-secret?
	// Window: did you mean window?
	// frobnicate: no keyword is near
}

// An operator's tool asks Top for the accounts nearest their allowance:
// the first call arms the watch and says how long until it has counted a
// whole second, later calls answer at once.
func ExampleRRL_Top() {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := rrl.NewManualClock(start)
	cfg := rrl.NewConfig()
	cfg.SetValue("responses-per-second", "10")
	cfg.SetClock(clock)
	limiter := rrl.NewRRL(cfg)
	_, wait := limiter.Top(10) // arms the watch
	fmt.Println("wait", wait)
	clock.Set(start.Add(wait))
	www := &rrl.ResponseTuple{Class: 1, Type: 1, AllowanceCategory: rrl.AllowanceAnswer, SalientName: "www.example.org."}
	for i := range 50 { // 25 responses a second to each of two networks, for two seconds
		clock.Set(start.Add(wait + time.Duration(i)*40*time.Millisecond))
		limiter.DebitAddr(netip.MustParseAddr("192.0.2.7"), true, www)
		limiter.DebitAddr(netip.MustParseAddr("198.51.100.7"), true, www)
		if i%5 == 0 {
			limiter.DebitAddr(netip.MustParseAddr("203.0.113.7"), true, www) // 5 a second
		}
	}
	clock.Set(start.Add(wait + 2*time.Second))
	top, _ := limiter.Top(3)
	for _, a := range top {
		fmt.Printf("%v %v %s: %.0f a second, %.1f times the allowance, limited %v\n",
			a.Network, a.LimitKind, a.Tuple.SalientName, a.Rate, a.Share, a.Debt > 0)
	}
	// Output:
	// wait 1s
	// 192.0.2.0/24 responses-per-second www.example.org.: 25 a second, 2.5 times the allowance, limited true
	// 198.51.100.0/24 responses-per-second www.example.org.: 25 a second, 2.5 times the allowance, limited true
	// 203.0.113.0/24 responses-per-second www.example.org.: 5 a second, 0.5 times the allowance, limited false
}
