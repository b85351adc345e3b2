package main

import (
	"bufio"
	"debug/buildinfo"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dnsrrl/rrl/replay/internal/capgen"
	"github.com/gopacket/gopacket/layers"
)

// TestBuildUsesProfile builds this command as the README does (go build,
// whose default -pgo=auto takes the main package's default.pgo) and checks
// that the binary records this folder's default.pgo as its -pgo setting.
// The first run after the profile changes compiles every dependency again.
func TestBuildUsesProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	assertBuildUsesProfile(t, "rrl-replay")
}

func assertBuildUsesProfile(t *testing.T, name string) {
	t.Helper()
	want, err := filepath.Abs("default.pgo") // the test runs in the package's folder
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(want); err != nil {
		t.Fatalf("no profile: %v", err)
	}
	gotool, err := exec.LookPath("go") // go test puts its own go first in PATH
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(t.TempDir(), name)
	cmd := exec.Command(gotool, "build", "-o", exe, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	info, err := buildinfo.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range info.Settings {
		if s.Key == "-pgo" {
			got = append(got, s.Value)
		}
	}
	if len(got) != 1 {
		t.Fatalf("-pgo settings in the binary: %q, want one, %s", got, want)
	}
	if got[0] == want || sameFile(got[0], want) {
		return
	}
	// -trimpath (in GOFLAGS) records the file's name alone.
	if strings.Contains(os.Getenv("GOFLAGS"), "-trimpath") && got[0] == "default.pgo" {
		return
	}
	t.Errorf("-pgo=%s, want %s", got[0], want)
}

// sameFile reports whether the paths a and b name the same file, through
// symbolic links.
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
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
