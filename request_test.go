package rrl

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"
)

// requests returns the verdicts of n DebitRequests, as a string of S(end)
// and D(rop).
func requests(r *RRL, src net.Addr, validCookie bool, n int) string {
	b := make([]byte, n)
	for i := range b {
		a, _ := r.DebitRequest(src, validCookie)
		b[i] = "SDT"[a]
	}
	return string(b)
}

// burst is n requests from src, with or without a valid cookie, and the
// verdicts they must get (len(want) of them, S or D).
type burst struct {
	what        string
	src         net.Addr
	validCookie bool
	want        string
}

func checkBursts(t *testing.T, r *RRL, bursts ...burst) {
	t.Helper()
	for _, b := range bursts {
		if got := requests(r, b.src, b.validCookie, len(b.want)); got != b.want {
			t.Errorf("%s: %s, want %s", b.what, got, b.want)
		}
	}
}

// TestDebitRequestLimitsANetwork: a network's requests are refused, before
// any work, once it has spent a second's credit, over every transport and
// with a valid cookie too; other networks keep theirs.
func TestDebitRequestLimitsANetwork(t *testing.T) {
	clock := newTestClock()
	r := newTestRRL(t, clock, "requests-per-second", "3")
	checkBursts(t, r,
		burst{"a flood from one network: one second's credit, then drops", udp("192.0.2.1"), false, "SSSDDDDDDD"},
		burst{"the same network over TCP shares the network's account", tcp("192.0.2.2"), false, "DD"},
		burst{"another network", udp("198.51.100.1"), false, "SSS"},
		// A valid cookie proves the source but does not lift the request limit.
		burst{"a client with a valid cookie", udp("203.0.113.1"), true, "SSSDD"},
	)
	clock.Advance(time.Second / 3)
	if act, ipr := r.DebitRequest(udp("198.51.100.1"), false); act != Send || ipr != IPOk {
		t.Errorf("after a third of a second: %v %v, want Send IPOk", act, ipr)
	}
}

func TestDebitRequestReasons(t *testing.T) {
	r := newTestRRL(t, newTestClock(), "requests-per-second", "1", "exempt-clients", "192.0.2.7")
	for i, c := range []struct {
		src    net.Addr
		act    Action
		reason IPReason
	}{
		{udp("192.0.2.7"), Send, IPExempt},
		{udp("192.0.2.7"), Send, IPExempt},
		{udp("198.51.100.1"), Send, IPOk},
		{udp("198.51.100.1"), Drop, IPRateLimit},
	} {
		if act, ipr := r.DebitRequest(c.src, false); act != c.act || ipr != c.reason {
			t.Errorf("request %d from %s: %v %v, want %v %v", i, c.src, act, ipr, c.act, c.reason)
		}
	}
	s := r.GetStats(false)
	if s.Actions[Drop] != 1 || s.IPReasons[IPRateLimit] != 1 || s.RTReasons[RTNotReached] != 1 {
		t.Errorf("a dropped request counts as one Drop, IPRateLimit, RTNotReached: %v", s)
	}
	for cat, n := range s.RPS {
		if n != 0 {
			t.Errorf("a request counted in category %d", cat)
		}
	}

	off := newTestRRL(t, newTestClock(), "responses-per-second", "1")
	if act, ipr := off.DebitRequest(udp("192.0.2.1"), false); act != Send || ipr != IPNotConfigured {
		t.Errorf("without a request limit: %v %v, want Send IPNotConfigured", act, ipr)
	}
	var nilRRL *RRL
	if act, ipr := nilRRL.DebitRequest(nil, false); act != Send || ipr != IPNotConfigured {
		t.Errorf("a nil RRL: %v %v", act, ipr)
	}
	if act, _ := r.DebitRequest(nil, false); act != Send {
		t.Errorf("a nil source is 0.0.0.0, whose first request is sent: %v", act)
	}
}

func TestProvenRequestsPerSecond(t *testing.T) {
	r := newTestRRL(t, newTestClock(), "requests-per-second", "2", "proven-requests-per-second", "5")
	checkBursts(t, r,
		// Spoofed UDP requests from the network spend only its unproven allowance.
		burst{"unproven", udp("192.0.2.1"), false, "SSDD"},
		burst{"valid cookie", udp("192.0.2.2"), true, "SSSSSDD"},
		burst{"TCP from the same network shares the proven account", tcp("192.0.2.3"), false, "D"},
	)

	// Until proven-requests-per-second is set, proven requests share the
	// network's request account, as with Debit alone.
	checkBursts(t, newTestRRL(t, newTestClock(), "requests-per-second", "2"),
		burst{"shared account, valid cookie", udp("192.0.2.1"), true, "S"},
		burst{"shared account, TCP", tcp("192.0.2.1"), false, "S"},
		burst{"shared account, unproven", udp("192.0.2.1"), false, "D"},
	)

	// Proven sources may be limited alone.
	provenOnly := newTestRRL(t, newTestClock(), "proven-requests-per-second", "1")
	checkBursts(t, provenOnly,
		burst{"proven-requests-per-second alone, TCP", tcp("192.0.2.1"), false, "SD"},
		burst{"proven-requests-per-second alone, unproven", udp("192.0.2.1"), false, "SS"},
	)
	if act, ipr, _ := provenOnly.Debit(tcp("198.51.100.1"), answer("x.")); act != Send || ipr != IPOk {
		t.Errorf("Debit over TCP with proven-requests-per-second alone: %v %v", act, ipr)
	}
}

func TestDebitResponseDoesNotChargeTheRequestAgain(t *testing.T) {
	r := newTestRRL(t, newTestClock(), "requests-per-second", "1", "responses-per-second", "100")
	src, a := udp("192.0.2.1"), answer("www.example.")
	if act, _ := r.DebitRequest(src, false); act != Send {
		t.Fatalf("first request: %v", act)
	}
	for i := range 10 {
		if act, ipr, rtr := r.DebitResponse(src, a); act != Send || ipr != IPOk || rtr != RTOk {
			t.Fatalf("response %d: %v %v %v, want Send IPOk RTOk", i, act, ipr, rtr)
		}
	}
	if act, ipr, rtr := r.DebitResponse(tcp("192.0.2.1"), a); act != Send || ipr != IPOk || rtr != RTNotUDP {
		t.Errorf("over TCP: %v %v %v, want Send IPOk RTNotUDP", act, ipr, rtr)
	}
	// Response limits still apply.
	lim := newTestRRL(t, newTestClock(), "responses-per-second", "1", "slip-ratio", "2")
	b := make([]byte, 4)
	for i := range b {
		act, ipr, _ := lim.DebitResponse(src, a)
		if ipr != IPNotConfigured {
			t.Errorf("without a request limit the reason is IPNotConfigured, got %v", ipr)
		}
		b[i] = "SDT"[act]
	}
	if string(b) != "STDT" {
		t.Errorf("responses: %s, want STDT", b)
	}
	var nilRRL *RRL
	if act, _, _ := nilRRL.DebitResponse(src, a); act != Send {
		t.Errorf("nil RRL: %v", act)
	}
}

// TestTwoCallsDecideAsDebit replays a random mix of requests from a few
// networks, over UDP and TCP and with all limits on, through Debit on one
// RRL and through DebitRequest then DebitResponse on another: every verdict
// must agree.
func TestTwoCallsDecideAsDebit(t *testing.T) {
	kv := []string{"responses-per-second", "4", "errors-per-second", "2", "requests-per-second", "10",
		"proven-requests-per-second", "6", "all-per-second", "8", "qps-scale", "30", "slip-ratio", "3", "exempt-clients", "192.0.2.200"}
	c1, c2 := newTestClock(), newTestClock()
	one, two := newTestRRL(t, c1, kv...), newTestRRL(t, c2, kv...)
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a.example.", "b.example.", "c.example."}
	for i := range 20000 {
		ip := netip.AddrFrom4([4]byte{192, 0, byte(2 + rng.IntN(3)), byte(190 + rng.IntN(20))})
		var src net.Addr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, 53))
		if rng.IntN(5) == 0 {
			src = net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, 53))
		}
		tuple := answer(names[rng.IntN(len(names))])
		if rng.IntN(4) == 0 {
			tuple = &ResponseTuple{AllowanceCategory: AllowanceError}
		}
		a1, ipr1, rtr1 := one.Debit(src, tuple)
		a2, ipr2 := two.DebitRequest(src, false)
		rtr2 := RTNotReached
		if a2 == Send {
			a2, ipr2, rtr2 = two.DebitResponse(src, tuple)
		}
		if got, want := fmt.Sprint(a2, ipr2, rtr2), fmt.Sprint(a1, ipr1, rtr1); got != want {
			t.Fatalf("step %d, %s: two calls %s, Debit %s", i, src, got, want)
		}
		d := time.Duration(rng.IntN(40)) * time.Millisecond
		c1.Advance(d)
		c2.Advance(d)
	}
	s := one.GetStats(false)
	for _, n := range []int64{s.IPReasons[IPRateLimit], s.IPReasons[IPExempt], s.RTReasons[RTRateLimit], s.RTReasons[RTAllLimit], s.RTReasons[RTNotUDP], s.Actions[Slip]} {
		if n == 0 {
			t.Fatalf("the mix left a check untried: %v", s)
		}
	}
}

// observed is an RRL on clock, set from keyword-value pairs, whose observer
// keeps every event in events.
type observed struct {
	*RRL
	events []Event
}

func newObserved(t *testing.T, clock *testClock, kv ...string) *observed {
	t.Helper()
	o := &observed{}
	o.RRL = observedRRL(t, clock, &o.events, kv...)
	return o
}

// episodes counts the starts and the stops heard.
func (o *observed) episodes() (starts, stops int) {
	for _, e := range o.events {
		if e.Started {
			starts++
		} else {
			stops++
		}
	}
	return starts, stops
}

func TestDebitRequestEvents(t *testing.T) {
	o := newObserved(t, newTestClock(), "proven-requests-per-second", "1")
	requests(o.RRL, tcp("192.0.2.1"), false, 3)
	events := o.events
	if len(events) != 1 || !events[0].Started || events[0].Limit != "proven-requests-per-second" ||
		events[0].Network != netip.MustParsePrefix("192.0.2.0/24") {
		t.Errorf("events: %+v, want one start of proven-requests-per-second for 192.0.2.0/24", events)
	}
}

func TestDebitRequestAllocatesNothing(t *testing.T) {
	r := newTestRRL(t, nil, "requests-per-second", "1000000", "qps-scale", "1000000")
	u, tc := udp("192.0.2.1"), tcp("2001:db8::1")
	if n := testing.AllocsPerRun(1000, func() {
		r.DebitRequest(u, false)
		r.DebitRequest(tc, true)
		r.DebitRequestAddr(u.AddrPort().Addr(), true, true)
	}); n != 0 {
		t.Errorf("%v allocations per run, want 0", n)
	}
}

// TestRequestLimitServesItsAllowanceUnderAFlood: a network that asks twice
// as fast as requests-per-second for ten seconds is served its allowance
// every second, not locked out after the first (a refused request costs
// nothing), and once it slows down it is served at once.
func TestRequestLimitServesItsAllowanceUnderAFlood(t *testing.T) {
	clock := newTestClock()
	r := newTestRRL(t, clock, "requests-per-second", "10", "window", "15")
	src := udp("192.0.2.1")
	served := 0
	for range 200 { // 20 a second for 10 s
		if act, _ := r.DebitRequest(src, false); act == Send {
			served++
		}
		clock.Advance(50 * time.Millisecond)
	}
	if want := 10*10 + 10; served < want-2 || served > want {
		t.Errorf("served %d of 200 in 10 s at 20/s, want about %d (10 a second and a second's burst)", served, want)
	}
	clock.Advance(100 * time.Millisecond)
	if act, ipr := r.DebitRequest(src, false); act != Send {
		t.Errorf("a request a tenth of a second after the flood: %v %v, want Send", act, ipr)
	}
	// Debit alone charges requests the same way.
	one := newTestRRL(t, clock, "requests-per-second", "10")
	sent := 0
	for range 200 {
		if act, _, _ := one.Debit(src, answer("x.")); act == Send {
			sent++
		}
		clock.Advance(50 * time.Millisecond)
	}
	if sent != served {
		t.Errorf("Debit served %d, DebitRequest %d", sent, served)
	}
}

// TestRequestFloodIsOneEpisode: a network that asks twice as fast as
// requests-per-second is refused every other request for as long as it
// does; the observer must hear of one episode that starts with the first
// refusal and stops once the network has slowed down, not of a start and
// a stop for every request it is still served. Also for a rate below one
// a second, where a second's credit is a single request.
func TestRequestFloodIsOneEpisode(t *testing.T) {
	for _, c := range []struct {
		rate  string
		every time.Duration
	}{{"10", 50 * time.Millisecond}, {"0.5", time.Second}} {
		clock := newTestClock()
		o := newObserved(t, clock, "requests-per-second", c.rate)
		r := o.RRL
		src := udp("192.0.2.1")
		served := 0
		for range 200 { // twice the rate
			if act, _ := r.DebitRequest(src, false); act == Send {
				served++
			}
			clock.Advance(c.every)
		}
		for _, e := range o.events {
			if e.LimitKind != LimitRequests {
				t.Errorf("event of %v", e.LimitKind)
			}
		}
		if starts, stops := o.episodes(); starts != 1 || stops != 0 || served < 90 {
			t.Errorf("rate %s, during the flood: %d starts, %d stops, %d served; want one start, about 100 served", c.rate, starts, stops, served)
		}
		clock.Advance(5 * time.Second) // quiet: credit unspent
		if act, _ := r.DebitRequest(src, false); act != Send {
			t.Fatalf("rate %s, after the flood: %v", c.rate, act)
		}
		if starts, stops := o.episodes(); starts != 1 || stops != 1 {
			t.Errorf("rate %s, after the flood: %d starts, %d stops; want one of each", c.rate, starts, stops)
		}
	}
}

// TestEndQuietEpisodesKeepsARequestFlood: a sweep ends the episode of a
// request account only once its network has stopped asking too fast, by
// the rule Debit applies, whatever the quiet time asked for: a sweep during
// the flood ends nothing.
func TestEndQuietEpisodesKeepsARequestFlood(t *testing.T) {
	clock := newTestClock()
	o := newObserved(t, clock, "requests-per-second", "10")
	r := o.RRL
	src := udp("192.0.2.1")
	for i := range 200 { // twice the rate, with a sweep every half second
		r.DebitRequest(src, false)
		clock.Advance(50 * time.Millisecond)
		if i%10 == 0 {
			r.EndQuietEpisodes(0)
		}
	}
	if starts, stops := o.episodes(); starts != 1 || stops != 0 {
		t.Errorf("during the flood: %d starts, %d stops; want one start", starts, stops)
	}
	clock.Advance(2 * time.Second)
	if n := r.EndQuietEpisodes(math.MaxInt64); n != 0 {
		t.Errorf("a sweep for accounts quiet for ever ended %d", n)
	}
	if n := r.EndQuietEpisodes(0); n != 1 || len(o.events) != 2 || o.events[1].Started {
		t.Errorf("after the flood a sweep ended %d; events %+v; want one stop", n, o.events)
	}
}

// TestTwoCallsCountOnceForQPSScale: qps-scale counts a request once,
// whether the server calls Debit or DebitRequest then DebitResponse, and
// counts a request with a valid cookie, whose response is not debited.
func TestTwoCallsCountOnceForQPSScale(t *testing.T) {
	factorAfter := func(each func(r *RRL, src net.Addr)) float64 {
		clock := newTestClock()
		r := newTestRRL(t, clock, "responses-per-second", "1000", "qps-scale", "10")
		for i := range 40 { // 40 in the first second: four times the target
			each(r, udp(fmt.Sprintf("192.0.2.%d", i)))
		}
		clock.Advance(time.Second)
		each(r, udp("198.51.100.1")) // the first of a new second sets the factor
		return r.qps.scaled.Load().factor
	}
	one := factorAfter(func(r *RRL, src net.Addr) { r.Debit(src, answer("x.")) })
	two := factorAfter(func(r *RRL, src net.Addr) {
		if act, _ := r.DebitRequest(src, false); act == Send {
			r.DebitResponse(src, answer("x."))
		}
	})
	cookie := factorAfter(func(r *RRL, src net.Addr) { r.DebitRequest(src, true) })
	if one != 0.25 || two != one || cookie != one {
		t.Errorf("qps-scale factor after 40 requests a second against 10: Debit %v, two calls %v, valid cookies %v; want 0.25 each", one, two, cookie)
	}
}

// TestProvenRequestsZeroLiftsTheLimit: proven-requests-per-second 0 lifts
// the request limit from proven sources (connections, valid cookies) while
// requests-per-second still holds unproven UDP.
func TestProvenRequestsZeroLiftsTheLimit(t *testing.T) {
	r := newTestRRL(t, newTestClock(), "requests-per-second", "1", "proven-requests-per-second", "0")
	for i := range 5 {
		if act, ipr := r.DebitRequest(tcp("192.0.2.1"), false); act != Send || ipr != IPNotConfigured {
			t.Errorf("TCP request %d: %v %v, want Send IPNotConfigured", i+1, act, ipr)
		}
		if act, ipr := r.DebitRequest(udp("192.0.2.1"), true); act != Send || ipr != IPNotConfigured {
			t.Errorf("valid-cookie request %d: %v %v, want Send IPNotConfigured", i+1, act, ipr)
		}
	}
	if act, _ := r.DebitRequest(udp("192.0.2.1"), false); act != Send {
		t.Error("the first unproven request refused")
	}
	if act, ipr := r.DebitRequest(udp("192.0.2.1"), false); act != Drop || ipr != IPRateLimit {
		t.Errorf("the second unproven request in a second: %v %v, want Drop IPRateLimit", act, ipr)
	}
}

// TestRefusalNetwork: the network a refusal names is that of the account
// that refused: the network's requests-per-second account, or the request
// prefix's, for either family; nothing for a request not refused or a
// refusal of another RRL's prefix.
func TestRefusalNetwork(t *testing.T) {
	clock := newTestClock()
	r := newTestRRL(t, clock, "requests-per-second", "1", "ipv6-prefix-length", "48",
		"ipv4-request-prefixes", "32:100 18:1", "ipv6-request-prefixes", "40:1")
	refused := func(src string) (RequestRefusal, netip.Addr) {
		a := netip.MustParseAddr(src)
		for range 5 {
			if act, _, why := r.DebitRequestLimit(a, true, false); act == Drop {
				return why, a
			}
		}
		t.Fatalf("%s never refused", src)
		return RequestRefusal{}, a
	}
	why, a := refused("192.0.2.77")
	if p, ok := r.RefusalNetwork(a, why); !ok || p.String() != "192.0.2.0/24" {
		t.Errorf("requests-per-second (%+v): %v %v, want 192.0.2.0/24", why, p, ok)
	}
	if act, _, _ := r.DebitRequestLimit(netip.MustParseAddr("198.51.100.9"), true, false); act != Send {
		t.Fatal("the first request of 198.51.64.0/18 refused")
	}
	why, a = refused("198.51.101.9") // another /24 of the /18, whose one request a second is spent
	if p, ok := r.RefusalNetwork(a, why); why != (RequestRefusal{Limit: LimitIPv4RequestPrefixes, Prefix: 1}) || !ok || p.String() != "198.51.64.0/18" {
		t.Errorf("ipv4-request-prefixes (%+v): %v %v, want 198.51.64.0/18", why, p, ok)
	}
	why, a = refused("2001:db8:1:2::5")
	if p, ok := r.RefusalNetwork(a, why); why.Limit != LimitRequests || !ok || p.String() != "2001:db8:1::/48" {
		t.Errorf("IPv6 requests-per-second (%+v): %v %v, want 2001:db8:1::/48", why, p, ok)
	}
	if p, ok := r.RefusalNetwork(a, RequestRefusal{Limit: LimitIPv6RequestPrefixes}); !ok || p.String() != "2001:db8::/40" {
		t.Errorf("IPv6 request prefix: %v %v, want 2001:db8::/40", p, ok)
	}
	a = netip.MustParseAddr("192.0.2.77")
	mapped := netip.MustParseAddr("::ffff:192.0.2.77")
	if p, ok := r.RefusalNetwork(mapped, RequestRefusal{Limit: LimitRequests}); !ok || p.String() != "192.0.2.0/24" {
		t.Errorf("an IPv4-mapped source: %v %v", p, ok)
	}
	for _, why := range []RequestRefusal{{}, {Limit: LimitAll}, {Limit: LimitIPv4RequestPrefixes, Prefix: 2},
		{Limit: LimitIPv6RequestPrefixes, Prefix: 0}, {Limit: LimitIPv4RequestPrefixes, Prefix: -1}} { // for an IPv4 source
		if p, ok := r.RefusalNetwork(a, why); ok {
			t.Errorf("%+v from %v names %v", why, a, p)
		}
	}
	ex := newTestRRL(t, clock, "requests-per-second", "1", "exempt-clients", "203.0.113.9", "ipv4-request-prefixes", "16:1")
	for _, tc := range []struct {
		src  string
		why  RequestRefusal
		want bool
	}{
		{"203.0.113.7", RequestRefusal{Limit: LimitRequests}, false},          // its /24 holds the exempt host
		{"203.0.7.7", RequestRefusal{Limit: LimitIPv4RequestPrefixes}, false}, // so does its /16
		{"203.1.7.7", RequestRefusal{Limit: LimitIPv4RequestPrefixes}, true},  // another /16
		{"198.51.100.7", RequestRefusal{Limit: LimitRequests}, true},
	} {
		if _, ok := ex.RefusalNetwork(netip.MustParseAddr(tc.src), tc.why); ok != tc.want {
			t.Errorf("exempt-clients 203.0.113.9: %s refused by %+v names a network: %v, want %v", tc.src, tc.why, ok, tc.want)
		}
	}
	var none *RRL
	if _, ok := none.RefusalNetwork(a, RequestRefusal{Limit: LimitRequests}); ok {
		t.Error("a nil RRL names a network")
	}
}
