package main

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dnsrrl/rrl/internal/pgocheck"
	"github.com/dnsrrl/rrl/replay/internal/capgen"
	"github.com/gopacket/gopacket/layers"
)

// TestBuildUsesProfile checks that go build of this command, as the README
// runs it, uses this folder's default.pgo.
func TestBuildUsesProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	pgocheck.BuildUsesProfile(t, "rrl-replay")
}

// BenchmarkCommand is the work that pgo.sh profiles: the command as an
// operator runs it, over a minute of generated traffic to an authoritative
// server (ordinary clients, a reflection flood, a spray of NXDOMAIN
// queries; 1,012,194 packets in a pcap file), once with a response limit
// alone and once with a request limit too, each writing its text report.
func BenchmarkCommand(b *testing.B) {
	path := filepath.Join(b.TempDir(), "traffic.pcap")
	writeTraffic(b, path)
	runs := [][]string{
		{"-q", "-set", "responses-per-second=5", path},
		{"-q", "-set", "responses-per-second=5", "-set", "requests-per-second=50", path},
	}
	for b.Loop() {
		for _, args := range runs {
			if code := run(args, io.Discard, io.Discard); code != 0 {
				b.Fatalf("rrl-replay %s: exit %d", strings.Join(args, " "), code)
			}
		}
	}
}

// writeTraffic writes the capture of BenchmarkCommand to path.
func writeTraffic(b *testing.B, path string) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	w, err := capgen.NewWriter(bw, capgen.Link{Type: layers.LinkTypeEthernet}, false)
	if err == nil {
		err = capgen.Traffic(1, capgen.Start, time.Minute, 8334, 0.3, 0.1, w.Write)
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		b.Fatal(err)
	}
}
