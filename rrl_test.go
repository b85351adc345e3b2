package rrl

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestBurstThenSlipPattern(t *testing.T) {
	for _, c := range []struct {
		slip, want string
	}{
		{"0", "SSSSSDDDDDD"},
		{"1", "SSSSSTTTTTT"},
		{"2", "SSSSSTDTDTD"},
		{"3", "SSSSSTDDTDD"},
		{"10", "SSSSSTDDDDDDDDDT"},
	} {
		r := newTestRRL(t, newTestClock(), "responses-per-second", "5", "slip-ratio", c.slip)
		if got := actions(r, udp("192.0.2.1"), answer("www.example."), len(c.want)); got != c.want {
			t.Errorf("slip-ratio %s: got %s, want %s", c.slip, got, c.want)
		}
	}
}

func TestAllowanceIsEarnedContinuously(t *testing.T) {
	clock := newTestClock()
	r := newTestRRL(t, clock, "responses-per-second", "10", "slip-ratio", "0")
	src, a := udp("192.0.2.1"), answer("www.example.")
	if got := actions(r, src, a, 11); got != "SSSSSSSSSSD" {
		t.Fatalf("burst: %s", got)
	}
	// 100 ms earns one response (the debt of the dropped one is repaid
	// first); a further 100 ms earns one more.
	clock.Advance(200 * time.Millisecond)
	if got := actions(r, src, a, 2); got != "SD" {
		t.Errorf("after 200 ms: got %s, want SD", got)
	}
	// Credit is capped at one second's worth however long the account rests.
	clock.Advance(time.Hour)
	if got := actions(r, src, a, 11); got != "SSSSSSSSSSD" {
		t.Errorf("after an hour: got %s, want ten sent", got)
	}
}

func TestPenaltyBoxIsWindowDeep(t *testing.T) {
	clock := newTestClock()
	r := newTestRRL(t, clock, "responses-per-second", "2", "window", "5", "slip-ratio", "0")
	src, a := udp("192.0.2.1"), answer("www.example.")
	debitN(r, src, a, 1000) // far deeper than the window allows
	clock.Advance(5*time.Second - time.Millisecond)
	if got, _, _ := r.Debit(src, a); got != Drop {
		t.Fatalf("just inside the window: %v, want Drop", got)
	}
	// That Drop cost half a second more; a window of silence repays it all.
	clock.Advance(5 * time.Second)
	if got := actions(r, src, a, 1); got != "S" {
		t.Errorf("after a window of silence: %s, want S", got)
	}
}

func TestRatesBelowOnePerSecond(t *testing.T) {
	clock := newTestClock()
	r := newTestRRL(t, clock, "responses-per-second", "0.5", "slip-ratio", "0")
	src, a := udp("192.0.2.1"), answer("www.example.")
	if got := actions(r, src, a, 2); got != "SD" {
		t.Fatalf("got %s, want SD: one response of credit", got)
	}
	clock.Advance(4 * time.Second)
	if got := actions(r, src, a, 2); got != "SD" {
		t.Errorf("after 4 s: got %s, want SD", got)
	}
}

func TestTupleShapes(t *testing.T) {
	mk := func(cat AllowanceCategory, class, qtype uint16, name string) *ResponseTuple {
		return &ResponseTuple{Class: class, Type: qtype, AllowanceCategory: cat, SalientName: name}
	}
	for _, c := range []struct {
		what   string
		a, b   *ResponseTuple
		shared bool
	}{
		{"answers of two types", mk(AllowanceAnswer, 1, 1, "x."), mk(AllowanceAnswer, 1, 28, "x."), false},
		{"answers of two classes", mk(AllowanceAnswer, 1, 1, "x."), mk(AllowanceAnswer, 3, 1, "x."), false},
		{"answers for two names", mk(AllowanceAnswer, 1, 1, "x."), mk(AllowanceAnswer, 1, 1, "y."), false},
		{"NODATA for two types", mk(AllowanceNoData, 1, 1, "x."), mk(AllowanceNoData, 1, 28, "x."), true},
		{"NODATA of two classes", mk(AllowanceNoData, 1, 1, "x."), mk(AllowanceNoData, 3, 1, "x."), false},
		{"referrals for two types", mk(AllowanceReferral, 1, 1, "x."), mk(AllowanceReferral, 1, 15, "x."), true},
		{"referrals to two zones", mk(AllowanceReferral, 1, 1, "x."), mk(AllowanceReferral, 1, 1, "y."), false},
		{"NXDOMAIN for two types and classes", mk(AllowanceNXDomain, 1, 1, "zone."), mk(AllowanceNXDomain, 3, 28, "zone."), true},
		{"NXDOMAIN in two zones", mk(AllowanceNXDomain, 1, 1, "x."), mk(AllowanceNXDomain, 1, 1, "y."), false},
		{"errors for anything", mk(AllowanceError, 1, 1, "x."), mk(AllowanceError, 3, 28, "y."), true},
		{"an answer and NODATA", mk(AllowanceAnswer, 1, 0, "x."), mk(AllowanceNoData, 1, 0, "x."), false},
		{"NXDOMAIN and an error", mk(AllowanceNXDomain, 0, 0, ""), mk(AllowanceError, 0, 0, ""), false},
	} {
		if got := sharesAccount(t, c.a, c.b); got != c.shared {
			t.Errorf("%s: share an account = %v, want %v", c.what, got, c.shared)
		}
	}
}

// sharesAccount reports whether debiting b after exhausting a's account is
// limited, on a fresh RRL.
func sharesAccount(t *testing.T, a, b *ResponseTuple) bool {
	t.Helper()
	r := newTestRRL(t, newTestClock(), "responses-per-second", "1", "slip-ratio", "0")
	src := udp("192.0.2.1")
	debitN(r, src, a, 1)
	act, _, _ := r.Debit(src, b)
	return act != Send
}

func TestNamesFoldCaseAndTrailingDot(t *testing.T) {
	long := strings.Repeat("abcdefghijklmnopqrstuvwxyz.", 2500) // 67,500 bytes
	for _, pair := range [][2]string{
		{"www.example.com.", "WWW.Example.COM"},
		{"example.", "eXaMpLe"},
		{".", ""},
		{"www.exa\x80mple.", "WWW.EXA\x80MPLE."},
		{long + "x", strings.ToUpper(long) + "X."},
	} {
		if !sharesAccount(t, answer(pair[0]), answer(pair[1])) {
			t.Errorf("%.40q and %.40q do not share an account", pair[0], pair[1])
		}
	}
	for _, pair := range [][2]string{
		{"www.example.com.", "www.example.co."},
		{"a.", "a.."},
		{"\xc1.", "a."}, // a byte above 0x7F is not folded onto ASCII
		{long, long + "x"},
		{long + "x", long + "y"},
	} {
		if sharesAccount(t, answer(pair[0]), answer(pair[1])) {
			t.Errorf("%.40q and %.40q share an account", pair[0], pair[1])
		}
	}
}

func TestClientNetworks(t *testing.T) {
	for _, c := range []struct {
		a, b   string
		shared bool
	}{
		{"192.0.2.1", "192.0.2.254", true},
		{"192.0.2.1", "192.0.3.1", false},
		{"192.0.2.1", "::ffff:192.0.2.99", true},
		{"2001:db8:0:1::1", "2001:db8:0:ff::2", true},
		{"2001:db8:0:1::1", "2001:db8:0:100::1", false},
		{"2001:db8::1%eth0", "2001:db8::2", true},
		{"0.0.0.1", "::1", false},
		{"::ffff:0.0.0.1", "::1", false},
	} {
		r := newTestRRL(t, newTestClock(), "responses-per-second", "1", "slip-ratio", "0")
		a := answer("www.example.")
		debitN(r, udp(c.a), a, 1)
		act, _, _ := r.Debit(udp(c.b), a)
		if shared := act != Send; shared != c.shared {
			t.Errorf("%s and %s: share an account = %v, want %v", c.a, c.b, shared, c.shared)
		}
	}
}

func TestPrefixLengths(t *testing.T) {
	r := newTestRRL(t, newTestClock(), "responses-per-second", "1", "slip-ratio", "0",
		"ipv4-prefix-length", "32", "ipv6-prefix-length", "128")
	a := answer("www.example.")
	for _, src := range []string{"192.0.2.1", "192.0.2.2", "2001:db8::1", "2001:db8::2"} {
		if got := actions(r, udp(src), a, 2); got != "SD" {
			t.Errorf("%s: %s, want its own account (SD)", src, got)
		}
	}
	r = newTestRRL(t, newTestClock(), "responses-per-second", "1", "slip-ratio", "0",
		"ipv4-prefix-length", "1", "ipv6-prefix-length", "1")
	if got := actions(r, udp("1.2.3.4"), a, 1) + actions(r, udp("126.0.0.1"), a, 1); got != "SD" {
		t.Errorf("/1: %s, want one account for 0.0.0.0/1", got)
	}
	if got := actions(r, udp("2001:db8::1"), a, 1) + actions(r, udp("7fff::1"), a, 1); got != "SD" {
		t.Errorf("/1: %s, want one account for ::/1", got)
	}
}

func TestOnlyUDPIsResponseLimited(t *testing.T) {
	r := newTestRRL(t, newTestClock(), "responses-per-second", "1")
	a := answer("www.example.")
	for i := range 5 {
		act, ipr, rtr := r.Debit(tcp("192.0.2.1"), a)
		if act != Send || ipr != IPNotConfigured || rtr != RTNotUDP {
			t.Fatalf("TCP response %d: %v %v %v", i, act, ipr, rtr)
		}
		act, _, rtr = r.DebitAddr(netip.MustParseAddr("192.0.2.1"), false, a)
		if act != Send || rtr != RTNotUDP {
			t.Fatalf("DebitAddr over TCP %d: %v %v", i, act, rtr)
		}
	}
	if act, _, rtr := r.Debit(udp("192.0.2.1"), a); act != Send || rtr != RTOk {
		t.Errorf("first UDP response after TCP ones: %v %v", act, rtr)
	}
}

// otherAddr is a net.Addr of a type Debit does not know.
type otherAddr struct{ network, s string }

func (a otherAddr) Network() string { return a.network }
func (a otherAddr) String() string  { return a.s }

func TestTransportFromNetwork(t *testing.T) {
	r := newTestRRL(t, newTestClock(), "responses-per-second", "1")
	a := answer("www.example.")
	for _, src := range []net.Addr{otherAddr{"tcp", "192.0.2.1:53"}, otherAddr{"tcp-tls", "[2001:db8::1]:853"}, &net.IPAddr{IP: net.IPv4(192, 0, 2, 1)}} {
		if _, _, rtr := r.Debit(src, a); rtr != RTNotUDP {
			t.Errorf("%s %s: %v, want RTNotUDP", src.Network(), src, rtr)
		}
	}
	debitN(r, otherAddr{"udp6", "[2001:db8::1]:53"}, a, 1)
	if _, _, rtr := r.Debit(udp("2001:db8::5"), a); rtr != RTRateLimit {
		t.Errorf("a udp6 address of another type was not accounted as UDP from its network: %v", rtr)
	}
}

func TestRequestsPerSecond(t *testing.T) {
	r := newTestRRL(t, newTestClock(), "requests-per-second", "3")
	a := answer("www.example.")
	var got []string
	for _, src := range []net.Addr{udp("192.0.2.1"), tcp("192.0.2.2"), udp("192.0.2.3"), tcp("192.0.2.4"), udp("198.51.100.1")} {
		act, ipr, rtr := r.Debit(src, a)
		got = append(got, fmt.Sprint(act, ipr, rtr))
	}
	want := []string{
		"Send IPOk RTNotConfigured", "Send IPOk RTNotUDP", "Send IPOk RTNotConfigured",
		"Drop IPRateLimit RTNotReached", // the fourth request from 192.0.2.0/24, over TCP too
		"Send IPOk RTNotConfigured",     // another network
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestAllPerSecondWinsAndNeverSlips(t *testing.T) {
	r := newTestRRL(t, newTestClock(), "responses-per-second", "100", "all-per-second", "4", "slip-ratio", "1")
	src := udp("192.0.2.1")
	var got []string
	for i := range 6 {
		act, _, rtr := r.Debit(src, answer(fmt.Sprintf("n%d.example.", i)))
		got = append(got, fmt.Sprint(act, rtr))
	}
	want := "[Send RTOk Send RTOk Send RTOk Send RTOk Drop RTAllLimit Drop RTAllLimit]"
	if fmt.Sprint(got) != want {
		t.Errorf("got %v, want %s", got, want)
	}
	// all-per-second alone, with no response allowance, limits too.
	r = newTestRRL(t, newTestClock(), "all-per-second", "1")
	if got := actions(r, src, answer("x."), 3); got != "SDD" {
		t.Errorf("all-per-second alone: %s, want SDD", got)
	}
}

// TestAllPerSecondStillChargesTheTuple: a response dropped for
// all-per-second is charged to its tuple's account too, and moves its slip
// counter on, as in BIND; so once all-per-second lets responses through
// again, the tuple's account is deeper in debt and its slip count further
// on than if the dropped response had not been charged.
func TestAllPerSecondStillChargesTheTuple(t *testing.T) {
	clock := newTestClock()
	r := newTestRRL(t, clock, "responses-per-second", "1", "all-per-second", "2", "slip-ratio", "2", "window", "15")
	src, x := udp("192.0.2.1"), answer("x.example.")
	var got []string
	debit := func() {
		act, _, rtr := r.Debit(src, x)
		got = append(got, fmt.Sprint(act, rtr))
	}
	debit() // sent
	debit() // the tuple's account in debt: the first limited response slips
	debit() // over all-per-second: dropped, and charged (the slip count moves on)
	clock.Advance(time.Second)
	debit() // all-per-second has credit again; the tuple's account does not
	want := "[Send RTOk Slip RTRateLimit Drop RTAllLimit Slip RTRateLimit]"
	if fmt.Sprint(got) != want {
		t.Errorf("got %v, want %s", got, want)
	}
}

func TestErrorsNeverSlip(t *testing.T) {
	r := newTestRRL(t, newTestClock(), "errors-per-second", "1", "slip-ratio", "1")
	e := &ResponseTuple{AllowanceCategory: AllowanceError}
	if got := actions(r, udp("192.0.2.1"), e, 5); got != "SDDDD" {
		t.Errorf("got %s, want SDDDD", got)
	}
}

func TestExemptClients(t *testing.T) {
	r := newTestRRL(t, newTestClock(), "responses-per-second", "1", "requests-per-second", "1",
		"exempt-clients", "192.0.2.7 2001:db8::/32")
	a := answer("www.example.")
	for _, src := range []net.Addr{udp("192.0.2.7"), udp("::ffff:192.0.2.7"), udp("2001:db8:1::1"), tcp("192.0.2.7")} {
		for i := range 10 {
			if act, ipr, rtr := r.Debit(src, a); act != Send || ipr != IPExempt || rtr != RTNotReached {
				t.Fatalf("%s response %d: %v %v %v", src, i, act, ipr, rtr)
			}
		}
	}
	if got := actions(r, udp("192.0.2.8"), a, 2); got != "SD" {
		t.Errorf("a neighbour of the exempt client: %s, want SD", got)
	}
}

func TestObserverReportsEpisodesOnce(t *testing.T) {
	clock := newTestClock()
	var events []Event
	r := observedRRL(t, clock, &events, "responses-per-second", "2")
	src, a := udp("192.0.2.9"), answer("WWW.example.")
	debitN(r, src, a, 50)
	clock.Advance(20 * time.Second)
	debitN(r, src, a, 2)
	if len(events) != 2 {
		t.Fatalf("got %d events, want 2 (start, stop): %+v", len(events), events)
	}
	want := Event{Started: true, Limit: "responses-per-second", Network: netip.MustParsePrefix("192.0.2.0/24"), Tuple: *a, Account: events[0].Account}
	if events[0] != want || want.Account == 0 {
		t.Errorf("start: %+v, want %+v", events[0], want)
	}
	want.Started = false
	if events[1] != want {
		t.Errorf("stop: %+v, want %+v", events[1], want)
	}
}

func TestObserverReportsEvictedEpisode(t *testing.T) {
	var events []Event
	r := observedRRL(t, newTestClock(), &events, "responses-per-second", "1", "max-table-size", "1")
	debitN(r, udp("192.0.2.1"), answer("a."), 2)
	debitN(r, udp("192.0.2.1"), answer("b."), 1)
	if len(events) == 0 {
		t.Fatal("no events")
	}
	id := events[0].Account
	want := []Event{
		{Started: true, Limit: "responses-per-second", Network: netip.MustParsePrefix("192.0.2.0/24"), Tuple: *answer("a."), Account: id},
		{Evicted: true, Limit: "responses-per-second", Account: id},
	}
	if fmt.Sprint(events) != fmt.Sprint(want) {
		t.Errorf("got %+v\nwant %+v", events, want)
	}
}

// TestEventsNameTheirLimitKind: an evicted account's event and a stop
// reported by EndQuietEpisodes carry the account's LimitKind and its name,
// as the start does (errors here: not the zero LimitKind, so that a field
// left unset shows).
func TestEventsNameTheirLimitKind(t *testing.T) {
	clock := newTestClock()
	var events []Event
	r := observedRRL(t, clock, &events, "errors-per-second", "1", "max-table-size", "1")
	errs := &ResponseTuple{AllowanceCategory: AllowanceError}
	debitN(r, udp("192.0.2.1"), errs, 2)    // starts an episode
	debitN(r, udp("198.51.100.1"), errs, 2) // evicts it, and starts its own
	clock.Advance(time.Minute)
	r.EndQuietEpisodes(time.Second) // stops the second
	var kinds []string
	for _, e := range events {
		if e.LimitKind != LimitErrors || e.Limit != "errors-per-second" {
			t.Errorf("%+v: want LimitErrors, errors-per-second", e)
		}
		kinds = append(kinds, fmt.Sprintf("started %v evicted %v", e.Started, e.Evicted))
	}
	want := []string{"started true evicted false", "started false evicted true", "started true evicted false", "started false evicted false"}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("events %v, want %v", kinds, want)
	}
}

func TestStats(t *testing.T) {
	r := newTestRRL(t, newTestClock(), "responses-per-second", "1", "slip-ratio", "2")
	debitN(r, udp("192.0.2.1"), answer("a."), 3)
	debitN(r, tcp("192.0.2.1"), &ResponseTuple{AllowanceCategory: AllowanceNXDomain}, 1)
	s := r.GetStats(true)
	want := "RPS Answer 3 Referral 0 NoData 0 NXDomain 1 Error 0; Actions Send 2 Drop 1 Slip 1; " +
		"IPReasons Ok 0 NotConfigured 4 NotReached 0 RateLimit 0 CacheFull 0 Exempt 0; " +
		"RTReasons Ok 1 NotConfigured 0 NotReached 0 RateLimit 2 NotUDP 1 CacheFull 0 AllLimit 0 AllBytesLimit 0 TooLarge 0; CacheLength 1; Evictions 0; " +
		"RequestPrefixDrops IPv4 [] IPv6 []; AllBytesDrops 0; TooLarge 0; StreamTimeDrops 0"
	if s.String() != want {
		t.Errorf("got  %s\nwant %s", s, want)
	}
	if s := r.GetStats(false); s.Actions != [ActionLast]int64{} || s.CacheLength != 1 {
		t.Errorf("after zeroing: %s", s)
	}
	var sum Stats
	sum.Add(&s)
	sum.Add(&s)
	if sum.CacheLength != 2 {
		t.Errorf("Add: CacheLength %d, want 2", sum.CacheLength)
	}
	if c := sum.Copy(true); c.CacheLength != 2 || sum.CacheLength != 0 {
		t.Errorf("Copy(true): copy %d, source %d", c.CacheLength, sum.CacheLength)
	}
}

func TestStringers(t *testing.T) {
	for got, want := range map[string]string{
		Slip.String(): "Slip", ActionLast.String(): "ActionLast", Action(-1).String(): "Action(-1)", Action(9).String(): "Action(9)",
		IPExempt.String(): "IPExempt", IPReason(42).String(): "IPReason(42)", RTNotUDP.String(): "RTNotUDP",
		RTAllLimit.String(): "RTAllLimit", RTReason(-7).String(): "RTReason(-7)", AllowanceNXDomain.String(): "AllowanceNXDomain",
		AllowanceCategory(200).String(): "AllowanceCategory(200)",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestNewAllowanceCategory(t *testing.T) {
	for _, c := range []struct {
		rcode, answers, ns int
		want               AllowanceCategory
	}{
		{0, 1, 0, AllowanceAnswer}, {0, 2, 3, AllowanceAnswer}, {0, 0, 2, AllowanceReferral},
		{0, 0, 0, AllowanceNoData}, {3, 0, 1, AllowanceNXDomain}, {3, 1, 0, AllowanceNXDomain},
		{2, 0, 0, AllowanceError}, {5, 1, 1, AllowanceError}, {-1, 0, 0, AllowanceError}, {23, 0, 0, AllowanceError},
	} {
		if got := NewAllowanceCategory(c.rcode, c.answers, c.ns); got != c.want {
			t.Errorf("NewAllowanceCategory(%d, %d, %d) = %v, want %v", c.rcode, c.answers, c.ns, got, c.want)
		}
	}
}

func TestQPSScale(t *testing.T) {
	clock := newTestClock()
	r := newTestRRL(t, clock, "responses-per-second", "10", "qps-scale", "10", "slip-ratio", "10")
	src := udp("192.0.2.1")
	// One quiet second sets no scale: ten responses go out.
	if got := actions(r, src, answer("quiet."), 11); got != "SSSSSSSSSST" {
		t.Fatalf("before any load: %s", got)
	}
	// A second at 100 responses per second, ten times qps-scale, half of
	// them over TCP (which counts, as in BIND).
	clock.Advance(time.Second)
	for i := range 100 {
		var a net.Addr = udp(fmt.Sprintf("198.51.%d.1", i))
		if i%2 == 0 {
			a = tcp(fmt.Sprintf("198.51.%d.1", i))
		}
		r.Debit(a, answer(fmt.Sprintf("n%d.", i)))
	}
	// The next second allowances are a tenth (10 → 1 per second), and
	// slip-ratio 10 becomes 2 (BIND's floor).
	clock.Advance(time.Second)
	if got := actions(r, src, answer("loaded."), 5); got != "STDTD" {
		t.Errorf("under 10x load: %s, want STDTD", got)
	}
	// When the load is gone the factor returns to 1.
	clock.Advance(time.Second)
	r.Debit(src, answer("tick."))
	clock.Advance(time.Second)
	if got := actions(r, src, answer("later."), 11); got != "SSSSSSSSSST" {
		t.Errorf("after the load: %s", got)
	}
}

func TestSlipCountRestartsWithFullCredit(t *testing.T) {
	clock := newTestClock()
	r := newTestRRL(t, clock, "responses-per-second", "2", "slip-ratio", "3")
	src, a := udp("192.0.2.1"), answer("www.example.")
	if got := actions(r, src, a, 4); got != "SSTD" {
		t.Fatalf("first second: %s", got)
	}
	// A second and a half repays the second of debt and earns one
	// response, not full credit: the count goes on (D, then T).
	clock.Advance(1500 * time.Millisecond)
	if got := actions(r, src, a, 3); got != "SDT" {
		t.Errorf("after partial credit: %s, want SDT", got)
	}
	// After the debt is repaid and full credit earned, the first limited
	// response slips again, although the count stood at one.
	debitN(r, src, a, 1)
	clock.Advance(10 * time.Second)
	if got := actions(r, src, a, 3); got != "SST" {
		t.Errorf("after full credit: %s, want SST", got)
	}
}

func TestPenaltyBoxBoundary(t *testing.T) {
	clock := newTestClock()
	r := newTestRRL(t, clock, "responses-per-second", "4", "window", "5", "slip-ratio", "0")
	src, a := udp("192.0.2.1"), answer("www.example.")
	debitN(r, src, a, 1000) // debt capped at 5 s
	// 5 s of silence repay exactly the debt: the balance is 0, so the next
	// response (costing 250 ms) is still limited...
	clock.Advance(5 * time.Second)
	if got := actions(r, src, a, 1); got != "D" {
		t.Errorf("after exactly the window: %s, want D", got)
	}
	// ...and 250 ms more earn exactly that response back, then one more.
	clock.Advance(500 * time.Millisecond)
	if got := actions(r, src, a, 2); got != "SD" {
		t.Errorf("a response's worth later: %s, want SD", got)
	}
}

// TestQPSScaleRules: scaling stops at BIND's floor of one response a
// second (a rate already lower is kept), leaves a slip-ratio of 2 or less
// alone, and exempt clients are not counted.
func TestQPSScaleRules(t *testing.T) {
	sec := int64(time.Second)
	for _, c := range []struct {
		interval int64
		f        float64
		want     int64
	}{
		{sec / 10, 0.5, sec / 5},
		{sec / 10, 0.01, sec},   // 0.1/s would be below the floor
		{2 * sec, 0.5, 2 * sec}, // 0.5/s: below the floor already, kept
		{sec / 10, 1, sec / 10},
	} {
		if got := scale(c.interval, c.f); got != c.want {
			t.Errorf("interval %v by %v: %v, want %v", time.Duration(c.interval), c.f, time.Duration(got), time.Duration(c.want))
		}
	}
	for _, c := range []struct {
		slip int
		f    float64
		want int
	}{{1, 0.1, 1}, {2, 0.1, 2}, {3, 0.1, 2}, {10, 0.5, 5}, {10, 1, 10}} {
		base := allowances{window: 15 * sec, factor: 1}
		base.limits[LimitResponses] = limitOf(sec/10, 15*sec).withSlip(LimitResponses, c.slip)
		base.limits[LimitErrors] = limitOf(sec/10, 15*sec).withSlip(LimitErrors, c.slip)
		q := newQPSScaler(10, base)
		q.setFactor(c.f)
		if got := q.scaled.Load().limits; got[LimitResponses].slip != c.want || got[LimitErrors].slip != 0 {
			t.Errorf("slip-ratio %d by %v: answers slip every %d, errors %d; want %d and 0 (never)", c.slip, c.f, got[LimitResponses].slip, got[LimitErrors].slip, c.want)
		}
	}
	clock := newTestClock()
	r := newTestRRL(t, clock, "responses-per-second", "10", "qps-scale", "10", "exempt-clients", "192.0.2.0/24")
	for i := range 100 {
		r.Debit(udp(fmt.Sprintf("192.0.2.%d", i)), answer("x."))
	}
	clock.Advance(time.Second)
	r.Debit(udp("198.51.100.1"), answer("x.")) // the first of a new second sets the factor
	if f := r.qps.scaled.Load().factor; f != 1 {
		t.Errorf("after 100 exempt requests a second against 10: factor %v, want 1", f)
	}
}

func TestQPSScaleIgnoresLateReadings(t *testing.T) {
	r := newTestRRL(t, nil, "responses-per-second", "10", "qps-scale", "10")
	// Drive qps-scale's own bookkeeping with explicit times: a busy second,
	// then a reading from just before the next second began (a goroutine
	// that read the clock before another turned the second).
	s := &r.stats[0]
	sec := int64(time.Second)
	r.qps.observe(r.stats, s, 10*sec)
	for range 100 {
		r.qps.observe(r.stats, s, 10*sec+1)
	}
	r.qps.observe(r.stats, s, 11*sec)
	busy := r.qps.scaled.Load().factor
	if busy > 0.2 {
		t.Fatalf("after 100 responses in a second the factor is %v", busy)
	}
	r.qps.observe(r.stats, s, 11*sec-1)
	if got := r.qps.scaled.Load().factor; got != busy || r.qps.second.Load() != 11 {
		t.Errorf("a late reading changed the factor to %v and the second to %d", got, r.qps.second.Load())
	}
}

func TestEndQuietEpisodes(t *testing.T) {
	clock := newTestClock()
	var events []Event
	r := observedRRL(t, clock, &events, "responses-per-second", "1", "window", "5")
	victim, other := udp("192.0.2.1"), udp("198.51.100.1")
	debitN(r, victim, answer("a."), 100) // five seconds in debt
	clock.Advance(3 * time.Second)
	debitN(r, other, answer("b."), 5) // four seconds in debt
	if len(events) != 2 || !events[0].Started || !events[1].Started {
		t.Fatalf("events: %+v", events)
	}
	start := events[0]

	if n := r.EndQuietEpisodes(time.Minute); n != 0 {
		t.Errorf("ended %d episodes of accounts still in debt", n)
	}
	clock.Advance(2*time.Second + time.Minute) // the victim's debt repaid a minute ago
	if n := r.EndQuietEpisodes(time.Minute); n != 1 {
		t.Fatalf("ended %d episodes, want the victim's one", n)
	}
	stop := events[2]
	if stop.Started || stop.Evicted || stop.Account != start.Account || stop.Limit != "responses-per-second" {
		t.Errorf("stop event %+v does not match start %+v", stop, start)
	}
	clock.Advance(time.Minute)
	if n := r.EndQuietEpisodes(time.Minute); n != 1 || events[3].Account != events[1].Account {
		t.Errorf("second sweep ended %d: %+v", n, events)
	}
	if n := r.EndQuietEpisodes(0); n != 0 {
		t.Errorf("a third sweep ended %d episodes", n)
	}
	// The ended account is recycled first, and a later limit starts anew.
	if got := actions(r, victim, answer("a."), 2); got != "ST" {
		t.Errorf("the victim after its episode ended: %s", got)
	}
	if last := events[len(events)-1]; !last.Started || last.Account != start.Account {
		t.Errorf("a new episode was not reported: %+v", last)
	}
	var nilRRL *RRL
	if nilRRL.EndQuietEpisodes(time.Second) != 0 {
		t.Error("nil RRL")
	}
}

// TestEndQuietEpisodesResumes: in a table larger than one call sweeps
// (400,000 accounts, 80,000 buckets), each call sweeps its share and the
// next resumes where it stopped, so that three calls end every quiet
// episode, each once.
func TestEndQuietEpisodesResumes(t *testing.T) {
	clock := newTestClock()
	ended := map[uint64]int{}
	c := testConfig(t, clock, "responses-per-second", "1", "window", "5", "max-table-size", "400000")
	c.SetObserver(func(e Event) {
		if !e.Started {
			ended[e.Account]++
		}
	})
	r := NewRRL(c)
	const sources = 3000
	for i := range sources {
		debitN(r, net.UDPAddrFromAddrPort(netip.AddrPortFrom(spraySource(i), 53)), answer("a."), 3) // in debt
	}
	clock.Advance(time.Minute)
	var calls []int
	for range 3 {
		calls = append(calls, r.EndQuietEpisodes(time.Second))
	}
	if calls[0] == 0 || calls[0] == sources || calls[0]+calls[1]+calls[2] != sources {
		t.Errorf("three sweeps ended %v episodes, want each a share of %d, all in all", calls, sources)
	}
	if n := r.EndQuietEpisodes(time.Second); n != 0 {
		t.Errorf("a fourth sweep ended %d", n)
	}
	for id, n := range ended {
		if n != 1 {
			t.Errorf("account %#x ended %d times", id, n)
		}
	}
	if len(ended) != sources {
		t.Errorf("%d accounts ended, want %d", len(ended), sources)
	}
}
