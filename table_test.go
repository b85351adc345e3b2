package rrl

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"
	"time"
	"unsafe"
)

// spraySource returns the i-th of many distinct /24 client networks.
func spraySource(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10 + byte(i>>16), byte(i >> 8), byte(i), 1})
}

func TestTableFullSpray(t *testing.T) {
	const size = 1000
	r := newTestRRL(t, newTestClock(), "responses-per-second", "5", "max-table-size", fmt.Sprint(size), "slip-ratio", "0")
	victim := netip.MustParseAddr("192.0.2.1")
	a := answer("www.example.")
	for range 10 {
		r.DebitAddr(victim, true, a) // the victim's account goes into debt
	}
	for i := range 200_000 {
		if act, _, _ := r.DebitAddr(spraySource(i), true, a); act != Send {
			t.Fatalf("spoofed source %d, new to the table, got %v", i, act)
		}
		if i%100 == 0 {
			if act, _, _ := r.DebitAddr(victim, true, a); act != Drop {
				t.Fatalf("after %d spoofed sources the victim's account was recycled: %v", i, act)
			}
		}
	}
	if act, _, _ := r.DebitAddr(netip.MustParseAddr("198.51.100.1"), true, a); act != Send {
		t.Errorf("a fresh client got %v", act)
	}
	s := r.GetStats(false)
	if s.CacheLength > size {
		t.Errorf("table holds %d accounts, more than max-table-size %d", s.CacheLength, size)
	}
	if s.Evictions < 200_000-size {
		t.Errorf("only %d evictions", s.Evictions)
	}
}

func TestVictimChoice(t *testing.T) {
	// One shard of three accounts, one response per second each, clock still.
	r := newTestRRL(t, newTestClock(), "responses-per-second", "1", "max-table-size", "3", "slip-ratio", "0")
	src := udp("192.0.2.1")
	debitN(r, src, answer("a."), 2) // in debt
	debitN(r, src, answer("b."), 1) // in credit
	debitN(r, src, answer("c."), 2) // in debt

	// A new account takes the place of the one in credit, although it is
	// not the least recently used.
	debitN(r, src, answer("d."), 1)
	if got := actions(r, src, answer("a."), 1) + actions(r, src, answer("c."), 1); got != "DD" {
		t.Errorf("a and c: %s, want DD: accounts in debt must be kept", got)
	}
	if got := actions(r, src, answer("b."), 1); got != "S" {
		t.Errorf("b: %s, want S: b's account was recycled, so b starts afresh", got)
	}
	// b's return recycled d, the one in credit. Put b in debt too: with
	// every account in debt, the least recently used (a) is recycled.
	debitN(r, src, answer("b."), 1)
	debitN(r, src, answer("e."), 1)
	if got := actions(r, src, answer("c."), 1) + actions(r, src, answer("a."), 1); got != "DS" {
		t.Errorf("c then a: %s, want DS: a, least recently used, recycled", got)
	}
}

func TestBytesPerAccount(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a 100,000-account table")
	}
	const size = 100_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := newTestRRL(t, newTestClock(), "responses-per-second", "5", "max-table-size", fmt.Sprint(size))
	a := answer("www.example.")
	for i := range 2 * size {
		r.DebitAddr(spraySource(i), true, a)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n := r.GetStats(false).CacheLength; n != size {
		t.Fatalf("table holds %d accounts, want %d", n, size)
	}
	perAccount := float64(after.HeapAlloc-before.HeapAlloc) / size
	t.Logf("%.1f bytes per account", perAccount)
	if perAccount > 48 {
		t.Errorf("%.1f bytes per account, want at most 48", perAccount)
	}
	runtime.KeepAlive(r)
}

func TestAccountSize(t *testing.T) {
	if n := unsafe.Sizeof(account{}); n != 28 {
		t.Errorf("an account takes %d bytes, want 28", n)
	}
}

// TestShardIndex checks the open-addressing index against a model through
// many insertions and evictions, with keys crowded onto a few home slots so
// that probe runs are long and wrap around the end of the index. The larger
// shard grows its index and accounts several times on the way.
func TestShardIndex(t *testing.T) {
	for _, c := range []struct {
		limit      int
		highs, los uint32 // distinct high halves, and home-placing low bits
		every      int    // insertions between checks of every key held
		insertions int
	}{{40, 64, 8, 97, 20_000}, {2000, 4096, 256, 1999, 8000}} {
		t.Run(fmt.Sprint(c.limit), func(t *testing.T) {
			tb := newTable(c.limit)
			s := &tb.shards[0]
			rng := rand.New(rand.NewPCG(1, 2))
			held := map[uint64]bool{}
			for n := range c.insertions {
				key := uint64(rng.Uint32N(c.highs))<<32 | uint64(rng.Uint32N(c.los))<<24 | uint64(n%3)
				if rng.IntN(4) == 0 {
					key |= 0xFFFFFFF0 // homes at the very end of the index
				}
				full := s.n == s.limit
				var victim uint64
				if full {
					victim = s.at(s.victim(0)).key.join()
				}
				s.debit(key, 0, 0, limit{1, 1, 1})
				_, i := s.find(key)
				if full && !held[key] {
					delete(held, victim)
				}
				held[key] = true
				if got := s.at(i).key.join(); got != key {
					t.Fatalf("debit(%#x) holds the account of %#x", key, got)
				}
				if len(held) > int(s.limit) || len(held) != int(s.n) {
					t.Fatalf("model holds %d, shard %d, limit %d", len(held), s.n, s.limit)
				}
				if n%c.every == 0 || s.n == s.room { // and just before each growth
					for k := range held {
						if _, i := s.find(k); i == none || s.at(i).key.join() != k {
							t.Fatalf("after %d insertions %#x is held but not found", n, k)
						}
					}
				}
			}
			if want := indexLen(s.limit); len(s.slots) != want {
				t.Errorf("a full shard's index has %d slots, want %d", len(s.slots), want)
			}
		})
	}
}

func TestVictimPrefersRepaidDebt(t *testing.T) {
	clock := newTestClock()
	r := newTestRRL(t, clock, "responses-per-second", "1", "max-table-size", "2", "slip-ratio", "0")
	src := udp("192.0.2.1")
	debitN(r, src, answer("a."), 2) // a: in debt by one second
	clock.Advance(2 * time.Second)  // a has repaid, but is still on the debt list
	debitN(r, src, answer("b."), 1) // b: in credit, used more recently than a
	debitN(r, src, answer("c."), 1) // recycles a, not b
	if got := actions(r, src, answer("b."), 2); got != "DD" {
		t.Errorf("b: %s, want DD: b's account, spent, was kept", got)
	}
}

// TestVictimSparesDebtWhenOthersRepaid has every account of a full shard
// go into debt, the least recently used deepest: once the others have paid
// off their debt, a new account takes the place of one of them, not of the
// one still in debt.
func TestVictimSparesDebtWhenOthersRepaid(t *testing.T) {
	clock := newTestClock()
	r := newTestRRL(t, clock, "responses-per-second", "1", "max-table-size", "3", "slip-ratio", "0")
	src := udp("192.0.2.1")
	debitN(r, src, answer("victim."), 20) // 15 seconds in debt (the window)
	clock.Advance(500 * time.Millisecond)
	debitN(r, src, answer("b."), 2) // in debt for a second
	debitN(r, src, answer("c."), 2)
	clock.Advance(3 * time.Second) // b and c have paid off; the victim has not
	debitN(r, src, answer("d."), 1)
	if got := actions(r, src, answer("victim."), 1); got != "D" {
		t.Errorf("victim: %s, want D: its account, still in debt, must be kept", got)
	}
}

func TestLRUOrderWithinList(t *testing.T) {
	r := newTestRRL(t, newTestClock(), "responses-per-second", "10", "max-table-size", "3", "slip-ratio", "0")
	src := udp("192.0.2.1")
	for _, n := range []string{"a.", "b.", "c.", "a."} { // a used again: b is now the oldest
		debitN(r, src, answer(n), 1)
	}
	debitN(r, src, answer("d."), 1) // recycles b
	if got := debitN(r, src, answer("a."), 9); got.drop != 1 {
		t.Errorf("a: %+v, want one drop (its account, with two responses spent, kept)", got)
	}
	if got := debitN(r, src, answer("b."), 10); got.drop != 0 {
		t.Errorf("b: %+v, want no drop (its account recycled)", got)
	}
}

// TestTableShape checks how tables are split: shards of at least 256
// accounts up to 64 of them, more shards only so that none holds more
// than 16,384, and the shares adding up to the size.
func TestTableShape(t *testing.T) {
	for _, c := range []struct{ size, shards int }{
		{1, 1}, {511, 1}, {512, 2}, {100_000, 64}, {64 << 14, 64}, {64<<14 + 1, 128}, {1 << 28, 16384},
	} {
		tb := newTable(c.size)
		if len(tb.shards) != c.shards {
			t.Errorf("size %d: %d shards, want %d", c.size, len(tb.shards), c.shards)
		}
		total := 0
		for i := range tb.shards {
			s := &tb.shards[i]
			total += int(s.limit)
			if s.limit > maxShardSize || s.room > s.limit || len(s.slots) != indexLen(s.room) {
				t.Fatalf("size %d: shard %d has limit %d, room %d, %d slots", c.size, i, s.limit, s.room, len(s.slots))
			}
		}
		if total != c.size {
			t.Errorf("size %d: shards hold %d in all", c.size, total)
		}
	}
}

// TestTableStartsSmall checks that a table is allocated as it fills: an
// RRL with the largest table takes little memory until it is used.
func TestTableStartsSmall(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := newTestRRL(t, nil, "responses-per-second", "5", "max-table-size", "268435456")
	runtime.ReadMemStats(&after)
	// 16,384 shards of a few hundred bytes; full, it would take 10 GiB.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Errorf("an empty table of 2^28 accounts took %d bytes", grew)
	}
	runtime.KeepAlive(r)
}
