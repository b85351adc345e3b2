package replay_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dnsrrl/rrl/replay"
	"github.com/dnsrrl/rrl/replay/internal/capgen"
	"github.com/miekg/dns"
)

const testZone = `$ORIGIN example.test.
@         3600 IN SOA ns1 hostmaster 1 7200 3600 1209600 300
@              IN NS  ns1
ns1            IN A   192.0.2.1
www            IN A   192.0.2.2
*.wild         IN A   192.0.2.3
*.wild         IN TXT "wild"
*.alias        IN CNAME www
*.chain        IN CNAME x.wild
to-wild        IN CNAME y.wild
sub            IN NS  ns.sub
ns.sub         IN A   192.0.2.53
*.sub2         IN A   192.0.2.4
a.b.sub2       IN A   192.0.2.5
d              IN DNAME example.net.
`

// writeZone writes testZone to a file and reads it as the zone example.test.
func zoneData(t *testing.T) *replay.ZoneData {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db.example.test")
	if err := os.WriteFile(path, []byte(testZone), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := replay.ReadZoneFiles([]replay.ZoneFile{{Path: path, Origins: []string{"example.test."}, At: "Corefile:3"}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The wildcard origin is the one the file plugin records in its metadata
// ("zone/wildcard") for the same question.
func TestWildcardOrigin(t *testing.T) {
	d := zoneData(t)
	for _, c := range []struct {
		qname string
		qtype uint16
		want  string
	}{
		{"x.wild.example.test.", dns.TypeA, "wild.example.test."},
		{"X.Wild.Example.Test.", dns.TypeA, "wild.example.test."},   // names are read without case
		{"x.wild.example.test.", dns.TypeMX, "wild.example.test."},  // NODATA from the wildcard
		{"a.b.wild.example.test.", dns.TypeA, "wild.example.test."}, // several labels below it
		{"x.alias.example.test.", dns.TypeA, "alias.example.test."}, // a wildcard CNAME to a name that exists
		{"x.chain.example.test.", dns.TypeA, "wild.example.test."},  // to a name from another wildcard: the last one met
		{"x.alias.example.test.", dns.TypeCNAME, "alias.example.test."},
		{"to-wild.example.test.", dns.TypeA, "wild.example.test."}, // a CNAME to a wildcard's name
		{"to-wild.example.test.", dns.TypeCNAME, ""},
		{"www.example.test.", dns.TypeA, ""},
		{"nope.example.test.", dns.TypeA, ""}, // NXDOMAIN
		{"example.test.", dns.TypeSOA, ""},
		{"wild.example.test.", dns.TypeA, ""},  // the empty non-terminal above the wildcard
		{"x.sub.example.test.", dns.TypeA, ""}, // a referral
		{"x.sub2.example.test.", dns.TypeA, "sub2.example.test."},
		{"c.b.sub2.example.test.", dns.TypeA, ""}, // b.sub2 is an empty non-terminal: the closest encloser
		{"x.d.example.test.", dns.TypeA, ""},      // from the DNAME
		{"x.wild.example.org.", dns.TypeA, ""},    // outside the zones
	} {
		if got := d.WildcardOrigin(c.qname, c.qtype); got != c.want {
			t.Errorf("%s %s: wildcard origin %q, want %q", c.qname, dns.TypeToString[c.qtype], got, c.want)
		}
	}
	var none *replay.ZoneData
	if got := none.WildcardOrigin("x.wild.example.test.", dns.TypeA); got != "" {
		t.Errorf("no zone data: %q", got)
	}
}

func TestReadZoneFilesErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("$ORIGIN example.test.\n@ IN SOA ns1 hostmaster 1 2 3 4 5\nwww IN A not-an-address\n"), 0o644)
	noSOA := filepath.Join(dir, "nosoa")
	os.WriteFile(noSOA, []byte("$ORIGIN example.test.\nwww IN A 192.0.2.1\n"), 0o644)
	for _, c := range []struct {
		path string
		want string
	}{
		{"db.missing", "Corefile:7: file db.missing: open db.missing: no such file or directory (a relative path is read as CoreDNS reads it: under the block's root, from the working directory)"},
		{bad, "Corefile:7: " + bad + ": dns: bad A A: \"not-an-address\" at line: 3:"},
		{noSOA, "no SOA record for origin example.test."},
	} {
		_, err := replay.ReadZoneFiles([]replay.ZoneFile{{Path: c.path, Origins: []string{"example.test."}, At: "Corefile:7"}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.path, err, c.want)
		}
	}
}

// The Corefile's file directives are found in the rrl block's server block,
// with root joined to a relative path, and read.
func TestCorefileZoneFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "db.example.test"), []byte(testZone), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`example.test other.test {
    root %s
    rrl {
        responses-per-second 5
    }
    file db.example.test example.test
}
unrelated.test {
    file db.unrelated
}
`, dir)
	cf, err := replay.ParseCorefile("Corefile", strings.NewReader(conf))
	if err != nil {
		t.Fatal(err)
	}
	want := replay.ZoneFile{Path: filepath.Join(dir, "db.example.test"), Origins: []string{"example.test."}, At: "Corefile:6"}
	if len(cf.ZoneFiles) != 1 || fmt.Sprint(cf.ZoneFiles[0]) != fmt.Sprint(want) {
		t.Fatalf("zone files %+v, want %+v", cf.ZoneFiles, want)
	}
	d, err := cf.ReadZones()
	if err != nil {
		t.Fatal(err)
	}
	if got := d.WildcardOrigin("x.wild.example.test.", dns.TypeA); got != "wild.example.test." {
		t.Errorf("wildcard origin %q", got)
	}

	cf, err = replay.ParseCorefile("Corefile", strings.NewReader("example.test {\n rrl\n file db.missing\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cf.ReadZones(); err == nil || !strings.HasPrefix(err.Error(), "Corefile:3: file db.missing: ") {
		t.Errorf("missing zone file: %v", err)
	}
}

// A flood of random names under a wildcard is one account with the zone
// data, as in the plugin; without it, each name is an account of its own
// and nothing is limited.
func TestWildcardFloodCharged(t *testing.T) {
	client, server := addrPort("198.51.100.7:5300"), addrPort("192.0.2.53:53")
	var ex []capgen.Exchange
	for i := range 15 {
		name := fmt.Sprintf("r%d-%d.wild.example.test.", i, i*7919%1000)
		query := capgen.Query(uint16(i), name, dns.TypeA, "")
		ex = append(ex, capgen.Exchange{At: start.Add(time.Duration(i) * 10 * time.Millisecond), Client: client, Server: server,
			Query: query, Response: capgen.Response(query, capgen.Answer, "example.test.")})
	}
	capture := pcapOf(t, ethernet, false, ex)
	kv := settings(t, "responses-per-second=2", "slip-ratio=2")

	with := replayBytes(t, replay.Options{Settings: kv, ZoneData: zoneData(t)}, capture)
	if with.Sent != 2 || with.Slipped+with.Dropped != 13 || len(with.Limited) != 1 || with.Limited[0].Name != "*.wild.example.test." {
		t.Errorf("with zone data: sent %d, slipped %d, dropped %d, limited %+v; want 2 sent and *.wild.example.test. limited", with.Sent, with.Slipped, with.Dropped, with.Limited)
	}
	without := replayBytes(t, replay.Options{Settings: kv}, capture)
	if without.Sent != 15 {
		t.Errorf("without zone data: sent %d of 15, want all (one account per name)", without.Sent)
	}
}
