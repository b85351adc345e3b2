package words

import (
	"slices"
	"testing"
)

func TestWrap(t *testing.T) {
	for _, c := range []struct {
		s     string
		width int
		want  []string
	}{
		{"a bb ccc dddd", 6, []string{"a bb", "ccc", "dddd"}},
		{"  spaced   out  ", 20, []string{"spaced out"}},
		{"toolongword x", 4, []string{"toolongword", "x"}},
		{"", 4, []string{""}},
	} {
		if got := Wrap(c.s, c.width); !slices.Equal(got, c.want) {
			t.Errorf("Wrap(%q, %d) = %q, want %q", c.s, c.width, got, c.want)
		}
	}
}
