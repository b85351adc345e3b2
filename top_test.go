package rrl

import (
	"net/netip"
	"sync"
	"testing"
	"time"
)

// watchedRRL returns an RRL on a ManualClock from keyword-value pairs, its
// watch armed and at the start of its first whole second.
func watchedRRL(t testing.TB, kv ...string) (*RRL, *ManualClock) {
	t.Helper()
	c := testConfig(t, nil, kv...)
	clock := NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 300_000_000, time.UTC))
	c.SetClock(clock)
	r := NewRRL(c)
	r.Debit(nil, nil)                                  // the clock's first reading
	clock.Set(clock.Now().Add(300 * time.Millisecond)) // then into a second
	got, wait := r.Top(10)
	if got != nil || wait != 1700*time.Millisecond {
		t.Fatalf("first Top = %v, wait %v; want none, and a wait of 1.7 s: the rest of this second and the next", got, wait)
	}
	clock.Set(clock.Now().Add(wait))
	return r, clock
}

// spread makes n debits of src for tuple, evenly over the second from
// now, and leaves the clock at the end of it.
func spread(r *RRL, clock *ManualClock, n int, debit func()) {
	start := clock.Now()
	for i := range n {
		clock.Set(start.Add(time.Duration(i) * time.Second / time.Duration(n)))
		debit()
	}
	clock.Set(start.Add(time.Second))
}

func TestTopWaitsForAWholeSecond(t *testing.T) {
	c := testConfig(t, nil, "responses-per-second", "10")
	clock := NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c.SetClock(clock)
	r := NewRRL(c)
	src := netip.MustParseAddr("192.0.2.7")
	a := answer("www.example.")
	r.DebitAddr(src, true, a) // internal time 0
	step := func(d time.Duration) { clock.Set(clock.Now().Add(d)) }
	step(300 * time.Millisecond)
	if got, wait := r.Top(10); got != nil || wait != 1700*time.Millisecond {
		t.Fatalf("first Top at 0.3 s = %v, wait %v; want none, and the rest of this second and the next", got, wait)
	}
	step(time.Second) // 1.3 s: inside the first whole second
	r.DebitAddr(src, true, a)
	if got, wait := r.Top(10); got != nil || wait != 700*time.Millisecond {
		t.Fatalf("Top at 1.3 s = %v, wait %v; want none, and 0.7 s", got, wait)
	}
	step(700 * time.Millisecond)
	got, wait := r.Top(10)
	if wait != 0 || len(got) != 1 || got[0].Rate != 1 {
		t.Fatalf("Top at 2 s = %+v, wait %v; want the one account at the 1 response of the second from 1 s", got, wait)
	}
}

func TestTopShares(t *testing.T) {
	r, clock := watchedRRL(t, "responses-per-second", "10", "requests-per-second", "80", "all-bytes-per-second", "100000")
	busy, quiet := netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("2001:db8::1")
	www, mail := answer("www.example."), answer("mail.example.")
	www.Size, mail.Size = 1000, 200
	i := 0
	spread(r, clock, 40, func() {
		r.DebitAddr(busy, true, www) // 40 a second: 4 times responses-per-second
		if i%5 == 0 {
			r.DebitAddr(quiet, true, mail) // 8 a second
		}
		i++
	})
	got, wait := r.Top(MaxTop)
	if wait != 0 {
		t.Fatalf("Top waits %v after a whole second", wait)
	}
	want := []topRow{
		{"192.0.2.0/24", LimitResponses, "www.example.", 4, 40, true},
		{"2001:db8::/56", LimitResponses, "mail.example.", 0.8, 8, false},
		{"192.0.2.0/24", LimitRequests, "", 0.5, 40, false},
		{"192.0.2.0/24", LimitAllBytes, "", 0.4, 40_000, false},
		{"2001:db8::/56", LimitRequests, "", 0.1, 8, false},
		{"2001:db8::/56", LimitAllBytes, "", 0.016, 1600, false},
	}
	checkTop(t, got, want)
}

// topRow is what a test expects of a TopAccount.
type topRow struct {
	net   string
	kind  LimitKind
	name  string
	share float64
	rate  float64
	debt  bool
}

func checkTop(t *testing.T, got []TopAccount, want []topRow) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("Top = %+v, want %d accounts", got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Network.String() != w.net || g.LimitKind != w.kind || g.Tuple.SalientName != w.name ||
			!near(g.Share, w.share) || !near(g.Rate, w.rate) || (g.Debt > 0) != w.debt {
			t.Errorf("Top[%d] = %v %v %q share %v rate %v debt %v; want %+v", i, g.Network, g.LimitKind, g.Tuple.SalientName, g.Share, g.Rate, g.Debt, w)
		}
	}
}

func TestTopCountsRefusedRequests(t *testing.T) {
	r, clock := watchedRRL(t, "requests-per-second", "40")
	src := netip.MustParseAddr("192.0.2.7")
	refused := 0
	for range 2 { // the first second spends the account's credit
		refused = 0
		spread(r, clock, 80, func() {
			if act, _ := r.DebitRequestAddr(src, true, false); act == Drop {
				refused++
			}
		})
	}
	if refused != 40 {
		t.Fatalf("refused %d of 80 requests in the second second, want 40", refused)
	}
	checkTop(t, r.topNow(t), []topRow{{"192.0.2.0/24", LimitRequests, "", 2, 80, false}}) // at the second's end it has earned the next
}

// topNow is Top of every account, which must not wait.
func (r *RRL) topNow(t *testing.T) []TopAccount {
	t.Helper()
	got, wait := r.Top(MaxTop)
	if wait != 0 {
		t.Fatalf("Top waits %v", wait)
	}
	return got
}

// near reports whether a and b agree to one part in a million.
func near(a, b float64) bool { return a-b < b*1e-6+1e-9 && b-a < b*1e-6+1e-9 }

func TestTopCountsTheLastWholeSecondOnly(t *testing.T) {
	r, clock := watchedRRL(t, "responses-per-second", "10")
	src := netip.MustParseAddr("192.0.2.7")
	a := answer("www.example.")
	spread(r, clock, 20, func() { r.DebitAddr(src, true, a) })
	spread(r, clock, 5, func() { r.DebitAddr(src, true, a) })
	if got, _ := r.Top(1); len(got) != 1 || got[0].Rate != 5 {
		t.Fatalf("Top = %+v, want the account at the 5 of the last second, not the 20 before", got)
	}
	clock.Set(clock.Now().Add(time.Second)) // a second with no charge
	if got, _ := r.Top(1); len(got) != 0 {
		t.Fatalf("Top after a quiet second = %+v, want none", got)
	}
}

func TestTopDisarms(t *testing.T) {
	r, clock := watchedRRL(t, "responses-per-second", "10")
	src := netip.MustParseAddr("192.0.2.7")
	a := answer("www.example.")
	r.DebitAddr(src, true, a)
	if !r.telling.Load() {
		t.Fatal("the watch is not armed after Top")
	}
	clock.Set(clock.Now().Add(time.Duration(watchLinger) + time.Millisecond))
	r.DebitAddr(src, true, a)
	if r.telling.Load() {
		t.Fatal("the watch is still armed a minute after the last Top")
	}
	if got, wait := r.Top(10); got != nil || wait < time.Second {
		t.Fatalf("Top after the watch disarmed = %v, wait %v; want none, and a new whole second to wait for", got, wait)
	}
}

func TestTopKeepsTheBusiestAmidSpray(t *testing.T) {
	r, clock := watchedRRL(t, "responses-per-second", "10", "max-table-size", "20000")
	a := answer("www.example.")
	busy := []netip.Addr{netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("2001:db8::7")}
	sprayed := 0
	for range 3 { // counted exactly from its second second in the watch: see the next test
		spread(r, clock, 20, func() {
			for _, b := range busy {
				r.DebitAddr(b, true, a)
			}
			for range 1000 { // 20,000 sources a second, once each: five times the watch's places
				r.DebitAddr(spraySource(sprayed), true, a)
				sprayed++
			}
		})
	}
	got, _ := r.Top(4)
	if len(got) != 4 {
		t.Fatalf("Top(4) = %+v", got)
	}
	for i, b := range busy {
		p, _ := b.Prefix(map[bool]int{true: 24, false: 56}[b.Is4()])
		found := false
		for _, g := range got[:3] {
			found = found || g.Network == p && g.Rate == 20
		}
		if !found {
			t.Errorf("busy network %d (%v) is not among the first three at 20 a second: %+v", i, p, got)
		}
	}
	if got[3].Rate != 1 {
		t.Errorf("the fourth is %+v, want a sprayed source at 1 a second", got[3])
	}
}

func TestTopOddCalls(t *testing.T) {
	var nilRRL *RRL
	if got, wait := nilRRL.Top(10); got != nil || wait != 0 {
		t.Errorf("nil RRL: Top = %v, %v", got, wait)
	}
	r, clock := watchedRRL(t, "responses-per-second", "10")
	if got, _ := r.Top(0); got != nil {
		t.Errorf("Top(0) = %v", got)
	}
	src := netip.MustParseAddr("192.0.2.7")
	spread(r, clock, 3, func() {
		for i := range 10 {
			r.DebitAddr(src, true, answer(string(rune('a'+i))+".example."))
		}
	})
	if got, _ := r.Top(3); len(got) != 3 {
		t.Errorf("Top(3) of 10 accounts = %d accounts", len(got))
	}
	if got, _ := r.Top(1 << 30); len(got) != 10 {
		t.Errorf("Top(1<<30) of 10 accounts = %d accounts", len(got))
	}
}

// TestTopRace charges from many goroutines while Top is read, arming and
// disarming the watch, for the race detector; and checks that what a
// whole second counted adds up.
func TestTopRace(t *testing.T) {
	r, clock := watchedRRL(t, "responses-per-second", "10")
	a := answer("www.example.")
	const goroutines, each = 8, 2000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			src := netip.AddrFrom4([4]byte{10, byte(g), 0, 1})
			for i := range each {
				r.DebitAddr(src, true, a)
				if i%200 == 0 {
					r.Top(5)
				}
			}
		})
	}
	wg.Wait()
	clock.Set(clock.Now().Add(time.Second))
	got, _ := r.Top(MaxTop)
	if len(got) != goroutines {
		t.Fatalf("Top = %d accounts, want %d", len(got), goroutines)
	}
	for _, g := range got {
		if g.Rate != each {
			t.Errorf("%v counted %v in its second, want %d", g.Network, g.Rate, each)
		}
	}
}

// BenchmarkDebitAddrHotWatched is BenchmarkDebitAddrHot while someone
// watches (Top armed): what the watch costs a Debit while it counts. Not
// watched, the Debit is BenchmarkDebitAddrHot itself.
func BenchmarkDebitAddrHotWatched(b *testing.B) {
	r := benchRRL(b)
	src := netip.MustParseAddr("192.0.2.1")
	tuple := answer("www.example.com.")
	r.Top(1)
	for b.Loop() {
		r.DebitAddr(src, true, tuple)
	}
}

// BenchmarkDebitSprayWatched is a spray of new sources, one debit each,
// while someone watches: each takes a place in the watch.
func BenchmarkDebitSprayWatched(b *testing.B) {
	r := benchRRL(b)
	tuple := answer("www.example.com.")
	r.Top(1)
	i := 0
	for b.Loop() {
		r.DebitAddr(spraySource(i), true, tuple)
		i++
	}
}

func TestTopStreamTime(t *testing.T) {
	r, clock := watchedRRL(t, "stream-time-per-second", "100ms")
	src := netip.MustParseAddr("192.0.2.7")
	spread(r, clock, 4, func() { r.DebitStreamTime(src, 50*time.Millisecond) })              // 200 ms of handling in the second
	checkTop(t, r.topNow(t), []topRow{{"192.0.2.0/24", LimitStreamTime, "", 2, 0.2, false}}) // twice the budget, the debt earned back by the second's end with the burst
}

// TestTopUnasked: until someone asks, there is no watch and a charge has
// no one to tell, so it goes no further than its account.
func TestTopUnasked(t *testing.T) {
	r := newTestRRL(t, newTestClock(), "responses-per-second", "1", "requests-per-second", "1")
	for range 10 {
		r.DebitAddr(netip.MustParseAddr("192.0.2.7"), true, answer("www.example."))
	}
	if r.watch.Load() != nil || r.telling.Load() {
		t.Fatalf("without Top: watch %p, telling %v; want none, false", r.watch.Load(), r.telling.Load())
	}
	recorded := recordingRRL(t, newTestClock(), "responses-per-second", "1")
	if !recorded.telling.Load() {
		t.Fatal("with the record on, charges are not told")
	}
}
