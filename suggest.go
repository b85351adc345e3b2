package rrl

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Suggest returns the candidate nearest to word, for a "did you mean" in
// an error about an unknown keyword, or "" when none is near enough to be
// the one meant.
//
// Nearness is the Damerau-Levenshtein distance (optimal string alignment:
// a rune added, removed, replaced, or two neighbours swapped, each counts
// one) between word and the candidate, read without regard to case and
// with "_" as "-". A candidate is near enough within a quarter of its own
// length in runes, at least 1 and at most 3: "windw" finds "window", and
// "responses-per-secnd" finds "responses-per-second", but "frobnicate"
// finds nothing. Of candidates equally near, the first in the list wins.
// A word equal to a candidate returns it; an empty word returns "".
func Suggest(word string, candidates []string) string {
	if word == "" {
		return ""
	}
	// A word longer than every candidate by more than the largest
	// threshold is far from all of them: the difference in lengths is a
	// lower bound of the distance. Saying so first keeps a huge word from
	// costing more than a count of its runes.
	longest := 0
	for _, c := range candidates {
		longest = max(longest, utf8.RuneCountInString(c))
	}
	n := utf8.RuneCountInString(word)
	if n > longest+maxSuggestDistance {
		return ""
	}
	w := foldRunes(word)
	best, bestDist := "", 0
	for _, c := range candidates {
		cr := foldRunes(c)
		limit := min(max(len(cr)/4, 1), maxSuggestDistance)
		if abs(len(cr)-len(w)) > limit {
			continue
		}
		d := editDistance(w, cr)
		if d <= limit && (best == "" || d < bestDist) {
			best, bestDist = c, d
		}
	}
	return best
}

// maxSuggestDistance is the most edits Suggest lets a word be from a
// candidate.
const maxSuggestDistance = 3

// foldRunes returns s as runes for Suggest to compare: lower case, with
// "_" read as "-".
func foldRunes(s string) []rune {
	r := make([]rune, 0, len(s))
	for _, c := range s {
		if c == '_' {
			c = '-'
		}
		r = append(r, unicode.ToLower(c))
	}
	return r
}

// editDistance is the optimal string alignment distance between a and b:
// the fewest insertions, deletions, substitutions and swaps of adjacent
// runes that turn a into b, no rune edited twice.
func editDistance(a, b []rune) int {
	// Three rows of the table: i-2, i-1 and i.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// unknownKeyword is the error for a keyword SetValue and Value do not
// know, after what names it: the nearest keyword if one is near, then all.
func unknownKeyword(keyword string) string {
	kws := Keywords()
	list := strings.Join(kws, ", ")
	if s := Suggest(keyword, kws); s != "" {
		return fmt.Sprintf("; did you mean %q? The keywords are %s", s, list)
	}
	return "; the keywords are " + list
}
