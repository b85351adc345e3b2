package replay

import (
	"net/netip"
	"slices"
	"time"
)

// Bounds of IP reassembly: datagrams being reassembled at once, how long a
// datagram may take to complete (RFC 8200's 60 seconds), its size, the
// fragments and bytes held for one (overlapping fragments may hold more
// than its size), and the bytes held for all of them together, which a
// spray of large spoofed fragments would otherwise grow to gigabytes.
const (
	maxFragmented    = 4096
	fragmentTimeout  = 60 * time.Second
	maxDatagram      = 65535
	maxFragments     = 64 // per datagram: 45 fragments of 1,500 bytes make the largest
	maxDatagramHeld  = 2 * maxDatagram
	maxFragmentBytes = 32 << 20
)

type fragmentKey struct {
	src, dst netip.Addr
	id       uint32
	proto    byte
}

// datagram is an IP datagram being reassembled from its fragments.
type datagram struct {
	parts []fragmentPart
	total int // the payload's length, once the last fragment has come; else -1
	first time.Time
	proto byte // for IPv6, the header that follows the fragment header, from the first fragment
	held  int  // bytes of its parts
}

type fragmentPart struct {
	off  int
	data []byte
}

// defragmenter reassembles fragmented IPv4 and IPv6 datagrams, so that a
// response too large for one packet is replayed whole. Fragments that never
// complete a datagram are counted as skipped when they expire or are
// pushed out.
type defragmenter struct {
	pending map[fragmentKey]*datagram
	held    int // bytes of the parts of every pending datagram
	skip    func(string)
	buf     []byte
}

func newDefragmenter(skip func(string)) *defragmenter {
	return &defragmenter{pending: make(map[fragmentKey]*datagram), skip: skip}
}

// add takes a fragment: its payload at byte offset off, and whether more
// follow. When it completes its datagram, add returns the whole payload
// (valid until the next call) and the datagram's protocol.
func (d *defragmenter) add(key fragmentKey, off int, more bool, proto byte, payload []byte, at time.Time) ([]byte, byte, bool) {
	if off+len(payload) > maxDatagram || (more && len(payload)%8 != 0) {
		d.skip(SkipFragment)
		return nil, 0, false
	}
	for d.held+len(payload) > maxFragmentBytes && len(d.pending) > 0 {
		d.expire(at, true)
	}
	g := d.pending[key]
	if g == nil {
		if len(d.pending) >= maxFragmented {
			d.expire(at, true)
		}
		g = &datagram{total: -1, first: at}
		d.pending[key] = g
	}
	if len(g.parts) >= maxFragments || g.held+len(payload) > maxDatagramHeld {
		d.skip(SkipFragment)
		return nil, 0, false
	}
	if off == 0 {
		g.proto = proto
	}
	if !more {
		g.total = off + len(payload)
	}
	g.parts = append(g.parts, fragmentPart{off, append([]byte(nil), payload...)})
	g.held += len(payload)
	d.held += len(payload)
	whole, ok := d.assemble(g)
	if !ok {
		return nil, 0, false
	}
	d.forget(key, g)
	return whole, g.proto, true
}

// forget drops a datagram.
func (d *defragmenter) forget(key fragmentKey, g *datagram) {
	d.held -= g.held
	delete(d.pending, key)
}

// assemble returns the datagram's payload if its fragments cover it.
func (d *defragmenter) assemble(g *datagram) ([]byte, bool) {
	if g.total < 0 {
		return nil, false
	}
	slices.SortStableFunc(g.parts, func(a, b fragmentPart) int { return a.off - b.off })
	covered := 0
	for _, p := range g.parts {
		if p.off > covered {
			return nil, false
		}
		covered = max(covered, p.off+len(p.data))
	}
	if covered < g.total {
		return nil, false
	}
	d.buf = slices.Grow(d.buf[:0], g.total)[:g.total]
	for _, p := range g.parts {
		copy(d.buf[p.off:], p.data) // overlaps: the later fragment wins
	}
	return d.buf, true
}

// flush counts the fragments of every incomplete datagram as skipped, at
// the end of the input.
func (d *defragmenter) flush() {
	for k, g := range d.pending {
		for range g.parts {
			d.skip(SkipFragment)
		}
		d.forget(k, g)
	}
}

// expire forgets datagrams older than fragmentTimeout, or, when full is
// set, also the oldest eighth of them, counting their fragments as skipped.
func (d *defragmenter) expire(now time.Time, full bool) {
	before := now.Add(-fragmentTimeout)
	if full && len(d.pending) > 0 {
		var firsts []time.Time
		for _, g := range d.pending {
			firsts = append(firsts, g.first)
		}
		slices.SortFunc(firsts, time.Time.Compare)
		if b := firsts[len(firsts)/8]; b.After(before) {
			before = b
		}
	}
	for k, g := range d.pending {
		if !g.first.After(before) {
			for range g.parts {
				d.skip(SkipFragment)
			}
			d.forget(k, g)
		}
	}
}
