package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dnsrrl/rrl/replay"
	"github.com/dnsrrl/rrl/replay/internal/reportpage"
)

const sample = "../../testdata/sample.pcap"

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestHelp(t *testing.T) {
	code, _, stderr := runCLI(t, "-h")
	if code != 0 || !strings.HasPrefix(stderr, "usage: rrl-replay") || !strings.Contains(stderr, "responses-per-second") || !strings.Contains(stderr, "-sweep") {
		t.Errorf("-h: exit %d, %q", code, stderr)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "give capture files or -listen"},
		{[]string{"-set", "responses-per-second=fast", sample}, 2, `-set: responses-per-second "fast"`},
		{[]string{"-set", "responses-per-second", sample}, 2, `want keyword=value`},
		{[]string{"-sweep", "window=1,0", sample}, 2, `-sweep: window "0"`},
		{[]string{"-cookie-secret", "abc", sample}, 2, "-cookie-secret: want exactly 32 hex digits"},
		{[]string{"-top", "0", sample}, 2, "-top 0"},
		{[]string{"-zones", "example.org,", sample}, 2, `rrl-replay: zone "": empty; write . for the root zone`},
		{[]string{"-corefile", "nonexistent.Corefile", sample}, 2, "nonexistent.Corefile"},
		{[]string{"main.go"}, 1, "rrl-replay: main.go: not a pcap, pcapng or dnstap file\n"},
		{[]string{"."}, 1, "rrl-replay: .: read .: is a directory\n"},
		{[]string{"-listen", "udp:1.2.3.4:5"}, 2, "want unix:/path/to/socket or tcp:127.0.0.1:PORT"},
		{[]string{"-listen", "foo:/x"}, 2, `rrl-replay: -listen "foo:/x": want unix:/path/to/socket`},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, %q; want exit %d and one line with %q", c.args, code, stderr, c.code, c.want)
		}
	}
}

// The JSON report has the fields scripts rely on.
func TestJSON(t *testing.T) {
	code, stdout, stderr := runCLI(t, "-json", "-set", "responses-per-second=5", sample)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r struct {
		Responses, Sent, Slipped, Dropped, RequestsDropped *int64
		Categories                                         map[string]struct{ Sent, Slipped, Dropped *int64 }
		Limited                                            []struct {
			Network, Category, Name, Type string
			Sent, Slipped, Dropped        *int64
			First, Last                   string
		}
		Bytes   struct{ Captured, Sent *int64 }
		Skipped map[string]int64
	}
	dec := json.NewDecoder(strings.NewReader(strings.ReplaceAll(stdout, `"requests_dropped"`, `"requestsdropped"`)))
	if err := dec.Decode(&r); err != nil {
		t.Fatal(err)
	}
	if r.Responses == nil || r.Sent == nil || r.Slipped == nil || r.Dropped == nil || r.RequestsDropped == nil || r.Bytes.Captured == nil || r.Bytes.Sent == nil || r.Skipped == nil {
		t.Fatalf("a field is missing:\n%s", stdout)
	}
	if *r.Responses != *r.Sent+*r.Slipped+*r.Dropped || *r.Responses != 1000 {
		t.Errorf("responses %d, sent %d, slipped %d, dropped %d", *r.Responses, *r.Sent, *r.Slipped, *r.Dropped)
	}
	for _, c := range []string{"answer", "referral", "nodata", "nxdomain", "error"} {
		if cat, ok := r.Categories[c]; !ok || cat.Sent == nil || cat.Slipped == nil || cat.Dropped == nil {
			t.Errorf("category %s missing", c)
		}
	}
	if len(r.Limited) == 0 {
		t.Fatal("nothing limited")
	}
	l := r.Limited[0]
	if l.Network != "198.51.100.0/24" || l.Category != "answer" || l.Name != "example.org." || l.Type != "TXT" || l.Slipped == nil {
		t.Errorf("limited %+v", l)
	}
	for _, ts := range []string{l.First, l.Last} {
		if _, err := time.Parse(time.RFC3339, ts); err != nil {
			t.Error(err)
		}
	}
}

func TestSweepJSON(t *testing.T) {
	code, stdout, stderr := runCLI(t, "-json", "-sweep", "responses-per-second=1,5", sample)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var reports []struct {
		Setting   string
		Responses int64
	}
	if err := json.Unmarshal([]byte(stdout), &reports); err != nil {
		t.Fatal(err)
	}
	if len(reports) != 2 || reports[0].Setting != "responses-per-second=1" || reports[1].Setting != "responses-per-second=5" || reports[1].Responses != 1000 {
		t.Errorf("%+v", reports)
	}
}

// Text, with the settings from a Corefile, and the HTML page beside it.
func TestCorefileTextHTML(t *testing.T) {
	dir := t.TempDir()
	corefile := filepath.Join(dir, "Corefile")
	os.WriteFile(corefile, []byte("example.org {\n  rrl {\n    responses-per-second 5\n    report-only\n  }\n}\n"), 0o644)
	page := filepath.Join(dir, "report.html")
	code, stdout, stderr := runCLI(t, "-corefile", corefile, "-html", page, sample)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"settings: responses-per-second 5", "zones: example.org.", "198.51.100.0/24", "all            1000"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("no %q in\n%s", want, stdout)
		}
	}
	html, err := os.ReadFile(page)
	if err != nil || !bytes.Contains(html, []byte("<svg")) {
		t.Errorf("HTML page: %v", err)
	}

	if strings.Contains(stderr, "not replayed") {
		t.Errorf("a notice of other blocks in a Corefile of one: %q", stderr)
	}

	// A second rrl block is named on stderr as not replayed.
	os.WriteFile(corefile, []byte("example.org {\n  rrl {\n    responses-per-second 5\n  }\n}\nexample.net 10.0.0.0/8 {\n  rrl\n}\n"), 0o644)
	code, stdout, stderr = runCLI(t, "-q", "-corefile", corefile, sample)
	want := corefile + ": the rrl block for example.net. 10.in-addr.arpa. is not replayed"
	if code != 0 || !strings.Contains(stderr, want) || !strings.Contains(stdout, "zones: example.org.") {
		t.Errorf("exit %d, stderr %q, want %q", code, stderr, want)
	}

	os.WriteFile(corefile, []byte("example.org {\n  rrl {\n    responses-per-second 5\n    window 0\n  }\n}\n"), 0o644)
	code, _, stderr = runCLI(t, "-corefile", corefile, sample)
	if code != 2 || !strings.Contains(stderr, corefile+":4 - Error during parsing: window \"0\"") {
		t.Errorf("exit %d, %q", code, stderr)
	}
}

// -zones takes names with spaces after the commas, as people write lists.
func TestZonesWithSpaces(t *testing.T) {
	code, stdout, stderr := runCLI(t, "-json", "-zones", "example.net, example.org", sample)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r struct {
		Zones     []string
		Responses int64
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Zones) != 2 || r.Zones[1] != "example.org." || r.Responses != 1000 {
		t.Errorf("zones %q, %d responses; want example.org. among them and 1000", r.Zones, r.Responses)
	}
}

// "-" reads the capture from standard input, compressed or not, with the
// same report as the file gives.
func TestStdin(t *testing.T) {
	code, want, stderr := runCLI(t, "-q", "-json", sample)
	if code != 0 || !strings.Contains(want, `"queries": 1000`) {
		t.Fatalf("from the file: exit %d, %s%s", code, stderr, want)
	}
	raw, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	for name, content := range map[string][]byte{"sample.pcap": raw, "sample.pcap.gz": gz.Bytes()} {
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		stdin := os.Stdin
		os.Stdin = f
		code, got, stderr := runCLI(t, "-q", "-json", "-")
		os.Stdin = stdin
		f.Close()
		if code != 0 || got != want {
			t.Errorf("%s on stdin: exit %d, %s\nreport:\n%s\nwant the file's:\n%s", name, code, stderr, got, want)
		}
	}
}

// After a bad flag, its one-line error and a one-line hint, not the help.
func TestBadFlagHint(t *testing.T) {
	code, _, stderr := runCLI(t, "-no-such-flag", sample)
	want := "flag provided but not defined: -no-such-flag\nrun rrl-replay -h for help\n"
	if code != 2 || stderr != want {
		t.Errorf("exit %d, %q; want exit 2 and %q", code, stderr, want)
	}
}

// A capture cut short is reported, with a warning on stderr and exit 3.
func TestCutCapture(t *testing.T) {
	raw, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.pcap")
	if err := os.WriteFile(cut, raw[:1000], 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "-q", cut)
	if code != 3 || !strings.Contains(stderr, "warning: the input is damaged") || !strings.Contains(stdout, "unreadable capture record: 1") {
		t.Errorf("exit %d, stderr %q, report:\n%s", code, stderr, stdout)
	}
}

// A zone or a port that matches nothing warns, naming the reason, and
// exits 4, with the all-zero report.
func TestNothingReplayed(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-zones", "example.net"}, "no query or response was replayed, of 2021 packets read: 2000 outside the limited zones (see -zones, or the Corefile's zones)"},
		{[]string{"-server-port", "5353"}, "no query or response was replayed, of 2021 packets read: 2021 not to or from the server port (see -server-port)"},
	} {
		code, stdout, stderr := runCLI(t, append(append([]string{"-q"}, c.args...), sample)...)
		if code != 4 || !strings.Contains(stderr, c.want) || !strings.Contains(stdout, "skipped") {
			t.Errorf("%q: exit %d, stderr %q; want exit 4 and %q", c.args, code, stderr, c.want)
		}
	}
}

// A record declaring 4 GiB on the standard input, a pipe, is read through
// without being held: the replay allocates less than 200 MB, counts the
// record and says the input is damaged.
func TestStdinBomb(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	go func() {
		defer pw.Close()
		le := binary.LittleEndian
		head := le.AppendUint32(nil, 0xa1b2c3d4)
		for _, v := range []uint32{0x00040002, 0, 0, 0xffffffff, 1, 0, 0, 0xffffffff, 0xffffffff} {
			head = le.AppendUint32(head, v)
		}
		if _, err := pw.Write(head); err != nil {
			return
		}
		zeros := make([]byte, 1<<20)
		for range 224 {
			if _, err := pw.Write(zeros); err != nil {
				return
			}
		}
	}()
	stdin := os.Stdin
	os.Stdin = pr
	defer func() { os.Stdin = stdin }()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	code, stdout, stderr := runCLI(t, "-q", "-json", "-")
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 200<<20 {
		t.Errorf("%d MiB allocated, want at most 200", alloc>>20)
	}
	if code != 3 || !strings.Contains(stdout, replay.SkipOversize+`": 1`) {
		t.Errorf("exit %d, %s\n%s", code, stderr, stdout)
	}
}

// A fatal error after messages were read reports them all the same.
func TestReportAfterFatalError(t *testing.T) {
	code, stdout, stderr := runCLI(t, "-q", sample, "main.go")
	if code != 1 || !strings.Contains(stderr, "rrl-replay: main.go: not a pcap, pcapng or dnstap file\nrrl-replay: reporting what was read\n") || !strings.Contains(stdout, "all            1000") {
		t.Errorf("exit %d, stderr %q, report:\n%s", code, stderr, stdout)
	}
}

// Flags after the capture apply, as they would before it: the report has
// the settings given after the file, and -q and -json too.
func TestFlagsAfterCapture(t *testing.T) {
	code, stdout, stderr := runCLI(t, sample, "-set", "responses-per-second=5", "-top", "1")
	if code != 0 || !strings.Contains(stdout, "settings: responses-per-second 5\n") || strings.Count(stdout, "198.51.100.0/24") != 2 {
		t.Errorf("exit %d, stderr %q, report:\n%s", code, stderr, stdout)
	}
	_, before, _ := runCLI(t, "-q", "-json", "-set", "responses-per-second=5", sample, sample)
	code, after, stderr := runCLI(t, sample, "-q", "-set", "responses-per-second=5", sample, "-json")
	if code != 0 || after != before || !strings.Contains(after, `"queries": 2000`) {
		t.Errorf("flags among two files: exit %d, %s\nreport:\n%s\nwant the report with the flags first:\n%s", code, stderr, after, before)
	}
}

// After "--" every argument is a file, even one named like a flag; a
// file that is not there stops the command before any report, in one
// line, which names -set for what looks like a setting.
func TestNoReportOfLostArguments(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-q", sample, "--", "-set"}, 1, "rrl-replay: stat -set: no such file or directory\n"},
		{[]string{"-q", sample, "responses-per-second=5"}, 1, "rrl-replay: stat responses-per-second=5: no such file or directory (a setting? write -set responses-per-second=5)\n"},
		{[]string{sample, "-set"}, 2, "flag needs an argument: -set\nrun rrl-replay -h for help\n"},
		{[]string{sample, "-no-such-flag"}, 2, "flag provided but not defined: -no-such-flag\nrun rrl-replay -h for help\n"},
	} {
		code, stdout, stderr := runCLI(t, c.args...)
		if code != c.code || stderr != c.want || stdout != "" {
			t.Errorf("%q: exit %d, stderr %q, stdout %d bytes; want exit %d, %q and no report", c.args, code, stderr, len(stdout), c.code, c.want)
		}
	}
	code, stdout, stderr := runCLI(t, "-q", "--", sample)
	if code != 0 || !strings.Contains(stdout, "all            1000") {
		t.Errorf("-- before the capture: exit %d, %s", code, stderr)
	}
}

// The page that report.png shows is what the command line it names
// writes, run from the repository's root.
func TestReportPNGCommand(t *testing.T) {
	want, err := reportpage.HTML("../../..")
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(t.TempDir(), "report.html")
	args := strings.Fields(strings.Replace(reportpage.Command, "report.html", page, 1))[1:]
	t.Chdir("../../..")
	code, _, stderr := runCLI(t, append([]string{"-q"}, args...)...)
	got, err := os.ReadFile(page)
	if code != 0 || err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s: exit %d, %s%v; the page differs from reportpage.HTML's", reportpage.Command, code, stderr, err)
	}
}
