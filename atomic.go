package rrl

import (
	"math"
	"sync/atomic"
)

type atomicInt64 = atomic.Int64

// atomicFloat64 is a float64 read and written atomically.
type atomicFloat64 struct{ bits atomic.Uint64 }

func (f *atomicFloat64) Load() float64   { return math.Float64frombits(f.bits.Load()) }
func (f *atomicFloat64) Store(v float64) { f.bits.Store(math.Float64bits(v)) }
