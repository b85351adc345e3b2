package rrl

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentStress runs many goroutines through one RRL (half of them
// with Debit, half with DebitRequest and DebitResponse), with a small
// table and a reader that sweeps quiet episodes and zeroes the statistics
// as it goes: once with every feature on, and once with response limits
// only, so that Debit takes its short path. Run under -race it checks the
// locking; the totals check that no Debit is lost or counted twice. On a
// still test clock the amount of limiting does not depend on scheduling, so
// the test also checks that limiting happened; on the built-in clock it
// checks the totals only.
func TestConcurrentStress(t *testing.T) {
	every := map[string]string{"all-per-second": "200", "requests-per-second": "100", "proven-requests-per-second": "150",
		"qps-scale": "1000", "exempt-clients": "10.0.0.0/24"}
	t.Run("test clock", func(t *testing.T) { stress(t, newTestClock(), 1500, every) })
	t.Run("built-in clock", func(t *testing.T) { stress(t, nil, 1500, every) })
	// Without the two per-network accounts, fewer accounts in all: a
	// smaller table, so that some are recycled.
	t.Run("response limits only", func(t *testing.T) { stress(t, newTestClock(), 500, nil) })
}

// debitOneOrTwo charges a response with Debit, or as a server that
// refuses requests before the work does: DebitRequest (with or without a
// valid cookie) then, if the request is served, DebitResponse. Either way
// the statistics count one outcome.
func debitOneOrTwo(r *RRL, twoCalls, validCookie bool, src net.Addr, tuple *ResponseTuple) Action {
	if !twoCalls {
		act, _, _ := r.Debit(src, tuple)
		return act
	}
	if act, _ := r.DebitRequest(src, validCookie); act != Send {
		return act
	}
	act, _, _ := r.DebitResponse(src, tuple)
	return act
}

// stress runs the goroutines with responses-per-second, errors-per-second,
// max-table-size size, and the settings in more.
func stress(t *testing.T, clock *testClock, size int, more map[string]string) {
	const (
		goroutines = 16
		perG       = 5000
	)
	c := NewConfig()
	settings := map[string]string{"responses-per-second": "5", "errors-per-second": "2", "max-table-size": fmt.Sprint(size)}
	maps.Copy(settings, more)
	for k, v := range settings {
		if err := c.SetValue(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if clock != nil {
		c.SetNowFunc(clock.Now)
	}
	var episodes atomic.Int64
	c.SetObserver(func(e Event) {
		if e.Started {
			episodes.Add(1)
		}
	})
	r := NewRRL(c)

	var total Stats
	var statsMu sync.Mutex
	var wg sync.WaitGroup
	done := make(chan struct{})
	readerDone := make(chan struct{})
	go func() { // a reader zeroing the counters while Debits run
		defer close(readerDone)
		for {
			select {
			case <-done:
				return
			default:
				r.EndQuietEpisodes(0)
				s := r.GetStats(true)
				statsMu.Lock()
				total.Add(&s)
				statsMu.Unlock()
			}
		}
	}()
	names := []string{"a.example.", "B.example.", "c.example", "*.d.example."}
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				ip := net.IPv4(10, byte(g), byte(i%20), 1)
				var src net.Addr = &net.UDPAddr{IP: ip}
				if i%7 == 0 {
					src = &net.TCPAddr{IP: ip}
				}
				tuple := &ResponseTuple{Class: 1, Type: uint16(i % 2), AllowanceCategory: AllowanceCategory(i % 6), SalientName: names[i%len(names)]}
				act := debitOneOrTwo(r, g%2 == 0, i%5 == 0, src, tuple)
				if act < Send || act >= ActionLast {
					t.Errorf("action %d", act)
				}
			}
		})
	}
	wg.Wait()
	close(done)
	<-readerDone
	final := r.GetStats(true)
	statsMu.Lock()
	defer statsMu.Unlock()
	total.Add(&final)

	var calls int64
	for _, n := range total.Actions {
		calls += n
	}
	if calls != goroutines*perG {
		t.Errorf("stats count %d Debits, want %d", calls, goroutines*perG)
	}
	if final.CacheLength > size {
		t.Errorf("table holds %d accounts, more than %d", final.CacheLength, size)
	}
	requestLimit := more["requests-per-second"] != ""
	if clock != nil && (total.Actions[Drop] == 0 || total.Actions[Slip] == 0 || requestLimit && total.IPReasons[IPRateLimit] == 0 || total.Evictions == 0 || episodes.Load() == 0) {
		t.Errorf("the stress did not exercise limiting: %s, %d episodes", total, episodes.Load())
	}
}

// TestConcurrentSharedAccounts has many goroutines debit the same few
// accounts at once, so that their compare-and-swaps collide all the time:
// on a still test clock every account sends exactly its allowance however
// the goroutines interleave (a lost or doubled debit would change that),
// and on a tiny table new accounts keep taking the places of accounts that
// other goroutines are debiting. Run it under -race.
func TestConcurrentSharedAccounts(t *testing.T) {
	const goroutines, perG = 16, 2000
	names := []string{"a.example.", "b.example.", "c.example.", "d.example."}
	srcs := []net.Addr{udp("192.0.2.1"), udp("198.51.100.1"), udp("203.0.113.1")}
	run := func(r *RRL) (sent int64) {
		var wg sync.WaitGroup
		var n atomic.Int64
		for g := range goroutines {
			wg.Go(func() {
				for i := range perG {
					k := g + i
					if act, _, _ := r.Debit(srcs[k%len(srcs)], answer(names[k/len(srcs)%len(names)])); act == Send {
						n.Add(1)
					}
				}
			})
		}
		wg.Wait()
		return n.Load()
	}

	t.Run("exact allowance", func(t *testing.T) {
		r := newTestRRL(t, newTestClock(), "responses-per-second", "5", "max-table-size", "1000")
		for _, src := range srcs { // the accounts exist before the race
			for _, name := range names {
				r.Debit(src, answer(name))
			}
		}
		accounts := int64(len(srcs) * len(names))
		if sent := run(r); sent != 4*accounts {
			t.Errorf("%d responses sent, want %d: four more for each of %d accounts", sent, 4*accounts, accounts)
		}
		if s := r.GetStats(false); s.Actions[Send] != 5*accounts || s.Evictions != 0 {
			t.Errorf("stats %s", s)
		}
	})
	t.Run("tiny table", func(t *testing.T) {
		var starts, stops atomic.Int64
		c := NewConfig()
		c.SetValue("responses-per-second", "5")
		c.SetValue("max-table-size", "7")
		c.SetNowFunc(newTestClock().Now)
		c.SetObserver(func(e Event) {
			if e.Started {
				starts.Add(1)
			} else {
				stops.Add(1)
			}
		})
		r := NewRRL(c)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 200 {
				r.EndQuietEpisodes(0)
			}
		}()
		sent := run(r)
		<-done
		s := r.GetStats(false)
		if s.Actions[Send]+s.Actions[Drop]+s.Actions[Slip] != goroutines*perG || s.Actions[Send] != sent {
			t.Errorf("stats %s, %d sent", s, sent)
		}
		if s.Evictions == 0 || s.CacheLength > 7 || starts.Load() == 0 || stops.Load() > starts.Load() {
			t.Errorf("stats %s, %d starts, %d stops", s, starts.Load(), stops.Load())
		}
	})
}

// TestLimitedAmidSpray floods 200 networks into debt, then keeps flooding
// them while a spray of new sources fills a table of 20,000 accounts and
// turns it over, moving accounts between their buckets to make room, and
// a reader calls Limited all the while: every call must list all 200, the
// flood keeping them in debt on a clock that stands still. Limited looks
// the accounts of its record up in the table; a lookup that missed an
// account as it moved would drop it from the record for good. Run it
// under -race.
func TestLimitedAmidSpray(t *testing.T) {
	const flooded, sprayers, perSprayer = 200, 2, 15_000
	for round := range 30 {
		c := NewConfig()
		for k, v := range map[string]string{"responses-per-second": "5", "max-table-size": "20000"} {
			if err := c.SetValue(k, v); err != nil {
				t.Fatal(err)
			}
		}
		c.SetRecordLimited(true)
		c.SetClock(NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
		r := NewRRL(c)
		victims := make([]netip.Addr, flooded)
		a := answer("www.example.")
		for i := range victims {
			victims[i] = netip.AddrFrom4([4]byte{172, 16 + byte(i/250), byte(i % 250), 1})
			for range 7 { // 5 a second with a second's credit: the sixth is in debt
				r.DebitAddr(victims[i], true, a)
			}
		}
		var spraying sync.WaitGroup
		var done atomic.Bool
		var reads atomic.Int64
		for g := range sprayers {
			spraying.Go(func() {
				// The spray goes on past its share until Limited has
				// been read a few times during it, however the two
				// goroutines are scheduled (bounded all the same).
				for i := 0; i < perSprayer || reads.Load() < 3 && i < 20*perSprayer; i++ {
					r.DebitAddr(spraySource(g*20*perSprayer+i), true, a)
				}
			})
		}
		var flooding sync.WaitGroup
		flooding.Go(func() {
			for i := 0; !done.Load(); i++ {
				r.DebitAddr(victims[i%flooded], true, a)
			}
		})
		missing := map[netip.Prefix]int{}
		var reading sync.WaitGroup
		reading.Go(func() {
			for !done.Load() {
				listed := map[netip.Prefix]bool{}
				for _, l := range r.Limited(recordPlaces, ByDebt) {
					listed[l.Network] = true
				}
				for _, v := range victims {
					if p := netip.PrefixFrom(v, 24).Masked(); !listed[p] {
						missing[p]++
					}
				}
				reads.Add(1)
			}
		})
		spraying.Wait()
		done.Store(true)
		flooding.Wait()
		reading.Wait()
		if s := r.GetStats(false); s.Evictions == 0 {
			t.Fatalf("round %d: the spray recycled no account (%d held)", round, s.CacheLength)
		}
		if len(missing) > 0 {
			t.Errorf("round %d: %d of %d flooded networks were missing from some of %d calls of Limited (%v ...)",
				round, len(missing), flooded, reads.Load(), first(missing))
		}
		t.Logf("round %d: %d calls of Limited, %d evictions", round, reads.Load(), r.GetStats(false).Evictions)
		if reads.Load() == 0 {
			t.Errorf("round %d: Limited was never called during the spray", round)
		}
	}
}

// first returns one key of m and its value, for a message.
func first(m map[netip.Prefix]int) string {
	for k, v := range m {
		return fmt.Sprintf("%s missing from %d calls", k, v)
	}
	return ""
}
