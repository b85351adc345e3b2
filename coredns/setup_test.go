package rrl

import (
	"strings"
	"testing"

	"github.com/coredns/caddy"

	core "github.com/dnsrrl/rrl"
)

// parseString runs the Corefile parser on one rrl directive of a server
// block for example.org.
func parseString(input string) (*RRL, error) {
	c := caddy.NewTestController("dns", input)
	c.ServerBlockKeys = []string{"example.org.:53"}
	return parse(c)
}

func TestParseValid(t *testing.T) {
	tests := []struct {
		input  string
		zones  []string
		active bool
		report bool
	}{
		{"rrl", []string{"example.org."}, false, false},
		{"rrl {\n}", []string{"example.org."}, false, false},
		{"rrl sub.example.org b.sub.example.org {\n responses-per-second 5\n}", []string{"sub.example.org.", "b.sub.example.org."}, true, false},
		{"rrl org {\n responses-per-second 5\n}", []string{"org."}, true, false},
		{"rrl {\n report-only\n responses-per-second 5\n}", []string{"example.org."}, true, true},
		{"rrl {\n log-only\n errors-per-second 1\n}", []string{"example.org."}, true, true},
		{"rrl {\n requests-per-second 100\n}", []string{"example.org."}, true, false},
		{"rrl {\n all-per-second 100\n}", []string{"example.org."}, true, false},
		{"rrl {\n responses-per-second 0\n}", []string{"example.org."}, false, false},
		{`rrl {
			window 15
			ipv4-prefix-length 24
			ipv6-prefix-length 56
			responses-per-second 10
			nodata-per-second 5
			nxdomains-per-second 5
			referrals-per-second 5
			errors-per-second 5
			slip-ratio 2
			requests-per-second 1000
			max-table-size 100000
			all-per-second 200
			qps-scale 250
			exempt-clients 192.0.2.0/24 2001:db8::/32 198.51.100.7
			exempt-clients 203.0.113.0/24
			cookie-secret 000102030405060708090a0b0c0d0e0f
		}`, []string{"example.org."}, true, false},
		{"rrl {\n responses-per-second 2.5\n cookie-secret 000102030405060708090A0B0C0D0E0F 0f0e0d0c0b0a09080706050403020100\n}", []string{"example.org."}, true, false},
	}
	for _, tc := range tests {
		h, err := parseString(tc.input)
		if err != nil {
			t.Errorf("%q: unexpected error %v", tc.input, err)
			continue
		}
		if strings.Join(h.Zones, ",") != strings.Join(tc.zones, ",") {
			t.Errorf("%q: zones %v, want %v", tc.input, h.Zones, tc.zones)
		}
		if h.active != tc.active || h.reportOnly != tc.report {
			t.Errorf("%q: active %v report-only %v, want %v %v", tc.input, h.active, h.reportOnly, tc.active, tc.report)
		}
	}
}

// TestParseBounds checks each numeric directive at both ends of its range
// and just past them. The error must carry the file:line position and the
// directive's name, so that an operator can find the bad line.
func TestParseBounds(t *testing.T) {
	tests := []struct {
		keyword           string
		low, high         string
		belowLow, overTop string
	}{
		{"window", "1", "3600", "0", "3601"},
		{"ipv4-prefix-length", "1", "32", "0", "33"},
		{"ipv6-prefix-length", "1", "128", "0", "129"},
		{"responses-per-second", "0", "1000000", "-1", "1000001"},
		{"nodata-per-second", "0", "1000000", "-1", "1000001"},
		{"nxdomains-per-second", "0", "1000000", "-1", "1000001"},
		{"referrals-per-second", "0", "1000000", "-1", "1000001"},
		{"errors-per-second", "0", "1000000", "-1", "1000001"},
		{"requests-per-second", "0", "1000000", "-1", "1000001"},
		{"all-per-second", "0", "1000000", "-1", "1000001"},
		{"qps-scale", "0", "1000000", "-1", "1000001"},
		{"slip-ratio", "0", "10", "-1", "11"},
		{"max-table-size", "1", "268435456", "0", "268435457"},
	}
	for _, tc := range tests {
		for _, v := range []string{tc.low, tc.high} {
			if _, err := parseString("rrl {\n" + tc.keyword + " " + v + "\n}"); err != nil {
				t.Errorf("%s %s: unexpected error %v", tc.keyword, v, err)
			}
		}
		for _, v := range []string{tc.belowLow, tc.overTop, "abc", "NaN", "1e400"} {
			_, err := parseString("rrl {\n" + tc.keyword + " " + v + "\n}")
			if err == nil {
				t.Errorf("%s %s: expected an error", tc.keyword, v)
				continue
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.keyword) || !strings.Contains(msg, "Testfile:2") {
				t.Errorf("%s %s: error %q should name the directive and the line", tc.keyword, v, msg)
			}
			if !strings.Contains(msg, tc.high) {
				t.Errorf("%s %s: error %q should give the allowed range", tc.keyword, v, msg)
			}
		}
	}
}

func TestParseArgumentCount(t *testing.T) {
	for _, kw := range core.Keywords() {
		if kw == "exempt-clients" {
			continue // one or more values
		}
		for _, args := range []string{"", " 1 2"} {
			_, err := parseString("rrl {\n" + kw + args + "\n}")
			if err == nil {
				t.Errorf("%q: expected an error", kw+args)
				continue
			}
			if !strings.Contains(err.Error(), kw) || !strings.Contains(err.Error(), "Testfile:2") {
				t.Errorf("%q: error %q should name the directive and the line", kw+args, err)
			}
		}
	}
}

// A misspelt directive is answered with the nearest one, core or plugin,
// and the list of them all; nonsense with the list alone.
func TestSetupUnknownPropertySuggests(t *testing.T) {
	list := strings.Join(core.Keywords(), ", ") + ", report-only, log-only, cookie-secret, status, log-limited, kernel-drop, kernel-drop-after, kernel-drop-for"
	for _, tc := range []struct{ line, want string }{
		{"responses-per-secnd 5", `unknown property "responses-per-secnd"; did you mean "responses-per-second"? The properties are `},
		{"nxdomain-per-second 5", `unknown property "nxdomain-per-second"; did you mean "nxdomains-per-second"? The properties are `},
		{"cookie-secrte 000102030405060708090a0b0c0d0e0f", `unknown property "cookie-secrte"; did you mean "cookie-secret"? The properties are `},
		{"log-limted", `unknown property "log-limted"; did you mean "log-limited"? The properties are `},
		{"reportonly", `unknown property "reportonly"; did you mean "report-only"? The properties are `},
		{"frobnicate 1", `unknown property "frobnicate"; the properties are `},
	} {
		_, err := parseString("rrl {\n " + tc.line + "\n}")
		want := "Testfile:2 - Error during parsing: " + tc.want + list
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v\nwant %s", tc.line, err, want)
		}
	}
	// Every property listed is one the block reads.
	for _, kw := range strings.Split(list, ", ") {
		_, err := parseString("rrl {\n " + kw + "\n}")
		if err != nil && strings.Contains(err.Error(), "unknown property") {
			t.Errorf("%s is listed but unknown: %v", kw, err)
		}
	}
}

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		input, want string
	}{
		{"rrl {\n no-such-thing 1\n}", "unknown property"},
		{"rrl {\n responses-per-second 0.001\n}", "responses-per-second"},
		{"rrl {\n report-only yes\n}", "report-only takes no value"},
		{"rrl {\n log-only 1\n}", "log-only takes no value"},
		{"rrl {\n exempt-clients\n}", "exempt-clients needs at least one"},
		{"rrl {\n exempt-clients 10.0.0.0/33\n}", "exempt-clients"},
		{"rrl {\n exempt-clients not-an-address\n}", "exempt-clients"},
		{"rrl {\n cookie-secret\n}", "cookie-secret: takes one secret"},
		{"rrl {\n cookie-secret 00 11 22\n}", "cookie-secret: takes one secret"},
		{"rrl {\n cookie-secret 0011\n}", "32 hex digits"},
		{"rrl {\n cookie-secret 000102030405060708090a0b0c0d0e0g\n}", "32 hex digits"},
		{"rrl {\n cookie-secret 000102030405060708090a0b0c0d0e0f 12\n}", "previous"},
		{"rrl {\n window 5\n window 6\n}", "window given more than once"},
		{"rrl {\n report-only\n log-only\n}", "log-only given more than once"},
		{"rrl {\n responses-per-second 1\n}\nrrl {\n responses-per-second 1\n}", "may appear only once"},
		{"rrl example..org {\n}", "invalid zone"},
	}
	tests = append(tests, newlyRefused...)
	for _, tc := range tests {
		_, err := parseString(tc.input)
		if err == nil {
			t.Errorf("%q: expected an error", tc.input)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %q, want it to contain %q", tc.input, err, tc.want)
		}
	}
}

// TestSetupRegisters runs the whole setup, as CoreDNS does at start.
func TestSetupRegisters(t *testing.T) {
	c := caddy.NewTestController("dns", "rrl {\n responses-per-second 10\n}")
	c.ServerBlockKeys = []string{"example.org.:53"}
	if err := setup(c); err != nil {
		t.Fatalf("setup: %v", err)
	}
	c = caddy.NewTestController("dns", "rrl {\n window 0\n}")
	err := setup(c)
	if err == nil || !strings.Contains(err.Error(), "plugin/rrl") {
		t.Fatalf("setup of a bad block: error %v, want one from plugin/rrl", err)
	}
}

// newlyRefused are inputs the plugin used to accept although they were
// wrong or ambiguous: a zone no query reaches, all-zero or repeated cookie
// secrets, numbers that are not plain decimals, prefixes with host bits.
var newlyRefused = []struct{ input, want string }{
	{"rrl other.org {\n responses-per-second 5\n}", "zone other.org. is outside the server block's zones"},
	{"rrl sub.example.org other.org {\n responses-per-second 5\n}", "zone other.org. is outside"},
	{"rrl {\n cookie-secret 00000000000000000000000000000000\n}", "Testfile:2 - Error during parsing: cookie-secret: the secret is all zeros"},
	{"rrl {\n cookie-secret 00112233445566778899aabbccddeeff 00000000000000000000000000000000\n}", "Testfile:2 - Error during parsing: cookie-secret: previous secret: the secret is all zeros"},
	{"rrl {\n cookie-secret 00112233445566778899aabbccddeeff 00112233445566778899AABBCCDDEEFF\n}", "Testfile:2 - Error during parsing: cookie-secret: the previous secret is the current one"},
	{"rrl {\n responses-per-second 1e3\n}", "Testfile:2 - Error during parsing: responses-per-second \"1e3\": want a plain decimal number"},
	{"rrl {\n responses-per-second +5\n}", "want a plain decimal number"},
	{"rrl {\n responses-per-second 5.\n}", "want a plain decimal number"},
	{"rrl {\n window +5\n}", "want a whole number (digits only)"},
	{"rrl {\n qps-scale 1e3\n}", "want a plain decimal number"},
	{"rrl {\n exempt-clients 10.0.0.1/8\n}", "Testfile:2 - Error during parsing: exempt-clients \"10.0.0.1/8\": 10.0.0.1/8 has bits set past its prefix length; write the network, 10.0.0.0/8"},
	{"rrl {\n exempt-clients 192.0.2.0/24,2001:db8::1/32\n}", "2001:db8::1/32 has bits set"},
}

// TestParseRefusesSecretsWithoutEchoing: an error about a cookie secret
// never repeats it, since Corefile errors end up in logs.
func TestParseRefusesSecretsWithoutEchoing(t *testing.T) {
	for _, in := range []string{
		"cookie-secret 00112233445566778899aabbccddeeff 00112233445566778899aabbccddeeff",
		"cookie-secret 00112233445566778899aabbccddeefg",
		"cookie-secret 00112233445566778899aabbccddeeff 0011223344556677",
		"cookie-secret 00112233445566778899aabbccddeeff 00000000000000000000000000000000",
	} {
		_, err := parseString("rrl {\n " + in + "\n}")
		if err == nil {
			t.Errorf("%q accepted", in)
			continue
		}
		for _, secret := range strings.Fields(in)[1:] {
			if strings.Contains(strings.ToLower(err.Error()), strings.ToLower(secret)) {
				t.Errorf("error %q repeats the secret", err)
			}
		}
	}
}

// TestParseAcceptsPlainDecimals: the refusal of other forms does not refuse
// the ones the README documents.
func TestParseAcceptsPlainDecimals(t *testing.T) {
	for _, in := range []string{"responses-per-second 5", "responses-per-second 0.5", "responses-per-second 0", "responses-per-second 05", "window 15", "qps-scale 250", "exempt-clients 10.0.0.0/8 10.0.0.1 2001:db8::/32"} {
		if _, err := parseString("rrl {\n " + in + "\n}"); err != nil {
			t.Errorf("%q: %v", in, err)
		}
	}
}

// TestTwoBlocksNamesFileAndLine: a second rrl in one server block is
// refused with the file and line of the second one.
func TestTwoBlocksNamesFileAndLine(t *testing.T) {
	c := caddy.NewTestController("dns", "rrl {\n responses-per-second 5\n}\nrrl {\n errors-per-second 5\n}")
	c.ServerBlockKeys = []string{"example.org.:53"}
	err := setup(c)
	if err == nil {
		t.Fatal("two rrl blocks in one server block were accepted")
	}
	for _, want := range []string{"Testfile:4", "only once"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestGrammarIsTheCores: the plugin takes a value exactly when the core's
// Config.SetValue does, for every keyword, and its error is the core's.
func TestGrammarIsTheCores(t *testing.T) {
	values := []string{"0", "1", "5", "0.5", "0.01", "0.001", "10", "128", "3600", "3601", "1000000", "1000001",
		"1e3", "+5", "-1", ".5", "5.", "0x10", "1_000", "NaN", "Inf", "abc",
		"10.0.0.0/8", "10.0.0.1/8", "192.0.2.1", "2001:db8::/32", "2001:db8::1/32", "::ffff:192.0.2.1"}
	for _, kw := range core.Keywords() {
		for _, v := range values {
			coreErr := core.NewConfig().SetValue(kw, v)
			_, err := parseString("rrl {\n " + kw + " " + v + "\n}")
			if (coreErr == nil) != (err == nil) {
				t.Errorf("%s %s: core says %v, plugin says %v", kw, v, coreErr, err)
				continue
			}
			if err != nil && !strings.Contains(err.Error(), strings.TrimPrefix(coreErr.Error(), "rrl: ")) {
				t.Errorf("%s %s: plugin error %q lacks the core's %q", kw, v, err, coreErr)
			}
		}
	}
}
