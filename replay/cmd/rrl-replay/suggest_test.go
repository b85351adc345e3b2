package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSuggestCommand: -suggest prints a Corefile block, keeps the
// Corefile's settings and zones, and -json prints the same as an object.
func TestSuggestCommand(t *testing.T) {
	dir := t.TempDir()
	corefile := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(corefile, []byte("example.org {\n    rrl {\n        window 5\n    }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "-suggest", "-corefile", corefile, sample)
	if code != 0 || !strings.Contains(stdout, "\nrrl example.org. {\n") || !strings.Contains(stdout, "window 5") ||
		!strings.Contains(stdout, "given ("+corefile+":3)") || !strings.Contains(stdout, "responses-per-second ") {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	code, stdout, _ = runCLI(t, "-suggest", "-json", "-set", "slip-ratio=1", sample)
	var got struct {
		Settings []struct{ Keyword, Value, Given string }
		Check    *struct{}
	}
	if err := json.Unmarshal([]byte(stdout), &got); code != 0 || err != nil || got.Check == nil {
		t.Fatalf("-json: exit %d, %v: %s", code, err, stdout)
	}
	for _, s := range got.Settings {
		if s.Keyword == "slip-ratio" && (s.Value != "1" || s.Given != "-set") {
			t.Errorf("slip-ratio %+v, want 1 as given", s)
		}
	}
}

func TestSuggestCommandErrors(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.pcap")
	// A pcap header and no packets.
	hdr := []byte{0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0}
	if err := os.WriteFile(empty, hdr, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-suggest", empty}, exitNothing, "no DNS queries or responses to suggest settings from (0 packets read)"},
		{[]string{"-suggest", "-"}, exitUsage, "give files, not -"},
		{[]string{"-suggest", "-sweep", "window=1,2", sample}, exitUsage, "not with -listen or -sweep"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, %q; want exit %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}
