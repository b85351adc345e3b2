package rrl

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentStress runs many goroutines through one RRL, with every
// feature on, a small table and a reader that sweeps quiet episodes and
// zeroes the statistics as it goes. Run
// under -race it checks the locking; the totals check that no Debit is lost
// or counted twice. On a still test clock the amount of limiting does not
// depend on scheduling, so the test also checks that limiting happened; on
// the built-in clock it checks the totals only.
func TestConcurrentStress(t *testing.T) {
	t.Run("test clock", func(t *testing.T) { stress(t, newTestClock()) })
	t.Run("built-in clock", func(t *testing.T) { stress(t, nil) })
}

func stress(t *testing.T, clock *testClock) {
	const (
		goroutines = 16
		perG       = 5000
		size       = 1500
	)
	c := NewConfig()
	for k, v := range map[string]string{
		"responses-per-second": "5", "errors-per-second": "2", "all-per-second": "200", "requests-per-second": "100",
		"qps-scale": "1000", "max-table-size": fmt.Sprint(size), "exempt-clients": "10.0.0.0/24",
	} {
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
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perG {
				src := netip.AddrFrom4([4]byte{10, byte(g), byte(i % 20), 1})
				tuple := &ResponseTuple{Class: 1, Type: uint16(i % 2), AllowanceCategory: AllowanceCategory(i % 6), SalientName: names[i%len(names)]}
				act, _, _ := r.DebitAddr(src, i%7 != 0, tuple)
				if act < Send || act >= ActionLast {
					t.Errorf("action %d", act)
				}
			}
		}()
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
	if clock != nil && (total.Actions[Drop] == 0 || total.Actions[Slip] == 0 || total.IPReasons[IPRateLimit] == 0 || total.Evictions == 0 || episodes.Load() == 0) {
		t.Errorf("the stress did not exercise limiting: %s, %d episodes", total, episodes.Load())
	}
}
