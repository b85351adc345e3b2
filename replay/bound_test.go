package replay_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"runtime"
	"testing"

	"github.com/dnsrrl/rrl/replay"
)

// bombZeros is how many zero bytes follow a bomb's header: twice the
// memory bound, so that a reader that buffers what a record declares
// passes it.
const bombZeros = 64 << 20

// maxBombAlloc bounds the bytes a replay may allocate on a bomb.
const maxBombAlloc = 32 << 20

// gzipBomb compresses header followed by zeros, zero bytes. It writes the
// zeros as gzip members of one MiB compressed once, which a gzip reader
// reads as one stream, so that the bomb takes no time to build.
func gzipBomb(t *testing.T, header []byte, zeros int) io.Reader {
	t.Helper()
	out := bytes.NewBuffer(gzipped(t, header))
	member := gzipped(t, make([]byte, 1<<20))
	for ; zeros >= 1<<20; zeros -= 1 << 20 {
		out.Write(member)
	}
	out.Write(gzipped(t, make([]byte, zeros)))
	return out
}

// plainBomb streams header followed by zeros, zero bytes.
func plainBomb(_ *testing.T, header []byte, zeros int) io.Reader {
	return io.MultiReader(bytes.NewReader(header), io.LimitReader(zeroReader{}, int64(zeros)))
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func le32(b []byte, vs ...uint32) []byte {
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b
}

// pcapHeader is the file header of a little-endian pcap of Ethernet with
// the largest snap length a file can declare.
var pcapHeader = le32(nil, 0xa1b2c3d4, 0x00040002, 0, 0, 0xffffffff, 1)

// pcapngHead is a little-endian section header block and one Ethernet
// interface without a snap length.
var pcapngHead = le32(nil,
	0x0a0d0d0a, 28, 0x1a2b3c4d, 0x00000001, 0xffffffff, 0xffffffff, 28,
	1, 20, 1, 0, 20)

// epb is the start of an enhanced packet block of the given total length
// and captured length.
func epb(total, capLen uint32) []byte { return le32(nil, 6, total, 0, 0, 0, capLen, capLen) }

// dnstapHead starts a unidirectional frame stream of dnstap.
var dnstapHead = append(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(
	binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil,
		0), 34), 2), 1), 22), "protobuf:dnstap.Dnstap"...)

// Records that declare 4 GiB, in captures of each kind, gzipped or not,
// are read through without being held: the replay allocates less than
// maxBombAlloc and counts each as oversize.
func TestBombs(t *testing.T) {
	for _, c := range []struct {
		name   string
		header []byte
		bomb   func(*testing.T, []byte, int) io.Reader
	}{
		{"gzipped pcap record", append(append([]byte(nil), pcapHeader...), le32(nil, 0, 0, 0xffffffff, 0xffffffff)...), gzipBomb},
		{"pcap record", append(append([]byte(nil), pcapHeader...), le32(nil, 0, 0, 0xffffffff, 0xffffffff)...), plainBomb},
		{"pcapng block", append(append([]byte(nil), pcapngHead...), epb(0xfffffffc, 0xffffffc0)...), plainBomb},
		{"pcapng packet past its block", append(append([]byte(nil), pcapngHead...), epb(64, 0xffffffc0)...), plainBomb},
		{"gzipped dnstap frame", binary.BigEndian.AppendUint32(append([]byte(nil), dnstapHead...), 0xffffffff), gzipBomb},
	} {
		in := c.bomb(t, c.header, bombZeros)
		r, err := replay.New(replay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		alloc := allocated(func() { err = r.Read(in) })
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		t.Logf("%s: %d KiB allocated", c.name, alloc>>10)
		if alloc > maxBombAlloc {
			t.Errorf("%s: %d MiB allocated on %d MiB of a 4 GiB record, want at most %d", c.name, alloc>>20, bombZeros>>20, maxBombAlloc>>20)
		}
		if got := r.Reports()[0].Skipped; got[replay.SkipOversize] != 1 {
			t.Errorf("%s: skipped %v, want one oversize record", c.name, got)
		}
	}
}

// allocated returns the bytes of heap that f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// An oversize record whole in the file is skipped, and what follows it
// replayed.
func TestOversizeRecordSkipped(t *testing.T) {
	exchanges := traffic(t, 1, 100, 0, 0)
	big := make([]byte, 1<<20)
	pcap := pcapOf(t, ethernet, false, exchanges)
	pcap = append(pcap[:24:24], append(append(le32(nil, 0, 0, 1<<20, 1<<20), big...), pcap[24:]...)...)
	ng := pcapOf(t, ethernet, true, exchanges)
	ng = append(append(ng, epb(32+1<<20, 1<<20)...), le32(big, 32+1<<20)...)
	ngPast := pcapOf(t, ethernet, true, exchanges)
	ngPast = append(append(ngPast, epb(36, 1000)...), le32(nil, 0, 36)...)
	for name, capture := range map[string][]byte{"pcap": pcap, "pcapng": ng, "pcapng packet past its block": ngPast} {
		rep := replayBytes(t, replay.Options{}, capture)
		if rep.Queries != 100 || rep.Responses != 100 || rep.Skipped[replay.SkipOversize] != 1 || len(rep.Skipped) != 1 {
			t.Errorf("%s: %d queries, %d responses, skipped %v", name, rep.Queries, rep.Responses, rep.Skipped)
		}
	}
}
