package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A Corefile whose file directive names a zone file that is not there is a
// usage error, in one line that names the directive's place and the path.
func TestMissingZoneFile(t *testing.T) {
	dir := t.TempDir()
	corefile := filepath.Join(dir, "Corefile")
	conf := "example.test {\n    root " + dir + "\n    rrl {\n        responses-per-second 5\n    }\n    file db.example.test\n}\n"
	if err := os.WriteFile(corefile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "-corefile", corefile, sample)
	want := "rrl-replay: " + corefile + ":6: file " + filepath.Join(dir, "db.example.test") + ": open "
	if code != 2 || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, %q; want exit 2 and one line beginning %q", code, stderr, want)
	}
}

// With the zone file there (an absolute path, without root), the replay
// runs.
func TestZoneFileRead(t *testing.T) {
	dir := t.TempDir()
	corefile := filepath.Join(dir, "Corefile")
	zone := "$ORIGIN example.org.\n@ IN SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ IN NS ns1\nns1 IN A 192.0.2.1\n"
	if err := os.WriteFile(filepath.Join(dir, "db.example.org"), []byte(zone), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := "example.org {\n    rrl {\n        responses-per-second 5\n    }\n    file " + filepath.Join(dir, "db.example.org") + "\n}\n"
	if err := os.WriteFile(corefile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "-q", "-corefile", corefile, sample); code != 0 {
		t.Errorf("exit %d: %s", code, stderr)
	}
}
