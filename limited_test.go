package rrl

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// recordingRRL is newTestRRL with the record of limited accounts on.
func recordingRRL(t testing.TB, clock *testClock, kv ...string) *RRL {
	t.Helper()
	c := testConfig(t, clock, kv...)
	c.SetRecordLimited(true)
	return NewRRL(c)
}

// v4 returns the IPv4 address 10.b.c.1 as a UDP source.
func v4src(b, c int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(b), byte(c), 1}) }

func TestLimitedReportsAnEpisode(t *testing.T) {
	clock := newTestClock()
	start := clock.Now()
	r := recordingRRL(t, clock, "responses-per-second", "5")
	got := debitN(r, udp("192.0.2.7"), answer("www.example.com."), 12)
	if got.send != 5 {
		t.Fatalf("sent %d of 12, want 5", got.send)
	}
	clock.Advance(100 * time.Millisecond)
	l := r.Limited(10, ByDebt)
	if len(l) != 1 {
		t.Fatalf("Limited = %+v, want one account", l)
	}
	a := l[0]
	want := LimitedAccount{
		Network:   netip.MustParsePrefix("192.0.2.0/24"),
		LimitKind: LimitResponses,
		Tuple:     ResponseTuple{Class: 1, Type: 1, AllowanceCategory: AllowanceAnswer, SalientName: "www.example.com."},
		Since:     start,
		Refused:   7,
		// 7 responses of 200 ms past full credit, 100 ms of it earned back.
		Debt: 7*200*time.Millisecond - 100*time.Millisecond,
	}
	if a != want {
		t.Errorf("Limited = %+v\nwant      %+v", a, want)
	}
}

func TestLimitedOrders(t *testing.T) {
	clock := newTestClock()
	r := recordingRRL(t, clock, "responses-per-second", "5")
	old, recent := udp("192.0.2.1"), udp("198.51.100.1")
	debitN(r, old, answer("a.example."), 40) // 35 refused, 7 s of debt
	clock.Advance(6 * time.Second)
	debitN(r, old, answer("a.example."), 1) // in debt still: 36 refused
	debitN(r, recent, answer("b.example."), 20)
	// old: 36 refused, about 1.2 s of debt; recent: 15 refused, 3 s.
	byDebt, byRefused := r.Limited(10, ByDebt), r.Limited(10, ByRefused)
	if len(byDebt) != 2 || len(byRefused) != 2 {
		t.Fatalf("Limited = %+v, %+v; want two accounts each", byDebt, byRefused)
	}
	if byDebt[0].Network.Addr() != netip.MustParseAddr("198.51.100.0") || byDebt[0].Debt <= byDebt[1].Debt {
		t.Errorf("by debt: %+v, want 198.51.100.0/24, the deeper, first", byDebt)
	}
	if byRefused[0].Network.Addr() != netip.MustParseAddr("192.0.2.0") || byRefused[0].Refused != 36 || byRefused[1].Refused != 15 {
		t.Errorf("by refused: %+v, want 192.0.2.0/24 (36) before 198.51.100.0/24 (15)", byRefused)
	}
	if top := r.Limited(1, ByRefused); len(top) != 1 || top[0] != byRefused[0] {
		t.Errorf("Limited(1) = %+v, want the first of %+v", top, byRefused)
	}
}

func TestLimitedDropsEndedEpisodes(t *testing.T) {
	clock := newTestClock()
	r := recordingRRL(t, clock, "responses-per-second", "5", "window", "1")
	debitN(r, udp("192.0.2.1"), answer("a.example."), 10)
	debitN(r, udp("198.51.100.1"), answer("b.example."), 10)
	if n := len(r.Limited(10, ByDebt)); n != 2 {
		t.Fatalf("%d accounts limited, want 2", n)
	}
	clock.Advance(2 * time.Second)
	// The first ends its episode on a Debit; the second, out of debt too,
	// is not limited now, though its episode lasts until a sweep.
	if got := debitN(r, udp("192.0.2.1"), answer("a.example."), 1); got.send != 1 {
		t.Fatalf("not sent after the window: %+v", got)
	}
	if l := r.Limited(10, ByDebt); len(l) != 0 {
		t.Fatalf("Limited = %+v, want none: both are out of debt", l)
	}
	if n := r.EndQuietEpisodes(time.Second); n != 1 {
		t.Fatalf("EndQuietEpisodes ended %d, want 1, 198.51.100.0/24's", n)
	}
	if l := r.Limited(10, ByDebt); len(l) != 0 {
		t.Errorf("Limited = %+v after every episode ended, want none", l)
	}
}

// TestLimitedDropsAccountsBackInCredit: an account leaves Limited as soon
// as it is out of debt, while its episode goes on until a quiet period of
// 60 seconds ends it, as the log lines have it; in debt again within the
// episode, it is listed again with the count of the whole episode.
func TestLimitedDropsAccountsBackInCredit(t *testing.T) {
	clock := newTestClock()
	r := recordingRRL(t, clock, "responses-per-second", "5", "window", "15")
	src, tuple := udp("192.0.2.1"), answer("a.example.")
	debitN(r, src, tuple, 10) // 5 refused: 1 s of debt
	if l := r.Limited(10, ByDebt); len(l) != 1 || l[0].Debt != time.Second || l[0].Refused != 5 {
		t.Fatalf("Limited = %+v, want one account, 1s of debt, 5 refused", l)
	}
	clock.Advance(999 * time.Millisecond)
	if l := r.Limited(10, ByDebt); len(l) != 1 || l[0].Debt != time.Millisecond {
		t.Fatalf("1 ms before the debt is paid: %+v, want the account, 1ms of debt", l)
	}
	clock.Advance(time.Millisecond)
	if l := r.Limited(10, ByDebt); len(l) != 0 {
		t.Errorf("Limited = %+v once out of debt, want none", l)
	}
	if n := r.EndQuietEpisodes(60 * time.Second); n != 0 {
		t.Errorf("EndQuietEpisodes(60s) ended %d episodes 0 s after the debt was paid, want none", n)
	}
	clock.Advance(100 * time.Millisecond)               // half a response earned
	if got := debitN(r, src, tuple, 1); got.send != 0 { // in debt again: the episode goes on
		t.Fatalf("sent %+v with half a response's credit", got)
	}
	if l := r.Limited(10, ByDebt); len(l) != 1 || l[0].Refused != 6 || l[0].Debt != 100*time.Millisecond {
		t.Errorf("Limited = %+v, want the account again, 6 refused in its episode, 100ms of debt", l)
	}
	clock.Advance(time.Minute + 100*time.Millisecond)
	if n := r.EndQuietEpisodes(60 * time.Second); n != 1 {
		t.Errorf("EndQuietEpisodes(60s) ended %d episodes a minute after the debt was paid, want 1", n)
	}
}

// TestLimitedRequestDebt: a request account, which sinks into no debt, is
// reported with the time until it serves a request again, and leaves
// Limited then; a request prefix's account with its own prefix's.
func TestLimitedRequestDebt(t *testing.T) {
	clock := newTestClock()
	r := recordingRRL(t, clock, "requests-per-second", "2", "ipv4-request-prefixes", "16:4")
	src := v4src(1, 2)
	for range 5 {
		r.DebitRequestAddr(src, true, false) // 2 served, 3 refused at /24
	}
	for c := range 5 {
		r.DebitRequestAddr(v4src(1, 10+c), true, false) // 2 more served at /16, 3 refused by it
	}
	l := r.Limited(10, ByDebt)
	if len(l) != 2 {
		t.Fatalf("Limited = %+v, want the /24's and the /16's request accounts", l)
	}
	// Each has spent its credit: the next request is served once an
	// interval has passed, 500 ms at 2/s and 250 ms at 4/s.
	want := map[LimitKind]struct {
		net  string
		debt time.Duration
	}{LimitRequests: {"10.1.2.0/24", 500 * time.Millisecond}, LimitIPv4RequestPrefixes: {"10.1.0.0/16", 250 * time.Millisecond}}
	for _, a := range l {
		if w := want[a.LimitKind]; a.Network.String() != w.net || a.Debt != w.debt || a.Refused != 3 {
			t.Errorf("%+v: want %s, %v until it serves again, 3 refused", a, w.net, w.debt)
		}
	}
	clock.Advance(300 * time.Millisecond)
	if l := r.Limited(10, ByDebt); len(l) != 1 || l[0].LimitKind != LimitRequests || l[0].Debt != 200*time.Millisecond {
		t.Errorf("300 ms later: %+v, want the /24's account alone, 200ms left", l)
	}
	clock.Advance(200 * time.Millisecond)
	if l := r.Limited(10, ByDebt); len(l) != 0 {
		t.Errorf("500 ms later: %+v, want none: each would serve a request", l)
	}
	if act, _ := r.DebitRequestAddr(src, true, false); act != Send {
		t.Errorf("a request from %v after 500 ms: %v, want it served", src, act)
	}
}

// TestLimitedCountsEachRefusalOnce floods one network under two accounts
// at once, responses-per-second (two names) and all-per-second: every
// response refused is counted once, at the limit that decided it, so that
// the counts Limited gives add up to the drops and slips Debit returned,
// and agree with Stats, limit by limit.
func TestLimitedCountsEachRefusalOnce(t *testing.T) {
	clock := newTestClock()
	r := recordingRRL(t, clock, "responses-per-second", "5", "all-per-second", "8")
	src := udp("192.0.2.7")
	names := [2]*ResponseTuple{answer("a.example."), answer("b.example.")}
	var refused, byAll, byTuple [2]int // by name
	debit := func(i int) {
		act, _, rtr := r.Debit(src, names[i])
		if act != Send {
			refused[i]++
		}
		switch rtr {
		case RTAllLimit:
			byAll[i]++
		case RTRateLimit:
			byTuple[i]++
		}
	}
	// 2 s of a.example. at 7/s: over its allowance, not over all-per-second.
	for range 14 {
		debit(0)
		clock.Advance(time.Second / 7)
	}
	// Then 100 queries at once, alternating: over both.
	for i := range 100 {
		debit(i % 2)
	}
	total := refused[0] + refused[1]
	if byTuple[0] == 0 || byAll[0]+byAll[1] == 0 || byAll[0]+byAll[1]+byTuple[0]+byTuple[1] != total {
		t.Fatalf("refused %v: by all-per-second %v, by responses-per-second %v; want both limits to refuse, and nothing else", refused, byAll, byTuple)
	}
	sum, perKind := int64(0), map[LimitKind]int64{}
	for _, a := range r.Limited(10, ByRefused) {
		sum += a.Refused
		perKind[a.LimitKind] += a.Refused
	}
	if sum != int64(total) {
		t.Errorf("Limited sums %d refusals, want %d, the responses refused (each once)", sum, total)
	}
	if perKind[LimitAll] != int64(byAll[0]+byAll[1]) || perKind[LimitResponses] != int64(byTuple[0]+byTuple[1]) {
		t.Errorf("Limited counts %v, want all-per-second %d, responses-per-second %d", perKind, byAll[0]+byAll[1], byTuple[0]+byTuple[1])
	}
	st := r.GetStats(false)
	if st.Actions[Drop]+st.Actions[Slip] != sum || st.RTReasons[RTAllLimit] != perKind[LimitAll] || st.RTReasons[RTRateLimit] != perKind[LimitResponses] {
		t.Errorf("Stats %v disagree with Limited's counts %v", st, perKind)
	}
}

func TestLimitedNetworkAccounts(t *testing.T) {
	clock := newTestClock()
	r := recordingRRL(t, clock, "requests-per-second", "2", "all-per-second", "3", "responses-per-second", "100")
	src := v4src(1, 2)
	for range 5 {
		r.DebitRequestAddr(src, true, false) // 2 served, 3 refused
	}
	for i := range 6 {
		r.DebitResponseAddr(src, true, answer(fmt.Sprintf("n%d.example.", i))) // 3 sent, 3 over all-per-second
	}
	l := r.Limited(10, ByRefused)
	if len(l) != 2 {
		t.Fatalf("Limited = %+v, want the request and all-per-second accounts", l)
	}
	net := netip.MustParsePrefix("10.1.2.0/24")
	for _, a := range l {
		if a.Network != net || a.Tuple != (ResponseTuple{}) || a.Refused != 3 {
			t.Errorf("%+v: want network %v, no tuple, 3 refused", a, net)
		}
	}
	if l[0].LimitKind == l[1].LimitKind || (l[0].LimitKind != LimitRequests && l[0].LimitKind != LimitAll) {
		t.Errorf("kinds %v and %v, want requests-per-second and all-per-second", l[0].LimitKind, l[1].LimitKind)
	}
	for _, a := range l {
		if a.LimitKind == LimitRequests && a.Debt != 500*time.Millisecond {
			t.Errorf("request account serves again in %v, want 500ms, an interval", a.Debt)
		}
	}
}

func TestLimitedNeedsTheRecord(t *testing.T) {
	clock := newTestClock()
	r := newTestRRL(t, clock, "responses-per-second", "1")
	debitN(r, udp("192.0.2.1"), answer("a.example."), 10)
	if l := r.Limited(10, ByDebt); l != nil {
		t.Errorf("Limited without the record = %+v, want nil", l)
	}
	r = recordingRRL(t, clock, "responses-per-second", "1")
	debitN(r, udp("192.0.2.1"), answer("a.example."), 10)
	if l := r.Limited(0, ByDebt); l != nil {
		t.Errorf("Limited(0) = %+v, want nil", l)
	}
	var none *RRL
	if l := none.Limited(10, ByDebt); l != nil {
		t.Errorf("nil RRL: Limited = %+v, want nil", l)
	}
}

// TestLimitedKeepsTheHeaviest fills the record past its places: it holds
// no more than recordPlaces accounts, and a heavy account that started
// last takes the place of a light one.
func TestLimitedKeepsTheHeaviest(t *testing.T) {
	clock := newTestClock()
	r := recordingRRL(t, clock, "responses-per-second", "1")
	tuple := answer("a.example.")
	for i := range 3 * recordPlaces {
		debitN(r, udpAddr(v4src(i>>8, i&0xff)), tuple, 2) // one refused each
	}
	heavy := udpAddr(netip.MustParseAddr("192.0.2.1"))
	debitN(r, heavy, tuple, 100)
	all := r.Limited(1<<20, ByRefused)
	if len(all) > recordPlaces || len(all) < recordPlaces/2 {
		t.Errorf("%d accounts reported, want at most %d and most of them", len(all), recordPlaces)
	}
	if all[0].Network.Addr() != netip.MustParseAddr("192.0.2.0") || all[0].Refused != 99 {
		t.Errorf("heaviest = %+v, want 192.0.2.0/24 with 99 refused", all[0])
	}
}

// TestLimitedAllocatesNothingInDebit: the record costs no allocation on
// the Debits it counts, and Limited allocates only its result.
func TestLimitedAllocatesNothingInDebit(t *testing.T) {
	clock := newTestClock()
	r := recordingRRL(t, clock, "responses-per-second", "1", "requests-per-second", "1")
	src, tuple := udp("192.0.2.1"), answer("a.example.")
	if n := testing.AllocsPerRun(1000, func() { r.Debit(src, tuple) }); n != 0 {
		t.Errorf("Debit allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { r.Limited(10, ByDebt) }); n > 1 {
		t.Errorf("Limited allocates %v times, want only its slice", n)
	}
}

// TestLimitedConcurrent runs Debits of many accounts from many goroutines,
// starting and ending episodes, while others read the record: under -race
// it checks the record's locking, and every account reported must be one
// that was debited.
func TestLimitedConcurrent(t *testing.T) {
	clock := newTestClock()
	r := recordingRRL(t, clock, "responses-per-second", "2", "requests-per-second", "50", "window", "1", "max-table-size", "500")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 8 {
		wg.Go(func() {
			for i := range 3000 {
				src := v4src(g, i%40)
				if act, _ := r.DebitRequestAddr(src, true, false); act == Send {
					r.DebitResponseAddr(src, true, answer(fmt.Sprintf("n%d.example.", i%7)))
				}
				if i%500 == 0 {
					clock.Advance(700 * time.Millisecond)
				}
			}
		})
	}
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, a := range r.Limited(50, ByRefused) {
					if !netip.MustParsePrefix("10.0.0.0/13").Contains(a.Network.Addr()) || a.Refused < 1 {
						t.Errorf("reported %+v, which was never debited or refused", a)
					}
				}
				r.EndQuietEpisodes(0)
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
}

func udpAddr(a netip.Addr) *net.UDPAddr { return net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 5353)) }

// BenchmarkLimited reads the record, full, beside a full table of the
// default size (100,000 accounts, of which 3,125 are limited), on a still
// test clock so that the record holds the same accounts in every run.
func BenchmarkLimited(b *testing.B) {
	c := testConfig(b, newTestClock(), "responses-per-second", "1")
	c.SetRecordLimited(true)
	r := NewRRL(c)
	tuple := answer("www.example.com.")
	for i := range 100_000 {
		src := udpAddr(netip.AddrFrom4([4]byte{byte(10 + i>>16), byte(i >> 8), byte(i), 1}))
		n := 1
		if i%32 == 0 {
			n = 3 // limited
		}
		debitN(r, src, tuple, n)
	}
	if l := r.Limited(recordPlaces, ByDebt); len(l) < recordPlaces*9/10 {
		b.Fatalf("%d accounts in the record, want it nearly full", len(l))
	}
	b.ReportAllocs()
	for b.Loop() {
		r.Limited(10, ByRefused)
	}
}

// BenchmarkDebitHotRecorded is BenchmarkDebitHot with the record of
// limited accounts on: the account is in debt, so every Debit counts a
// refusal in the record.
func BenchmarkDebitHotRecorded(b *testing.B) {
	c := testConfig(b, nil, "responses-per-second", "5")
	c.SetRecordLimited(true)
	r := NewRRL(c)
	b.ReportAllocs()
	src := udp("192.0.2.1")
	tuple := answer("www.example.com.")
	for b.Loop() {
		r.Debit(src, tuple)
	}
}

// TestLimitedSmallTable: in a table of one set (at most 320 accounts) an
// account may lie anywhere in the set, and Limited still finds it.
func TestLimitedSmallTable(t *testing.T) {
	clock := newTestClock()
	r := recordingRRL(t, clock, "responses-per-second", "1", "max-table-size", "50")
	for i := range 40 {
		debitN(r, udpAddr(v4src(7, i)), answer("a.example."), 3)
	}
	if l := r.Limited(100, ByDebt); len(l) != 40 {
		t.Errorf("%d accounts reported, want the 40 limited", len(l))
	}
}
