package replay_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dnsrrl/rrl/replay"
	"github.com/dnsrrl/rrl/replay/internal/capgen"
	"github.com/miekg/dns"
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
        kernel-drop lo
        kernel-drop-after 2s
        kernel-drop-for 30s
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
		{"a {\n rrl {\n  responses-per-secnd 5\n }\n}\n", `Corefile:3 - Error during parsing: unknown property "responses-per-secnd"; did you mean "responses-per-second"? The properties are window, `},
		{"a {\n rrl {\n  cookie-secrte 000102030405060708090a0b0c0d0e0f\n }\n}\n", `Corefile:3 - Error during parsing: unknown property "cookie-secrte"; did you mean "cookie-secret"? The properties are window, `},
		{"a {\n rrl {\n  log-limted\n }\n}\n", `Corefile:3 - Error during parsing: unknown property "log-limted"; did you mean "log-limited"? The properties are window, `},
		{"a {\n rrl {\n  window 1 2\n }\n}\n", `Corefile:3 - Error during parsing: window takes exactly one value, got 2`},
		{"a {\n rrl {\n  window \"\"\n }\n}\n", `Corefile:3 - Error during parsing: window ""`},
		{"a {\n rrl {\n  exempt-clients 192.0.2.0/24\n  exempt-clients 192.0.2.1/24\n }\n}\n", `Corefile:4 - Error during parsing: exempt-clients "192.0.2.1/24"`},
		{"a {\n rrl {\n  cookie-secret 00\n }\n}\n", `Corefile:3 - Error during parsing: cookie-secret: want exactly 32 hex digits`},
		{"a {\n whoami\n}\n", `Corefile: no rrl block`},
		{".0 {\n rrl\n}\n", `Corefile:2 - Error during parsing: zone ".0": not a valid domain name`},
		{"a {\n rrl a..b\n}\n", `Corefile:2 - Error during parsing: zone "a..b": not a valid domain name`},
		{"a {\n rrl\n}\nb {\n rrl {\n  window 0\n }\n}\n", `Corefile:6 - Error during parsing: window "0"`},
		{"a {\n rrl {\n  window 5\n }\n rrl b\n}\n", `Corefile:5 - Error during parsing: rrl may appear only once in a server block`},
		{"a {\n rrl\n}\nb {\n rrl {\n  window 5\n }\n rrl\n}\n", `Corefile:8 - Error during parsing: rrl may appear only once in a server block`},
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
	if _, err := replay.New(replay.Options{Zones: []string{"example.org", " "}}); err == nil || !strings.Contains(err.Error(), `zone "": empty`) {
		t.Errorf("an empty zone, which would be every name: error %v", err)
	}
	rep = replayBytes(t, replay.Options{Zones: []string{"Example.ORG"}}, capture)
	if rep.Queries != int64(len(ex)) || len(rep.Skipped) != 0 {
		t.Errorf("zone example.org: %d queries, skipped %v", rep.Queries, rep.Skipped)
	}
}

// A network written as a zone is read as its reverse zones, split at the
// next octet (IPv4) or nibble (IPv6) boundary, as CoreDNS reads it: the
// zones below are what CoreDNS 1.15's plugin.Host.NormalizeExact gives.
func TestReverseZones(t *testing.T) {
	for _, c := range []struct {
		key   string
		n     int // zones
		zones string
	}{
		{"10.0.0.0/8", 1, "10.in-addr.arpa."},
		{"10.1.2.3/8", 1, "10.in-addr.arpa."},
		{"192.0.2.0/24", 1, "2.0.192.in-addr.arpa."},
		{"10.0.0.0/15", 2, "0.10.in-addr.arpa. 1.10.in-addr.arpa."},
		{"172.16.0.0/12", 16, "16.172.in-addr.arpa. 17.172.in-addr.arpa. ... 31.172.in-addr.arpa."},
		{"192.0.2.64/26", 64, "64.2.0.192.in-addr.arpa. 65.2.0.192.in-addr.arpa. ... 127.2.0.192.in-addr.arpa."},
		{"128.0.0.0/1", 128, "128.in-addr.arpa. 129.in-addr.arpa. ... 255.in-addr.arpa."},
		{"0.0.0.0/0", 1, "in-addr.arpa."},
		{"192.0.2.1/32", 1, "1.2.0.192.in-addr.arpa."},
		{"2001:db8::/32", 1, "8.b.d.0.1.0.0.2.ip6.arpa."},
		{"2001:db8::/30", 4, "8.b.d.0.1.0.0.2.ip6.arpa. 9.b.d.0.1.0.0.2.ip6.arpa. ... b.b.d.0.1.0.0.2.ip6.arpa."},
		{"2001:db8::/34", 4, "0.8.b.d.0.1.0.0.2.ip6.arpa. 1.8.b.d.0.1.0.0.2.ip6.arpa. ... 3.8.b.d.0.1.0.0.2.ip6.arpa."},
		{"2001:db8::1/128", 1, "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa."},
		{"10.0.0.0/8:53", 1, "10.in-addr.arpa."},
		{"dns://10.0.0.0/24:1053", 1, "0.0.10.in-addr.arpa."},
		{"2001:db8::/48:5300", 1, "0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa."},
	} {
		for _, corefile := range []string{
			". {\n rrl " + c.key + " {\n }\n}\n", // on the rrl line
			c.key + " {\n rrl {\n }\n}\n",        // the server block's
		} {
			cf, err := replay.ParseCorefile("Corefile", strings.NewReader(corefile))
			if err != nil {
				t.Errorf("%s: %v", c.key, err)
				continue
			}
			got := cf.Zones
			if len(got) > 2 {
				got = []string{got[0], got[1], "...", got[len(got)-1]}
			}
			if len(cf.Zones) != c.n || strings.Join(got, " ") != c.zones {
				t.Errorf("%q: %d zones %q, want %d %q", corefile, len(cf.Zones), strings.Join(got, " "), c.n, c.zones)
			}
		}
	}
	if _, err := replay.ParseCorefile("Corefile", strings.NewReader("example.org {\n rrl 10.0.0.300/8 {\n }\n}\n")); err == nil ||
		!strings.Contains(err.Error(), `zone "10.0.0.300/8": neither a name nor a network`) {
		t.Errorf("a bad network: error %v", err)
	}
	// CoreDNS refuses these ("invalid CIDR"), IPv4-mapped networks among them.
	for _, key := range []string{"::1/128", "0:1::/32", "::ffff:10.0.0.0/104"} {
		if _, err := replay.ParseCorefile("Corefile", strings.NewReader(key+" {\n rrl\n}\n")); err == nil ||
			!strings.Contains(err.Error(), "CoreDNS refuses an IPv6 network that begins with : or 0") {
			t.Errorf("%s: error %v", key, err)
		}
	}
}

// A zone on the rrl line must contain or lie inside one of the server
// block's, as the plugin requires.
func TestRRLZonesWithinBlock(t *testing.T) {
	for _, c := range []struct{ corefile, err string }{
		{"example.org {\n rrl sub.example.org\n}\n", ""},
		{"sub.example.org {\n rrl example.org\n}\n", ""},
		{"example.org 10.0.0.0/8 {\n rrl 10.1.0.0/16\n}\n", ""},
		{"example.org {\n rrl example.net\n}\n", "Corefile:2 - Error during parsing: zone example.net. is outside the server block's zones [example.org.]"},
		{"example.org {\n rrl 10.0.0.0/8\n}\n", "Corefile:2 - Error during parsing: zone 10.in-addr.arpa. is outside"},
	} {
		_, err := replay.ParseCorefile("Corefile", strings.NewReader(c.corefile))
		if (c.err == "") != (err == nil) || err != nil && !strings.HasPrefix(err.Error(), c.err) {
			t.Errorf("%q: error %v, want %q", c.corefile, err, c.err)
		}
	}
}

// A network in Options.Zones limits the replay to the queries of its
// reverse zones.
func TestReverseZoneReplayed(t *testing.T) {
	client, server := netip.MustParseAddrPort("198.51.100.7:5300"), netip.MustParseAddrPort("192.0.2.53:53")
	var ex []capgen.Exchange
	for i, name := range []string{"1.2.0.192.in-addr.arpa.", "9.2.0.192.in-addr.arpa.", "1.3.0.192.in-addr.arpa."} {
		q := capgen.Query(uint16(i), name, dns.TypePTR, "")
		ex = append(ex, capgen.Exchange{At: start.Add(time.Duration(i) * time.Millisecond), Client: client, Server: server,
			Query: q, Response: capgen.Response(q, capgen.NXDomain, "in-addr.arpa.")})
	}
	rep := replayBytes(t, replay.Options{Zones: []string{"192.0.2.0/24"}}, pcapOf(t, ethernet, false, ex))
	if rep.Queries != 2 || rep.Skipped[replay.SkipOutOfZone] != 2 {
		t.Errorf("zone 192.0.2.0/24: %d queries, skipped %v; want the two of 2.0.192.in-addr.arpa. and one exchange out of zone", rep.Queries, rep.Skipped)
	}
}

// The zones of the rrl blocks after the first are listed, since the
// replay applies only the first.
func TestOtherBlocks(t *testing.T) {
	cf, err := replay.ParseCorefile("Corefile", strings.NewReader(corefile))
	if err != nil {
		t.Fatal(err)
	}
	if len(cf.OtherBlocks) != 1 || strings.Join(cf.OtherBlocks[0], " ") != "other.example." {
		t.Errorf("other blocks %v, want [[other.example.]]", cf.OtherBlocks)
	}
}

// FuzzParseCorefile reads arbitrary Corefiles: never a panic, and the
// zones of a Corefile read are fully qualified names in lower case. Inputs with an import are
// skipped, since an import reads other files.
func FuzzParseCorefile(f *testing.F) {
	f.Add(corefile)
	f.Add("10.0.0.0/15:53 {\n rrl 2001:db8::/30 example.ORG {\n  window 5\n }\n}\nb {\n rrl\n}\n")
	f.Fuzz(func(t *testing.T, in string) {
		if strings.Contains(in, "import") {
			return
		}
		cf, err := replay.ParseCorefile("Corefile", strings.NewReader(in))
		if err != nil {
			return
		}
		zones := cf.Zones
		for _, other := range cf.OtherBlocks {
			zones = append(zones, other...)
		}
		for _, z := range zones {
			if _, ok := dns.IsDomainName(z); !ok || !dns.IsFqdn(z) || z != strings.ToLower(z) {
				t.Errorf("zone %q is not a fully qualified name in lower case", z)
			}
		}
	})
}
