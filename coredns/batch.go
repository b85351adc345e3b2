package rrl

import "sync"

// batch hands out values of T allocated batchSize at a time: one
// allocation per batchSize requests rather than one each. A value is
// never handed out twice, since the chain may keep what a request was
// given (its recorder, its cookie) past ServeDNS; a batch stays in memory
// while any of its values is referenced. Only the cursor is pooled.
type batch[T any] struct{ cursors sync.Pool }

// batchSize is how many values a batch allocates at once.
const batchSize = 32

// next returns a fresh, zero T.
func (b *batch[T]) next() *T {
	c, _ := b.cursors.Get().(*[]T)
	if c == nil {
		c = new([]T)
	}
	if len(*c) == 0 {
		*c = make([]T, batchSize)
	}
	v := &(*c)[0]
	*c = (*c)[1:]
	b.cursors.Put(c)
	return v
}
