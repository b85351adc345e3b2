package rrl

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// Benchmarks use the built-in clock and the defaults but for
// responses-per-second 5: the configuration of a typical deployment.

func benchRRL(b *testing.B, kv ...string) *RRL {
	b.Helper()
	b.ReportAllocs()
	return newTestRRLReal(b, append([]string{"responses-per-second", "5"}, kv...)...)
}

func newTestRRLReal(b *testing.B, kv ...string) *RRL { return newTestRRL(b, nil, kv...) }

// BenchmarkDebitHot is one account hit again and again, through net.Addr.
func BenchmarkDebitHot(b *testing.B) {
	r := benchRRL(b)
	src := udp("192.0.2.1")
	tuple := answer("www.example.com.")
	for b.Loop() {
		r.Debit(src, tuple)
	}
}

// BenchmarkDebitAddrHot is one account through the netip entry point.
func BenchmarkDebitAddrHot(b *testing.B) {
	r := benchRRL(b)
	src := netip.MustParseAddr("192.0.2.1")
	tuple := answer("www.example.com.")
	for b.Loop() {
		r.DebitAddr(src, true, tuple)
	}
}

// BenchmarkDebitAddrHotManualClock is BenchmarkDebitAddrHot on a
// ManualClock, as rrl-replay debits: the clock stands still here, as it
// does between rrl-replay's settings, one a message.
func BenchmarkDebitAddrHotManualClock(b *testing.B) {
	clock := NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := testConfig(b, nil, "responses-per-second", "5")
	c.SetClock(clock)
	r := NewRRL(c)
	b.ReportAllocs()
	src := netip.MustParseAddr("192.0.2.1")
	tuple := answer("www.example.com.")
	for b.Loop() {
		r.DebitAddr(src, true, tuple)
	}
}

// BenchmarkDebit10kAccounts cycles through 10,000 accounts: 100 client
// networks times 100 names.
func BenchmarkDebit10kAccounts(b *testing.B) {
	r := benchRRL(b)
	srcs, tuples := sharedPool()
	i := 0
	for b.Loop() {
		r.Debit(srcs[i%100], tuples[(i/100)%100])
		i++
	}
}

// BenchmarkDebitSpray is a random-source flood: 1,000,000 distinct client
// networks through a table of 100,000 accounts, so that nearly every Debit
// recycles an account. The table is filled first: the flood is measured
// once the table has grown to its full size.
func BenchmarkDebitSpray(b *testing.B) {
	const networks = 1_000_000
	srcs := make([]*net.UDPAddr, networks)
	for i := range srcs {
		srcs[i] = net.UDPAddrFromAddrPort(netip.AddrPortFrom(spraySource(i), 53))
	}
	r := sprayRRL(b)
	tuple := answer("www.example.com.")
	i := 0
	for b.Loop() {
		r.Debit(srcs[i%networks], tuple)
		i++
	}
}

// BenchmarkDebitAddrSpray is BenchmarkDebitSpray through DebitAddr.
func BenchmarkDebitAddrSpray(b *testing.B) {
	const networks = 1_000_000
	r := sprayRRL(b)
	tuple := answer("www.example.com.")
	i := 0
	for b.Loop() {
		r.DebitAddr(spraySource(i%networks), true, tuple)
		i++
	}
}

// sprayRRL is benchRRL with its table filled by networks that the spray
// benchmarks do not use.
func sprayRRL(b *testing.B) *RRL {
	r := benchRRL(b)
	fill := answer("fill.example.com.")
	for i := range 2 * 100_000 {
		r.DebitAddr(netip.AddrFrom4([4]byte{byte(100 + i>>16), byte(i >> 8), byte(i), 1}), true, fill)
	}
	if n := r.GetStats(false).CacheLength; n < 90_000 {
		b.Fatalf("filled table holds %d accounts", n)
	}
	return r
}

// BenchmarkDebitParallel has each goroutine debit its own client network's
// accounts; compare -cpu 1 with -cpu 2 for scaling.
func BenchmarkDebitParallel(b *testing.B) {
	r := benchRRL(b)
	tuple := answer("www.example.com.")
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		g := next.Add(1)
		src := netip.AddrFrom4([4]byte{10, byte(g >> 8), byte(g), 1})
		for pb.Next() {
			r.DebitAddr(src, true, tuple)
		}
	})
}

// sharedPool is the pool of BenchmarkDebit10kAccounts and
// BenchmarkDebitSharedPool: 10,000 accounts, 100 client networks times 100
// names.
func sharedPool() ([]net.Addr, []*ResponseTuple) {
	var srcs []net.Addr
	var tuples []*ResponseTuple
	for i := range 100 {
		srcs = append(srcs, udp(fmt.Sprintf("10.0.%d.1", i)))
		tuples = append(tuples, answer(fmt.Sprintf("host%d.example.com.", i)))
	}
	return srcs, tuples
}

// poolOffset spreads the goroutines of a parallel benchmark over a pool
// of n accounts, each from its own offset.
func poolOffset(next *atomic.Int64, n int) int {
	return int(next.Add(1)) * 7919 % n
}

// BenchmarkDebitSharedPool has every goroutine walk a shared pool of
// 10,000 accounts, each from its own offset, as a server's goroutines
// serve many clients: the goroutines debit the same accounts, rarely at
// the same moment. Compare -cpu 1 with -cpu 2, and with
// BenchmarkFloorSharedPool.
func BenchmarkDebitSharedPool(b *testing.B) {
	r := benchRRL(b)
	srcs, tuples := sharedPool()
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		i := poolOffset(&next, 10_000)
		for pb.Next() {
			r.Debit(srcs[i%100], tuples[i/100%100])
			if i++; i == 10_000 {
				i = 0
			}
		}
	})
}

// BenchmarkDebitParallelHot has every goroutine debit one account: the
// victim of a flood served on every core. Compare with
// BenchmarkFloorParallelHot.
func BenchmarkDebitParallelHot(b *testing.B) {
	r := benchRRL(b)
	src := udp("192.0.2.1")
	tuple := answer("www.example.com.")
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Debit(src, tuple)
		}
	})
}

// floorTable is an array of 64-byte lines as large as a full table of the
// default size, 100,000 accounts (see newBucketTable).
func floorTable() []struct {
	n atomic.Int64
	_ [56]byte
} {
	return make([]struct {
		n atomic.Int64
		_ [56]byte
	}, newTable(100_000, accountRank).buckets)
}

// BenchmarkFloorSharedPool is the floor under BenchmarkDebitSharedPool:
// per debit, one atomic addition on the 64-byte line of the account, in
// an array as large as the full table, the 10,000 accounts on lines at
// random as a keyed hash would place them. No shared table can do less
// for a debit.
func BenchmarkFloorSharedPool(b *testing.B) {
	lines := floorTable()
	rng := rand.New(rand.NewPCG(5, 6))
	at := make([]int32, 10_000)
	for i := range at {
		at[i] = int32(rng.IntN(len(lines)))
	}
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		i := poolOffset(&next, len(at))
		for pb.Next() {
			lines[at[i]].n.Add(1)
			if i++; i == len(at) {
				i = 0
			}
		}
	})
}

// BenchmarkFloorParallelHot is the floor under BenchmarkDebitParallelHot:
// one atomic addition on one line, from every goroutine.
func BenchmarkFloorParallelHot(b *testing.B) {
	lines := floorTable()
	hot := &lines[len(lines)/2]
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			hot.n.Add(1)
		}
	})
}

// BenchmarkDebitAllFeatures has the request limit, all-per-second, qps-scale
// and an exempt list on.
func BenchmarkDebitAllFeatures(b *testing.B) {
	r := benchRRL(b, "requests-per-second", "100", "all-per-second", "50", "qps-scale", "1000", "exempt-clients", "198.51.100.0/24")
	src := udp("192.0.2.1")
	tuple := answer("www.example.com.")
	for b.Loop() {
		r.Debit(src, tuple)
	}
}

// BenchmarkRandomRead is not about this package: it measures the machine,
// how long one read at a random place in memory takes when each depends on
// the one before (a pointer chase), for regions of several sizes. A full
// 100,000-account table spans about 4 MB, and a Debit that recycles an
// account reads it at a few random places: these figures are the floor
// under BenchmarkDebitSpray.
func BenchmarkRandomRead(b *testing.B) {
	for _, mb := range []int{1, 2, 4, 16} {
		b.Run(fmt.Sprintf("%dMB", mb), func(b *testing.B) {
			const line = 64 / 8 // one visited word per 64-byte cache line
			lines := mb << 20 / 64
			next := make([]int, lines*line)
			order := rand.Perm(lines)
			for i, l := range order {
				next[l*line] = order[(i+1)%lines] * line
			}
			p := 0
			for b.Loop() {
				p = next[p]
			}
			chased = p
		})
	}
}

var chased int

// BenchmarkDebitSmallTable cycles through 300 accounts in a table of 320,
// one set that a Debit searches whole (see table).
func BenchmarkDebitSmallTable(b *testing.B) {
	r := benchRRL(b, "max-table-size", "320")
	var tuples []*ResponseTuple
	for i := range 300 {
		tuples = append(tuples, answer(fmt.Sprintf("host%d.example.com.", i)))
	}
	src := udp("192.0.2.1")
	i := 0
	for b.Loop() {
		r.Debit(src, tuples[i%300])
		i++
	}
}
