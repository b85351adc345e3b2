package rrl

import (
	"strings"
	"testing"
)

func TestSuggest(t *testing.T) {
	kws := append(Keywords(), "report-only", "log-only", "cookie-secret", "status", "log-limited")
	huge := strings.Repeat("responses-per-second", 1<<15)
	for _, tc := range []struct {
		word       string
		candidates []string
		want       string
	}{
		{"responses-per-secnd", kws, "responses-per-second"},   // a rune left out
		{"responses-per-seccond", kws, "responses-per-second"}, // one too many
		{"widnow", kws, "window"},                              // two swapped
		{"windoe", kws, "window"},                              // one replaced
		{"window", kws, "window"},                              // exact
		{"Window", kws, "window"},                              // case
		{"RESPONSES_PER_SECOND", kws, "responses-per-second"},  // case and "_"
		{"nxdomain-per-second", kws, "nxdomains-per-second"},
		{"ipv4-prefix-len", kws, "ipv4-prefix-length"}, // 3 edits in 18 runes
		{"cookie-secrets", kws, "cookie-secret"},       // a plugin keyword
		{"logonly", kws, "log-only"},
		{"statu", kws, "status"},
		// Too far: nonsense, a word too short to tell, 4 edits.
		{"frobnicate", kws, ""},
		{"no-such-thing", kws, ""},
		{"stat", kws, ""},
		{"qps", kws, ""},
		{"x", kws, ""},
		{"ipv4-prefix", kws, ""},
		{"window 5", kws, ""},
		// Odd input.
		{"", kws, ""},
		{"", []string{""}, ""},
		{"window", nil, ""},
		{"window", []string{}, ""},
		{" ", kws, ""},
		{huge, kws, ""},
		{"window" + huge, kws, ""},
		{"wíndow", kws, "window"},           // a rune of two bytes for one of one
		{"ŵïndow", kws, ""},                 // two runes replaced in six
		{"wind\xffw", kws, "window"},        // an invalid byte counts as one rune
		{"ÉTAT", []string{"état"}, "état"},  // case beyond ASCII
		{"état", []string{"etat"}, "etat"},  // one rune, not two bytes
		{"日本誤", []string{"日本語"}, "日本語"},     // three runes, limit 1
		{"日誤誤", []string{"日本語"}, ""},        // two edits in three runes
		{"🦀rate", []string{"rate"}, "rate"}, // a rune outside the BMP
		// The nearest wins, and of the equally near the first.
		{"ab", []string{"ax", "ay"}, "ax"},
		{"ab", []string{"axx", "ay"}, "ay"},
		{"abcdefgh", []string{"abcdefxx", "abcdefgx", "abcdefgh"}, "abcdefgh"},
	} {
		if got := Suggest(tc.word, tc.candidates); got != tc.want {
			w := tc.word
			if len(w) > 40 {
				w = w[:40] + "..."
			}
			t.Errorf("Suggest(%q) = %q, want %q", w, got, tc.want)
		}
	}
}

// A huge word is turned away by its length alone, without a copy.
func TestSuggestHugeWordCostsNoAllocation(t *testing.T) {
	kws := Keywords()
	huge := strings.Repeat("é", 1<<20)
	if n := testing.AllocsPerRun(10, func() { Suggest(huge, kws) }); n != 0 {
		t.Errorf("Suggest of a huge word allocates %v times", n)
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"abc", "abc", 0},
		{"ab", "ba", 1},  // a swap is one edit
		{"ca", "abc", 3}, // optimal string alignment: no rune edited twice
		{"kitten", "sitting", 3},
		{"日本語", "本日語", 1},
	} {
		if got := editDistance([]rune(tc.a), []rune(tc.b)); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := editDistance([]rune(tc.b), []rune(tc.a)); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.b, tc.a, got, tc.want)
		}
	}
}

// SetValue and Value name the nearest keyword, and all of them.
func TestUnknownKeywordSuggests(t *testing.T) {
	all := strings.Join(Keywords(), ", ")
	c := NewConfig()
	err := c.SetValue("responses-per-secnd", "5")
	want := `rrl: unknown keyword "responses-per-secnd" (value "5"); did you mean "responses-per-second"? The keywords are ` + all
	if err == nil || err.Error() != want {
		t.Errorf("SetValue: %v\nwant %s", err, want)
	}
	_, err = c.Value("slip_ratio")
	want = `rrl: unknown keyword "slip_ratio"; did you mean "slip-ratio"? The keywords are ` + all
	if err == nil || err.Error() != want {
		t.Errorf("Value: %v\nwant %s", err, want)
	}
	err = c.SetValue("frobnicate", "1")
	want = `rrl: unknown keyword "frobnicate" (value "1"); the keywords are ` + all
	if err == nil || err.Error() != want {
		t.Errorf("SetValue, nothing near: %v\nwant %s", err, want)
	}
}
