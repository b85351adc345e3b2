package replay

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// ErrNotCapture is returned, wrapped with the file's name, for input that
// is not pcap, pcapng nor dnstap.
var ErrNotCapture = errors.New("not a pcap, pcapng or dnstap file")

// ReadFile replays a capture file: pcap, pcapng or dnstap (frame
// streams), told apart by their first bytes, and any of them compressed
// with gzip. The path "-" is the standard input. Packets that are not DNS,
// truncated or unreadable are counted in the report and skipped; a damaged
// end of file ends the file quietly (counted). Only a file that cannot be
// opened or is not a capture at all is an error, naming the file.
func (r *Replay) ReadFile(path string) error {
	var in io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	if err := r.Read(in); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Read replays a capture read from in, as ReadFile does.
func (r *Replay) Read(in io.Reader) error { return r.read(in, true) }

// read replays a capture from in; mayGunzip says whether it may be compressed
// (once: a capture compressed twice is no capture).
func (r *Replay) read(in io.Reader, mayGunzip bool) error {
	br := bufio.NewReaderSize(in, 1<<16)
	magic, err := br.Peek(4)
	switch {
	case len(magic) < 4 && err != nil && err != io.EOF:
		return err // such as a directory, or a failing disk
	case len(magic) < 4:
		return ErrNotCapture
	case bytes.Equal(magic, []byte{0x0a, 0x0d, 0x0d, 0x0a}):
		return r.readPcapng(boundPcapng(br, r.skip))
	case isPcapMagic(magic):
		return r.readPcap(boundPcap(br, r.skip))
	case bytes.Equal(magic, []byte{0, 0, 0, 0}):
		return r.readDnstap(br)
	case magic[0] == 0x1f && magic[1] == 0x8b && mayGunzip:
		z, err := gzip.NewReader(br)
		if err != nil {
			return ErrNotCapture
		}
		defer z.Close()
		return r.read(z, false)
	}
	return ErrNotCapture
}

func isPcapMagic(m []byte) bool {
	for _, p := range [][]byte{{0xa1, 0xb2, 0xc3, 0xd4}, {0xa1, 0xb2, 0x3c, 0x4d}} {
		if bytes.Equal(m, p) || bytes.Equal(m, []byte{p[3], p[2], p[1], p[0]}) {
			return true
		}
	}
	return false
}

// packetReader is what pcapgo's readers for pcap and pcapng have in common.
type packetReader interface {
	ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error)
}

func (r *Replay) readPcap(in io.Reader) error {
	pr, err := pcapgo.NewReader(in)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotCapture, err)
	}
	lt := pr.LinkType()
	return r.readPackets(pr, func(gopacket.CaptureInfo) layers.LinkType { return lt })
}

func (r *Replay) readPcapng(in io.Reader) error {
	// Interfaces of different link types are read, not skipped as libpcap
	// (and pcapgo by default) would; so are sections of unknown versions.
	pr, err := pcapgo.NewNgReader(in, pcapgo.NgReaderOptions{WantMixedLinkType: true, SkipUnknownVersion: true})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotCapture, err)
	}
	return r.readPackets(pr, func(ci gopacket.CaptureInfo) layers.LinkType {
		// The reader gives each packet its interface's link type, which
		// it reads anew in every section of the file.
		if len(ci.AncillaryData) > 0 {
			if lt, ok := ci.AncillaryData[0].(layers.LinkType); ok {
				return lt
			}
		}
		return pr.LinkType()
	})
}

// readPackets replays every packet of pr. linkType gives each packet's
// link type (pcapng has one per interface).
func (r *Replay) readPackets(pr packetReader, linkType func(gopacket.CaptureInfo) layers.LinkType) error {
	dec := newPacketDecoder(r.opts.ServerPort, r.skip, r.Message)
	for !r.stopped.Load() {
		data, ci, err := pr.ZeroCopyReadPacketData()
		if err != nil {
			if err != io.EOF && !r.stopped.Load() {
				r.skip(SkipBadRecord) // a damaged or cut record ends what can be read
			}
			dec.flush()
			return nil
		}
		r.packets.Add(1)
		dec.decode(linkType(ci), data, ci.Timestamp, ci.CaptureLength < ci.Length)
	}
	dec.flush()
	return nil
}
