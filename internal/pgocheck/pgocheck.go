// Package pgocheck tests that a main package's build uses its profile:
// the tests of the commands that ship a default.pgo (CoreDNS and
// rrl-replay, in modules of their own) call it.
package pgocheck

import (
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// BuildUsesProfile builds the main package in the working directory (a
// package's test runs in its folder) as the README does, with go build,
// whose default -pgo=auto takes the package's default.pgo, and fails t
// unless the binary records that file as its -pgo setting. name is the
// binary's name. The first build after the profile changes compiles every
// dependency again.
func BuildUsesProfile(t *testing.T, name string) {
	t.Helper()
	want, err := filepath.Abs("default.pgo")
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
	if out, err := exec.Command(gotool, "build", "-o", exe, ".").CombinedOutput(); err != nil {
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
	switch {
	case len(got) != 1:
		t.Fatalf("-pgo settings in the binary: %q, want one, %s", got, want)
	case got[0] == want || sameFile(got[0], want):
	case strings.Contains(os.Getenv("GOFLAGS"), "-trimpath") && got[0] == "default.pgo":
		// -trimpath records the file's name alone.
	default:
		t.Errorf("-pgo=%s, want %s", got[0], want)
	}
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
