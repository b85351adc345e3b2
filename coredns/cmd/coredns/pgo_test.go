package main

import (
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildUsesProfile builds this command as the README does (go build,
// whose default -pgo=auto takes the main package's default.pgo) and checks
// that the binary records this folder's default.pgo as its -pgo setting.
// The first run after the profile changes compiles every dependency again.
func TestBuildUsesProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	assertBuildUsesProfile(t, "coredns")
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
