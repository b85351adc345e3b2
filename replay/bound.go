package replay

import (
	"bufio"
	"encoding/binary"
	"io"
)

// MaxRecord bounds a capture record, in bytes: a pcap record with its
// 16-byte header, a pcapng block, a dnstap frame. It is twice the largest
// DNS message, which holds any IP packet (65,535 bytes, and an IPv6
// header) with its link-layer headers, and a dnstap frame carrying both a
// query and its response. A longer record is read through without being
// held, and counted as SkipOversize: whatever lengths a file declares, no
// reader buffers more than this for one record.
const MaxRecord = 1 << 17

// SkipOversize counts records longer than MaxRecord, and pcapng blocks
// whose packet does not fit in them.
const SkipOversize = "capture record over 131,072 bytes, or its packet outside it"

// boundReader passes a capture's records on whole to the parser (pcapgo's
// readers), and reads through and drops any record that next finds too
// long, so that the parser never sees a length beyond MaxRecord. Its
// framing is the parser's, record by record; a header cut short by the end
// of the input is passed on for the parser to find damaged.
type boundReader struct {
	br   *bufio.Reader
	left int64 // bytes of the current record still to pass on
	// next reads the header of the next record with br.Peek and returns
	// its length in bytes and whether to drop it; for a header cut short by
	// the end of the input, the bytes left (0 at a clean end).
	next func(br *bufio.Reader) (length int64, drop bool)
	skip func(string)
}

func (b *boundReader) Read(p []byte) (int, error) {
	for b.left == 0 {
		n, drop := b.next(b.br)
		if !drop {
			if n == 0 {
				return 0, io.EOF
			}
			b.left = n
			break
		}
		b.skip(SkipOversize)
		if _, err := io.CopyN(io.Discard, b.br, n); err != nil {
			return 0, io.EOF // the input ended inside the dropped record
		}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.br.Read(p)
	b.left -= int64(n)
	return n, err
}

// boundPcap bounds the records of a pcap file: its 24-byte file header,
// then records of a 16-byte header and the captured bytes. The snap length
// the file declares is not trusted.
func boundPcap(br *bufio.Reader, skip func(string)) *boundReader {
	var order binary.ByteOrder = binary.LittleEndian
	started := false
	return &boundReader{br: br, skip: skip, next: func(br *bufio.Reader) (int64, bool) {
		if !started {
			started = true
			h, _ := br.Peek(24)
			if len(h) > 0 && h[0] == 0xa1 { // a1b2c3d4 or a1b23c4d, written big-endian
				order = binary.BigEndian
			}
			return int64(len(h)), false
		}
		h, _ := br.Peek(16)
		if len(h) < 16 {
			return int64(len(h)), false // cut short: the parser finds it damaged
		}
		n := 16 + int64(order.Uint32(h[8:]))
		return n, n > MaxRecord
	}}
}

// pcapng block types.
const (
	ngSection   = 0x0a0d0d0a
	ngInterface = 1
	ngPacket    = 2 // obsolete, with the layout of the enhanced packet block
	ngSimple    = 3
	ngEnhanced  = 6
)

// boundPcapng bounds the blocks of a pcapng file. Besides a block longer
// than MaxRecord, it drops a packet block whose captured length reaches
// past the block's end, where the parser would read on into the next
// blocks as if they were the packet's.
func boundPcapng(br *bufio.Reader, skip func(string)) *boundReader {
	var order binary.ByteOrder = binary.LittleEndian
	var snap0 uint32 // the snap length of the section's first interface
	interfaces := 0
	return &boundReader{br: br, skip: skip, next: func(br *bufio.Reader) (int64, bool) {
		h, _ := br.Peek(12)
		if len(h) < 12 {
			return int64(len(h)), false // cut short: the parser finds it damaged
		}
		typ := order.Uint32(h)
		if binary.LittleEndian.Uint32(h) == ngSection { // a palindrome: the same in either order
			switch {
			case binary.LittleEndian.Uint32(h[8:]) == 0x1a2b3c4d:
				order = binary.LittleEndian
			case binary.BigEndian.Uint32(h[8:]) == 0x1a2b3c4d:
				order = binary.BigEndian
			default:
				return 12, false // the parser reports it
			}
			typ, interfaces = ngSection, 0
		}
		n := int64(order.Uint32(h[4:]))
		if n < 12 {
			return 12, false // the parser reports it
		}
		if n > MaxRecord {
			return n, true
		}
		switch typ {
		case ngInterface:
			if h, _ := br.Peek(16); len(h) == 16 && interfaces == 0 {
				snap0 = order.Uint32(h[12:])
			}
			interfaces++
		case ngEnhanced, ngPacket:
			h, _ := br.Peek(28)
			if len(h) < 28 {
				return int64(len(h)), false // cut short: the parser finds it damaged
			}
			if capLen := int64(order.Uint32(h[20:])); capLen > n-32 {
				return n, true
			}
		case ngSimple:
			capLen := order.Uint32(h[8:])
			if snap0 != 0 && capLen > snap0 {
				capLen = snap0
			}
			if int64(capLen) > n-16 {
				return n, true
			}
		}
		return n, false
	}}
}
