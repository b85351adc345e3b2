package rrl

import (
	"slices"
	"strings"
	"testing"
)

func TestSetValue(t *testing.T) {
	type tc struct {
		keyword, value string
		ok             bool
	}
	var cases []tc
	ints := map[string][2]string{ // keyword: lowest, highest
		"window":             {"1", "3600"},
		"ipv4-prefix-length": {"1", "32"},
		"ipv6-prefix-length": {"1", "128"},
		"slip-ratio":         {"0", "10"},
		"max-table-size":     {"1", "268435456"},
	}
	below := map[string]string{"window": "0", "ipv4-prefix-length": "0", "ipv6-prefix-length": "0", "slip-ratio": "-1", "max-table-size": "0"}
	above := map[string]string{"window": "3601", "ipv4-prefix-length": "33", "ipv6-prefix-length": "129", "slip-ratio": "11", "max-table-size": "268435457"}
	for k, r := range ints {
		cases = append(cases, tc{k, r[0], true}, tc{k, r[1], true}, tc{k, below[k], false}, tc{k, above[k], false},
			tc{k, "1.5", false}, tc{k, "", false}, tc{k, "ten", false}, tc{k, "0x10", false},
			tc{k, "+" + r[0], false}, tc{k, " " + r[0], false}, tc{k, r[1] + " ", false}, tc{k, "1e1", false})
	}
	for k := range rateKeywords {
		cases = append(cases, tc{k, "0", true}, tc{k, "0.5", true}, tc{k, "0.01", true}, tc{k, "5", true}, tc{k, "1000000", true},
			tc{k, "007", true}, tc{k, "1000000.0", true},
			tc{k, "0.0099", false}, tc{k, "1e-10", false}, tc{k, "5e-324", false},
			tc{k, "1000000.5", false}, tc{k, "-1", false}, tc{k, "-0.1", false}, tc{k, "NaN", false}, tc{k, "Inf", false},
			tc{k, "+Inf", false}, tc{k, "-Inf", false}, tc{k, "1e400", false}, tc{k, "", false}, tc{k, "five", false},
			// plain decimals only
			tc{k, " 7 ", false}, tc{k, "+5", false}, tc{k, "1e3", false}, tc{k, "1.5E+2", false}, tc{k, ".5", false}, tc{k, "5.", false},
			tc{k, "0x1p3", false}, tc{k, "0x10", false}, tc{k, "1_000", false}, tc{k, "-0", false}, tc{k, ".", false},
			tc{k, "e5", false}, tc{k, "1e", false}, tc{k, "1e+", false}, tc{k, "1e+-3", false}, tc{k, "1..5", false})
	}
	cases = append(cases,
		tc{"qps-scale", "0", true}, tc{"qps-scale", "1", true}, tc{"qps-scale", "250", true}, tc{"qps-scale", "0.5", false},
		tc{"qps-scale", "-5", false}, tc{"qps-scale", "NaN", false}, tc{"qps-scale", "1000001", false},
		tc{"exempt-clients", "192.0.2.1", true}, tc{"exempt-clients", "192.0.2.0/24, 2001:db8::/32", true},
		tc{"exempt-clients", "192.0.2.0/24 2001:db8::1 ::ffff:198.51.100.0/120", true},
		// a prefix with host bits set exempts more than it says
		tc{"exempt-clients", "10.0.0.1/8", false}, tc{"exempt-clients", "192.0.2.0/24, 2001:db8::1/32", false},
		tc{"exempt-clients", "::ffff:198.51.100.1/120", false},
		tc{"exempt-clients", "", false}, tc{"exempt-clients", " , ", false}, tc{"exempt-clients", "192.0.2.0/33", false},
		tc{"exempt-clients", "example.com", false}, tc{"exempt-clients", "192.0.2.1, bogus", false},
		tc{"no-such-keyword", "1", false}, tc{"Window", "15", false}, tc{"", "", false},
	)
	for _, c := range cases {
		cfg := NewConfig()
		before := cfg.String()
		err := cfg.SetValue(c.keyword, c.value)
		if c.ok && err != nil {
			t.Errorf("SetValue(%q, %q): %v", c.keyword, c.value, err)
		}
		if !c.ok {
			if err == nil {
				t.Errorf("SetValue(%q, %q) accepted a bad value", c.keyword, c.value)
				continue
			}
			if !strings.Contains(err.Error(), c.keyword) || (c.value != "" && !strings.Contains(err.Error(), c.value)) {
				t.Errorf("SetValue(%q, %q): error %q does not name the keyword and the value", c.keyword, c.value, err)
			}
			if cfg.String() != before {
				t.Errorf("SetValue(%q, %q) failed but changed the Config", c.keyword, c.value)
			}
		}
	}
}

func TestSetValueErrorNamesRange(t *testing.T) {
	for kv, want := range map[[2]string]string{
		{"window", "0"}:                 "1 to 3600",
		{"slip-ratio", "11"}:            "0 to 10",
		{"ipv6-prefix-length", "200"}:   "1 to 128",
		{"responses-per-second", "NaN"}: "0 (off) or from 0.01 to 1000000",
		{"qps-scale", "0.5"}:            "0 (off) or from 1 to 1000000",
	} {
		err := NewConfig().SetValue(kv[0], kv[1])
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("SetValue(%q, %q) = %v, want the range %q", kv[0], kv[1], err, want)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	c := NewConfig()
	want := "window 15; ipv4-prefix-length 24; ipv6-prefix-length 56; responses-per-second 0; referrals-per-second 0; " +
		"nodata-per-second 0; nxdomains-per-second 0; errors-per-second 0; all-per-second 0; requests-per-second 0; proven-requests-per-second 0; " +
		"slip-ratio 2; qps-scale 0; max-table-size 100000; all-bytes-per-second 0; nocookie-udp-size 0; stream-time-per-second 0; stream-time-instant 0"
	if got := c.String(); got != want {
		t.Errorf("defaults:\n got %s\nwant %s", got, want)
	}
	if c.IsActive() {
		t.Error("a default Config is active")
	}
}

func TestPerCategoryRatesDefaultToResponses(t *testing.T) {
	c := NewConfig()
	if err := c.SetValue("responses-per-second", "5"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetValue("nxdomains-per-second", "0"); err != nil {
		t.Fatal(err)
	}
	s := c.String()
	for _, want := range []string{"referrals-per-second 5", "nodata-per-second 5", "errors-per-second 5", "nxdomains-per-second 0", "all-per-second 0", "requests-per-second 0"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
}

func TestIsActive(t *testing.T) {
	for k := range rateKeywords {
		c := NewConfig()
		if err := c.SetValue(k, "1"); err != nil {
			t.Fatal(err)
		}
		if !c.IsActive() {
			t.Errorf("%s 1: not active", k)
		}
	}
	c := NewConfig()
	c.SetValue("window", "5")
	c.SetValue("qps-scale", "100")
	if c.IsActive() {
		t.Error("active with no allowance set")
	}
}

func TestExemptClientsAccumulate(t *testing.T) {
	c := NewConfig()
	c.SetValue("exempt-clients", "192.0.2.1")
	c.SetValue("exempt-clients", "2001:db8::/32,198.51.100.0/24")
	if got, want := c.String(), "; exempt-clients 192.0.2.1/32 2001:db8::/32 198.51.100.0/24;"; !strings.Contains(got, want) {
		t.Errorf("got %q, want it to hold %q", got, want)
	}
}

func TestNewRRLCopiesConfig(t *testing.T) {
	clock := newTestClock()
	c := NewConfig()
	c.SetNowFunc(clock.Now)
	c.SetValue("responses-per-second", "1")
	r := NewRRL(c)
	c.SetValue("responses-per-second", "1000") // too late to matter
	c.SetValue("exempt-clients", "192.0.2.0/24")
	if got := actions(r, udp("192.0.2.1"), answer("example."), 3); got != "STD" {
		t.Errorf("got %s, want STD: the RRL followed a later change to its Config", got)
	}
}

func TestKeywordsAreAccepted(t *testing.T) {
	values := map[string]string{"exempt-clients": "192.0.2.1", "ipv4-request-prefixes": "32:1", "ipv6-request-prefixes": "64:1",
		"all-bytes-per-second": "512", "nocookie-udp-size": "512", "stream-time-per-second": "100ms", "stream-time-instant": "1s"}
	for _, k := range Keywords() {
		v, ok := values[k]
		if !ok {
			v = "1"
		}
		if err := NewConfig().SetValue(k, v); err != nil {
			t.Errorf("Keywords lists %q, which SetValue refuses: %v", k, err)
		}
	}
	if got, want := len(Keywords()), len(rateKeywords)+13; got != want {
		t.Errorf("Keywords lists %d keywords, SetValue knows %d", got, want)
	}
}

func TestLimitNamesAreKeywords(t *testing.T) {
	for kind := range LimitKindLast {
		if !kind.plainRate() {
			if !slices.Contains(Keywords(), kind.String()) {
				t.Errorf("kind %d is named %q, which is no keyword", kind, kind)
			}
			continue
		}
		if r, ok := rateKeywords[kind.String()]; !ok || r != kind {
			t.Errorf("kind %d is named %q, the keyword of rate %d", kind, kind, r)
		}
	}
}

func TestHostBitsErrorNamesTheNetwork(t *testing.T) {
	err := NewConfig().SetValue("exempt-clients", "192.0.2.0/24, 10.0.0.1/8")
	want := `rrl: exempt-clients "192.0.2.0/24, 10.0.0.1/8": 10.0.0.1/8 has bits set past its prefix length; write the network, 10.0.0.0/8, or the address alone`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// TestValueReadsBack checks that Value returns, for every keyword, what
// SetValue reads back into the same setting, and the effective defaults.
func TestValueReadsBack(t *testing.T) {
	c := NewConfig()
	for kw, want := range map[string]string{
		"window": "15", "ipv4-prefix-length": "24", "ipv6-prefix-length": "56", "responses-per-second": "0",
		"proven-requests-per-second": "0", "slip-ratio": "2", "qps-scale": "0", "max-table-size": "100000", "exempt-clients": "",
	} {
		if got, err := c.Value(kw); err != nil || got != want {
			t.Errorf("default %s: %q, %v; want %q", kw, got, err, want)
		}
	}
	set := map[string]string{
		"window": "30", "ipv4-prefix-length": "22", "ipv6-prefix-length": "48", "responses-per-second": "7.25",
		"nxdomains-per-second": "0.5", "all-per-second": "1000000", "requests-per-second": "0.01", "slip-ratio": "0",
		"qps-scale": "250", "max-table-size": "268435456", "exempt-clients": "192.0.2.0/24 2001:db8::1/128",
	}
	for kw, v := range set {
		if err := c.SetValue(kw, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, kw := range Keywords() {
		v, err := c.Value(kw)
		if err != nil {
			t.Fatalf("%s: %v", kw, err)
		}
		if want, ok := set[kw]; ok && v != want {
			t.Errorf("%s: %q, want %q", kw, v, want)
		}
		d := NewConfig()
		if v != "" {
			if err := d.SetValue(kw, v); err != nil {
				t.Errorf("SetValue does not read Value's %s %q: %v", kw, v, err)
			}
		}
	}
	for kw, want := range map[string]string{"referrals-per-second": "7.25", "proven-requests-per-second": "0.01"} {
		if got, _ := c.Value(kw); got != want {
			t.Errorf("%s follows its default: %q, want %q", kw, got, want)
		}
	}
	if _, err := c.Value("no-such-keyword"); err == nil || !strings.Contains(err.Error(), "no-such-keyword") {
		t.Errorf("unknown keyword: %v", err)
	}
}

func TestStatsStringLabelsEveryNumber(t *testing.T) {
	s := Stats{CacheLength: 2, Evictions: 9}
	s.countN(AllowanceNoData, Slip, IPOk, RTRateLimit, 1)
	want := "RPS Answer 0 Referral 0 NoData 1 NXDomain 0 Error 0; Actions Send 0 Drop 0 Slip 1; " +
		"IPReasons Ok 1 NotConfigured 0 NotReached 0 RateLimit 0 CacheFull 0 Exempt 0; " +
		"RTReasons Ok 0 NotConfigured 0 NotReached 0 RateLimit 1 NotUDP 0 CacheFull 0 AllLimit 0 AllBytesLimit 0 TooLarge 0; CacheLength 2; Evictions 9; " +
		"RequestPrefixDrops IPv4 [] IPv6 []; AllBytesDrops 0; TooLarge 0; StreamTimeDrops 0"
	if got := s.String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestCopyThroughIsSetAndValue copies a Config's set keywords through
// Value into a new one, which must decide as the original does, and shows
// why the copy must skip keywords not set: setting the proven allowance
// read back from its default gives proven sources their own account.
func TestCopyThroughIsSetAndValue(t *testing.T) {
	orig := NewConfig()
	for k, v := range map[string]string{"requests-per-second": "2", "responses-per-second": "5", "window": "20", "exempt-clients": "198.51.100.0/24"} {
		if err := orig.SetValue(k, v); err != nil {
			t.Fatal(err)
		}
	}
	copied, all := NewConfig(), NewConfig()
	for _, k := range Keywords() {
		v, _ := orig.Value(k)
		if orig.IsSet(k) {
			if err := copied.SetValue(k, v); err != nil {
				t.Fatal(err)
			}
		}
		if v != "" {
			all.SetValue(k, v)
		}
	}
	for _, k := range []string{"requests-per-second", "exempt-clients"} {
		if !orig.IsSet(k) || !copied.IsSet(k) {
			t.Errorf("%s not set", k)
		}
	}
	if orig.IsSet("proven-requests-per-second") || orig.IsSet("referrals-per-second") || orig.IsSet("slip-ratio") {
		t.Error("a keyword left at its default reads as set")
	}
	if orig.SetValue("slip-ratio", "11") == nil || orig.IsSet("slip-ratio") {
		t.Error("a refused SetValue marked its keyword set")
	}
	verdicts := func(c *Config) string {
		c.SetNowFunc(newTestClock().Now)
		r := NewRRL(c)
		return requests(r, tcp("192.0.2.1"), false, 2) + requests(r, udp("192.0.2.1"), false, 2)
	}
	if got, want := verdicts(copied), verdicts(orig); got != want {
		t.Errorf("the copy decides %s, the original %s", got, want)
	}
	if got := verdicts(all); got == verdicts(orig) {
		t.Errorf("copying defaults too should have split the proven account (%s)", got)
	}
}
