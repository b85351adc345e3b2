package replay_test

import (
	"strings"
	"testing"

	"github.com/dnsrrl/rrl/replay"
)

const corefile = `. {
    whoami
}
example.org:53 example.net {
    file db.example.org
    rrl example.org {
        responses-per-second 5
        nxdomains-per-second 2
        exempt-clients 192.0.2.0/24
        exempt-clients 2001:db8::/32
        log-only
        cookie-secret 000102030405060708090a0b0c0d0e0f
    }
}
other.example {
    rrl {
        responses-per-second 1
    }
}
`

func TestParseCorefile(t *testing.T) {
	cf, err := replay.ParseCorefile("Corefile", strings.NewReader(corefile))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range cf.Settings {
		got = append(got, s.String())
	}
	want := "responses-per-second 5; nxdomains-per-second 2; exempt-clients 192.0.2.0/24; exempt-clients 2001:db8::/32"
	if strings.Join(got, "; ") != want {
		t.Errorf("settings %q, want %q", strings.Join(got, "; "), want)
	}
	if strings.Join(cf.Zones, " ") != "example.org." || !cf.ReportOnly || len(cf.CookieSecrets) != 1 || cf.CookieSecrets[0][15] != 15 {
		t.Errorf("zones %v, report-only %v, secrets %v", cf.Zones, cf.ReportOnly, cf.CookieSecrets)
	}

	cf, err = replay.ParseCorefile("Corefile", strings.NewReader("dns://example.com:1053 Example.NET {\n rrl {\n  window 5\n }\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cf.Zones, " ") != "example.com. example.net." {
		t.Errorf("zones from the server block's keys: %v", cf.Zones)
	}
}

func TestParseCorefileErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a {\n rrl {\n  responses-per-second 5x\n }\n}\n", `Corefile:3 - Error during parsing: responses-per-second "5x"`},
		{"a {\n rrl {\n  window 0\n }\n}\n", `Corefile:3 - Error during parsing: window "0"`},
		{"a {\n rrl {\n  slip-ratio 2\n  slip-ratio 3\n }\n}\n", `Corefile:4 - Error during parsing: slip-ratio given more than once`},
		{"a {\n rrl {\n  log-only\n  report-only\n }\n}\n", `Corefile:4 - Error during parsing: report-only given more than once`},
		{"a {\n rrl {\n  frobnicate 1\n }\n}\n", `Corefile:3 - Error during parsing: unknown property "frobnicate"; the properties are window, `},
		{"a {\n rrl {\n  window 1 2\n }\n}\n", `Corefile:3 - Error during parsing: window takes exactly one value, got 2`},
		{"a {\n rrl {\n  window \"\"\n }\n}\n", `Corefile:3 - Error during parsing: window ""`},
		{"a {\n rrl {\n  exempt-clients 192.0.2.0/24\n  exempt-clients 192.0.2.1/24\n }\n}\n", `Corefile:4 - Error during parsing: exempt-clients "192.0.2.1/24"`},
		{"a {\n rrl {\n  cookie-secret 00\n }\n}\n", `Corefile:3 - Error during parsing: cookie-secret: want exactly 32 hex digits`},
		{"a {\n whoami\n}\n", `Corefile: no rrl block`},
		{"a {\n rrl {\n", `Corefile:2 - Error during parsing: Unexpected EOF`},
	} {
		_, err := replay.ParseCorefile("Corefile", strings.NewReader(c.in))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to begin %q", c.in, err, c.want)
		}
	}
}

// Only queries in the zones are charged, as the plugin charges only its own.
func TestZones(t *testing.T) {
	ex := traffic(t, 2, 100, 0, 0)
	capture := pcapOf(t, ethernet, false, ex)
	rep := replayBytes(t, replay.Options{Zones: []string{"example.net"}}, capture)
	if rep.Queries != 0 || rep.Skipped[replay.SkipOutOfZone] != int64(2*len(ex)) {
		t.Errorf("zone example.net: %d queries, skipped %v", rep.Queries, rep.Skipped)
	}
	rep = replayBytes(t, replay.Options{Zones: []string{"Example.ORG"}}, capture)
	if rep.Queries != int64(len(ex)) || len(rep.Skipped) != 0 {
		t.Errorf("zone example.org: %d queries, skipped %v", rep.Queries, rep.Skipped)
	}
}
