package rrl

import (
	"sync"
	"sync/atomic"
	"time"
)

// The watch of the busiest accounts, which Top reads. An account's balance
// says how deep in debt it is, but nothing of how fast it is charged while
// it is in credit, and an operator wants to see an account coming close to
// its allowance before it is over it. So, while someone watches, each
// charge of an account adds what it cost the account's allowance (the
// limit's interval: 200 ms for a response at responses-per-second 5, the
// bytes' time for all-bytes-per-second) to a count of the account, second
// by second of the RRL's clock. Charged at its allowance, an account adds
// one second a second; Top divides by the second to give the share.
//
// The watch is armed by Top and stays armed for watchLinger after the last
// call; the first charge after that disarms it. Unarmed, it costs a charge
// one load of an atomic flag. It is allocated on the first Top, 426 KB,
// and bounded as the record of limited accounts is: watchPlaces places,
// each key may take any of watchWays places in each of two lines, and a
// new account takes an empty place, else the one charged least over this
// second and the last. An account charged often therefore keeps its place
// against any number charged once (a spray), as long as fewer than
// watchWays accounts of its lines are busier than it.
//
// The counts are exact but for a race: a charge that found its account's
// place just as another account took it counts for the newcomer, and a
// charge of an account whose place was just taken from it is lost; at most
// the charges in flight at that moment, and only while places change
// hands.

// watchPlaces is the number of accounts the watch holds, watchWays the
// places of a line, and watchLinger how long it stays armed after Top.
const (
	watchPlaces = 4096
	watchWays   = 4
	watchLinger = int64(time.Minute)
)

// topWatch counts the charges of the accounts it holds, by second.
type topWatch struct {
	// until is the internal time after which the watch disarms itself;
	// from is when it was last armed: a second that began before is not
	// whole.
	until, from atomic.Int64

	// second is the second of internal time (now / time.Second) whose
	// counts are in charged[second&1]; those of the second before it are
	// in the other half, if they are of that second (see advance).
	second atomic.Int64
	mu     sync.Mutex // serialises advance

	keys    [watchPlaces]atomic.Uint64 // 0 is an empty place
	charged [2][watchPlaces]atomic.Uint64
	entries [watchPlaces]recordEntry // who each place counts for; since is unused
}

// lines returns the first places of the two lines that key may take,
// picked by two hashes other than those of the table and the record.
func (w *topWatch) lines(key uint64) [2]int {
	return [2]int{int(key*0xd6e8feb86659fd93>>54) &^ (watchWays - 1), int((key^key>>31)*0x94d049bb133111eb>>54) &^ (watchWays - 1)}
}

// charge adds cost (nanoseconds of the account's allowance) to the account
// key charged at now, taking it a place if it has none (n masked to bits,
// t and kind say who it is: see recordEntry). It returns false, counting
// nothing, once the watch has lingered past its last Top.
func (w *topWatch) charge(n *network, bits uint8, t *ResponseTuple, key uint64, kind LimitKind, cost, now int64) bool {
	if now > w.until.Load() {
		return false
	}
	if cost <= 0 {
		return true // a look that charges nothing (stream-time-per-second's check before the work)
	}
	sec := now / int64(time.Second)
	if cur := w.second.Load(); sec != cur {
		if sec < cur-1 {
			return true // a stale read of the clock: the second is gone
		}
		w.advance(sec)
	}
	i := w.find(key)
	if i < 0 {
		if i = w.take(n, bits, t, key, kind, sec); i < 0 {
			return true
		}
	}
	w.charged[sec&1][i].Add(uint64(cost))
	return true
}

// advance makes sec the watch's second, if it is later than the one
// counted now, zeroing its half (and the other, when no charge came in the
// second before it).
func (w *topWatch) advance(sec int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cur := w.second.Load()
	if sec <= cur {
		return
	}
	for _, half := range [2]int64{sec, sec - 1} {
		if half > cur {
			for i := range w.charged[half&1] {
				w.charged[half&1][i].Store(0)
			}
		}
	}
	w.second.Store(sec)
}

// find returns the place that holds key, or -1.
func (w *topWatch) find(key uint64) int {
	for _, first := range w.lines(key) {
		for i := first; i < first+watchWays; i++ {
			if w.keys[i].Load() == key {
				return i
			}
		}
	}
	return -1
}

// take gives the account key a place, in second sec: an empty one, else
// the one charged least over sec and the second before it. It returns -1
// when other goroutines took every place it tried.
func (w *topWatch) take(n *network, bits uint8, t *ResponseTuple, key uint64, kind LimitKind, sec int64) int {
	if key == 0 {
		return -1 // the empty place's key: never a hash in practice
	}
	for range 2 * watchWays {
		i, old := w.victim(key, sec)
		if old == key {
			return i // another charge of the account took it a place
		}
		e := &w.entries[i]
		e.mu.Lock()
		if w.keys[i].CompareAndSwap(old, key) {
			w.charged[0][i].Store(0)
			w.charged[1][i].Store(0)
			e.key, e.kind, e.net = key, kind, n.masked(bits)
			e.class, e.qtype, e.name = 0, 0, ""
			if t != nil {
				e.class, e.qtype, e.name = tupleKey(t)
			}
			e.mu.Unlock()
			return i
		}
		e.mu.Unlock()
	}
	return -1
}

// victim returns the place that the account key takes and the key it
// holds now: its own, else an empty one, else the one charged least.
func (w *topWatch) victim(key uint64, sec int64) (int, uint64) {
	least, leastKey, leastCharged := -1, uint64(0), uint64(0)
	for _, first := range w.lines(key) {
		for i := first; i < first+watchWays; i++ {
			k := w.keys[i].Load()
			if k == key || k == 0 {
				return i, k
			}
			if c := w.chargedIn(i, sec) + w.chargedIn(i, sec-1); least < 0 || c < leastCharged {
				least, leastKey, leastCharged = i, k, c
			}
		}
	}
	return least, leastKey
}

// chargedIn returns what place i was charged in second sec, which must be
// the watch's second or the one before it: 0 for a second gone.
func (w *topWatch) chargedIn(i int, sec int64) uint64 {
	if cur := w.second.Load(); sec != cur && sec != cur-1 {
		return 0
	}
	return w.charged[sec&1][i].Load()
}
