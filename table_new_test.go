package rrl

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"
	"unsafe"
)

func TestBucketIsOneCacheLine(t *testing.T) {
	if n := unsafe.Sizeof(bucket{}); n != 64 {
		t.Errorf("a bucket takes %d bytes, want 64", n)
	}
}

func TestLimitKindMatchesCategories(t *testing.T) {
	for c := range AllowanceLast {
		if LimitKind(c).String() != limitName(byte(c)) {
			t.Errorf("%v: %v", c, LimitKind(c))
		}
	}
	if LimitKindLast > 8 {
		t.Errorf("%d kinds do not fit in an ident's 3 bits", LimitKindLast)
	}
}

// TestBalanceWraps checks that a tat kept modulo 2^56 reads right on both
// sides of the points where internal time wraps, and that one from the far
// past never reads as recent.
func TestBalanceWraps(t *testing.T) {
	l := limit{interval: int64(time.Second) / 5, credit: int64(time.Second), debt: 15 * int64(time.Second)}
	for _, now := range []int64{0, 1 << 20, tatMask - int64(time.Second), tatMask, tatMask + 1, 3 * tatMask, maxClock - 1} {
		for _, d := range []int64{-l.credit, -1, 0, 1, l.debt, maxAhead} {
			v := balance(0).withTat(now + d)
			if got := v.tat(now); got != now+d {
				t.Errorf("now %#x: tat now%+d reads as now%+d", now, d, got-now)
			}
		}
		// A tat from further back than the range can tell reads as old.
		for _, age := range []int64{staleAge, 1 << 55, 1<<56 - maxAhead - 1} {
			if got := balance(0).withTat(now - age).tat(now); got > now-l.credit {
				t.Errorf("now %#x: a tat %#x ago reads as now%+d", now, age, got-now)
			}
		}
	}
}

func TestBalanceCharge(t *testing.T) {
	l := limit{interval: int64(time.Second) / 5, credit: int64(time.Second), debt: 2 * int64(time.Second)}
	now := int64(1000 * time.Second)
	v := fullCredit(now, l, 3)
	var inDebt bool
	for i := range 5 {
		if v, inDebt = v.charge(now, l); inDebt {
			t.Fatalf("debit %d of a rate of 5 in debt", i+1)
		}
	}
	if v, inDebt = v.charge(now, l); !inDebt {
		t.Fatal("sixth debit in credit")
	}
	for range 100 {
		v, _ = v.charge(now, l)
	}
	if got := v.tat(now) - now; got != l.debt {
		t.Errorf("debt %d, want at most %d", got, l.debt)
	}
	if v.generation() != 3 {
		t.Errorf("generation %d, want 3", v.generation())
	}
	// Slip counter: the first limited response slips, then every second.
	var acts []Action
	for range 5 {
		var a Action
		a, v = v.slipOrDrop(LimitResponses, 2)
		acts = append(acts, a)
	}
	if acts[0] != Slip || acts[1] != Drop || acts[2] != Slip || acts[3] != Drop {
		t.Errorf("slips %v", acts)
	}
	// Full credit earned back starts the count afresh.
	v, _ = v.charge(now+10*int64(time.Second), l)
	if v.slip() != 0 {
		t.Errorf("slip %d after full credit", v.slip())
	}
}

// model is a bucketTable's behaviour for one goroutine, written plainly:
// a list of accounts per bucket, the first empty place taken, else that of
// the account with the earliest tat (the first such).
type model struct {
	buckets [][]modelAccount
	held    int
	evicted int
}

type modelAccount struct {
	id  uint32
	tat int64
}

// check runs keys through a table of the given size and the model, with
// time moving forward by the given steps, and fails at the first
// difference.
func checkAgainstModel(t *testing.T, size int, keys []uint64, steps []int64) {
	t.Helper()
	tb := newBucketTable(size)
	st := &stripe{}
	m := model{buckets: make([][]modelAccount, tb.buckets)}
	for i := range m.buckets {
		m.buckets[i] = make([]modelAccount, tb.capacity(uint64(i)))
	}
	l := limit{interval: int64(time.Second) / 3, credit: int64(time.Second), debt: 15 * int64(time.Second)}
	now := int64(0)
	for n, key := range keys {
		now += steps[n%len(steps)]
		kind := LimitKind(key>>8) % LimitKindLast
		ref, _ := tb.find(key, kind, now, l, st)
		v, ok := ref.load()
		if !ok {
			t.Fatalf("op %d: the account found is not there", n)
		}
		w, _ := v.charge(now, l)
		if !ref.store(v, w) {
			t.Fatalf("op %d: store failed with no other Debit", n)
		}

		// The model.
		i, id := tb.index(key), identOf(key, kind)
		b := m.buckets[i]
		j := -1
		for k := range b {
			if b[k].id == id {
				j = k
				break
			}
		}
		if j < 0 {
			for k := range b {
				if b[k].id == 0 {
					j = k
					m.held++
					break
				}
			}
		}
		if j < 0 {
			j = 0
			for k := range b {
				if b[k].tat < b[j].tat {
					j = k
				}
			}
			b[j] = modelAccount{}
			m.evicted++
		}
		if b[j].id == 0 {
			b[j] = modelAccount{id: id, tat: now - l.credit}
		}
		b[j].tat = min(max(b[j].tat, now-l.credit)+l.interval, now+l.debt)

		if ref.b != tb.bucket(i) || ref.i != j || w.tat(now) != b[j].tat {
			t.Fatalf("op %d (key %#x): place %d, tat %d; the model has place %d, tat %d", n, key, ref.i, w.tat(now), j, b[j].tat)
		}
	}
	if got := int(st.held.Load()); got != m.held || int(st.evictions.Load()) != m.evicted {
		t.Errorf("held %d, evicted %d; the model %d, %d", got, st.evictions.Load(), m.held, m.evicted)
	}
}

func TestBucketTableModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, size := range []int{1, 3, 5, 7, 64, 1000} {
		var keys []uint64
		pool := make([]uint64, 3*size+2)
		for i := range pool {
			pool[i] = rng.Uint64()
		}
		for range 20 * len(pool) {
			keys = append(keys, pool[rng.IntN(len(pool))])
		}
		checkAgainstModel(t, size, keys, []int64{0, 1e6, 0, 3e8, 2e9, 0})
	}
}

// FuzzBucketTable drives a small table with keys and time steps from the
// fuzzer and compares every debit with the model.
func FuzzBucketTable(f *testing.F) {
	f.Add(uint8(3), []byte{1, 2, 3, 1, 2, 4, 5, 6, 7, 1}, []byte{0, 0, 10, 200})
	f.Add(uint8(12), []byte{9, 9, 9, 9, 200, 100, 9}, []byte{255})
	f.Fuzz(func(t *testing.T, size uint8, ops []byte, steps []byte) {
		if size == 0 || len(ops) == 0 {
			return
		}
		keys := make([]uint64, len(ops))
		for i, o := range ops {
			// Few distinct high halves, so that keys crowd into buckets;
			// low halves that differ in the tag and in the kind.
			keys[i] = uint64(o%7)<<61 | uint64(o)<<8 | uint64(o)<<20
		}
		st := []int64{0}
		for _, s := range steps {
			st = append(st, int64(s)*int64(time.Second)/50)
		}
		checkAgainstModel(t, int(size), keys, st)
	})
}

// TestBucketTableConcurrent has many goroutines debit the accounts of one
// bucket at once, with lock-free compare-and-swaps: no debit may be lost.
// Run it under -race.
func TestBucketTableConcurrent(t *testing.T) {
	const goroutines, perG = 8, 2000
	tb := newBucketTable(5)
	st := make(stripes, 1)
	l := limit{interval: 1, credit: 1, debt: 1 << 40}
	keys := []uint64{1 << 4, 2 << 4, 3 << 4, 4 << 4, 5 << 4}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perG {
				key := keys[(g+i)%len(keys)]
				for {
					ref, _ := tb.find(key, LimitResponses, 0, l, &st[0])
					v, ok := ref.load()
					if !ok {
						t.Error("the account lost its place in a table large enough")
						return
					}
					if w, _ := v.charge(0, l); ref.store(v, w) {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, key := range keys {
		ref, _ := tb.find(key, LimitResponses, 0, l, &st[0])
		v, _ := ref.load()
		// Each of goroutines*perG/5 debits of 1 ns, from full credit (-1).
		if got, want := v.tat(0), int64(goroutines*perG/len(keys)-1); got != want {
			t.Errorf("key %#x: tat %d, want %d", key, got, want)
		}
	}
	if n := st[0].held.Load(); n != 5 {
		t.Errorf("%d accounts added, want 5", n)
	}
}

func TestStripePicksOnePerGoroutine(t *testing.T) {
	s := newStripes()
	if len(s)&(len(s)-1) != 0 || len(s) < 16 {
		t.Fatalf("%d stripes", len(s))
	}
	a, b := s.pick(), s.pick()
	if a != b {
		t.Error("one goroutine picked two stripes")
	}
}

func TestStripeCounts(t *testing.T) {
	var s stripe
	s.count(AllowanceNoData, Slip, IPOk, RTRateLimit)         // common
	s.count(AllowanceLast, Drop, IPRateLimit, RTNotReached)   // common, no category
	s.count(AllowanceError, Send, IPNotReached, RTNotReached) // not common
	s.count(AllowanceLast+3, Send, IPCacheFull, RTCacheFull)  // not common, no category
	var sum Stats
	s.addTo(&sum, true)
	want := Stats{}
	want.RPS[AllowanceNoData], want.RPS[AllowanceError] = 1, 1
	want.Actions[Slip], want.Actions[Drop], want.Actions[Send] = 1, 1, 2
	want.IPReasons[IPOk], want.IPReasons[IPRateLimit], want.IPReasons[IPNotReached], want.IPReasons[IPCacheFull] = 1, 1, 1, 1
	want.RTReasons[RTRateLimit], want.RTReasons[RTNotReached], want.RTReasons[RTCacheFull] = 1, 2, 1
	if sum != want {
		t.Errorf("got %v\nwant %v", sum, want)
	}
	var again Stats
	s.addTo(&again, false)
	if again != (Stats{}) {
		t.Errorf("not zeroed: %v", again)
	}
	if len(commonOutcomeOf) != commonOutcomes {
		t.Errorf("%d common outcomes, want %d", len(commonOutcomeOf), commonOutcomes)
	}
}
