package rrl

import (
	"os"
	"strings"
	"testing"
)

// TestParseProtections: the request prefixes take their pairs as several
// arguments or in one with commas, and each of the four keywords of the
// protections beyond BIND reaches the core's Config.
func TestParseProtections(t *testing.T) {
	tests := []struct {
		line, keyword, want string
	}{
		{"ipv4-request-prefixes 32:5 20:400 18:1200", "ipv4-request-prefixes", "32:5 20:400 18:1200"},
		{"ipv4-request-prefixes 32:5,24:50", "ipv4-request-prefixes", "32:5 24:50"},
		{"ipv4-request-prefixes 32:5, 24:50", "ipv4-request-prefixes", "32:5 24:50"},
		{"ipv6-request-prefixes 128:5 64:50 48:800", "ipv6-request-prefixes", "128:5 64:50 48:800"},
		{"ipv6-request-prefixes 128:0.5", "ipv6-request-prefixes", "128:0.5"},
		{"nocookie-udp-size 512", "nocookie-udp-size", "512"},
		{"all-bytes-per-second 20000", "all-bytes-per-second", "20000"},
	}
	for _, tc := range tests {
		h, err := parseString("rrl {\n " + tc.line + "\n}")
		if err != nil {
			t.Errorf("%q: %v", tc.line, err)
			continue
		}
		if want := tc.keyword + " " + tc.want + "; "; !strings.Contains(h.settings, want) {
			t.Errorf("%q: settings %q, want %q in them", tc.line, h.settings, want)
		}
		if !h.active {
			t.Errorf("%q: the block is inactive; each protection acts alone", tc.line)
		}
	}
}

// badLine is a line of an rrl block that must be refused, and what its
// error must contain.
type badLine struct {
	line string
	want []string
}

// checkBadLines parses each line alone in an rrl block and checks that it
// is refused with an error that contains its want and the line's place
// in the Corefile.
func checkBadLines(t *testing.T, lines []badLine) {
	t.Helper()
	for _, tc := range lines {
		_, err := parseString("rrl {\n " + tc.line + "\n}")
		if err == nil {
			t.Errorf("%q: expected an error", tc.line)
			continue
		}
		for _, w := range append(tc.want, "Testfile:2") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q, want it to contain %q", tc.line, err, w)
			}
		}
	}
}

// TestParseProtectionsInvalid: a bad value is refused with the keyword, the
// value and the allowed range in the error, and the line of the Corefile.
func TestParseProtectionsInvalid(t *testing.T) {
	checkBadLines(t, []badLine{
		{"ipv4-request-prefixes", []string{"ipv4-request-prefixes needs at least one LENGTH:ALLOWANCE pair"}},
		{"ipv6-request-prefixes", []string{"ipv6-request-prefixes needs at least one"}},
		{"ipv4-request-prefixes 33:5", []string{"ipv4-request-prefixes", `"33:5"`, `length "33" is out of range`, "from 1 to 32"}},
		{"ipv4-request-prefixes 0:5", []string{"ipv4-request-prefixes", `length "0" is out of range`, "from 1 to 32"}},
		{"ipv6-request-prefixes 129:5", []string{"ipv6-request-prefixes", `length "129" is out of range`, "from 1 to 128"}},
		{"ipv4-request-prefixes 32:5 32:6", []string{"ipv4-request-prefixes", `"32:5 32:6"`, "length 32 is given twice"}},
		{"ipv4-request-prefixes 32:5 28:6 24:7 20:8 16:9", []string{"ipv4-request-prefixes", "5 pairs", "up to 4 pairs"}},
		{"ipv4-request-prefixes 32", []string{"ipv4-request-prefixes", `"32" is not LENGTH:ALLOWANCE`}},
		{"ipv4-request-prefixes 32:1e3", []string{"ipv4-request-prefixes", `allowance "1e3" is out of range`, "plain decimal number"}},
		{"ipv4-request-prefixes 32:0.001", []string{"ipv4-request-prefixes", `allowance "0.001" is out of range`}},
		{"nocookie-udp-size 127", []string{"nocookie-udp-size", `"127"`, "0 (off) or from 128 to 65535"}},
		{"nocookie-udp-size 65536", []string{"nocookie-udp-size", `"65536"`, "from 128 to 65535"}},
		{"nocookie-udp-size 512 1024", []string{"nocookie-udp-size takes exactly one value, got 2"}},
		{"all-bytes-per-second 511", []string{"all-bytes-per-second", `"511"`, "512"}},
		{"all-bytes-per-second 2000000000", []string{"all-bytes-per-second", `"2000000000"`}},
		{"all-bytes-per-second", []string{"all-bytes-per-second takes exactly one value, got 0"}},
	})
}

// TestParseProtectionsOnce: a prefix keyword given twice is refused, as any
// other: the second list silently winning would not be what was read.
func TestParseProtectionsOnce(t *testing.T) {
	_, err := parseString("rrl {\n ipv4-request-prefixes 32:5\n ipv4-request-prefixes 24:50\n}")
	if err == nil || !strings.Contains(err.Error(), "ipv4-request-prefixes given more than once") {
		t.Errorf("prefix keyword twice: %v", err)
	}
	for _, kw := range []string{"ipv4-request-prefixes", "ipv6-request-prefixes", "nocookie-udp-size", "all-bytes-per-second"} {
		if !coreKeywords[kw] {
			t.Errorf("%s is not among the core's keywords", kw)
		}
	}
}

// TestReadmeUnderAttackParses: the README's configuration for a server
// under attack is accepted as it is printed.
func TestReadmeUnderAttackParses(t *testing.T) {
	text, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(text), "### A server under attack")
	if !ok {
		t.Fatal("no section \"A server under attack\" in README.md")
	}
	_, block, _ := strings.Cut(section, "    rrl {")
	block, _, ok = strings.Cut(block, "    }\n")
	if !ok {
		t.Fatal("no rrl block in the section")
	}
	h, err := parseString("rrl {" + block + "}")
	if err != nil {
		t.Fatalf("the README's block: %v", err)
	}
	for _, kw := range []string{"ipv4-request-prefixes", "ipv6-request-prefixes", "nocookie-udp-size", "all-bytes-per-second"} {
		if !strings.Contains(h.settings, kw+" ") {
			t.Errorf("the README's block does not set %s: %q", kw, h.settings)
		}
	}
}
