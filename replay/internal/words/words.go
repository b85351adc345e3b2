// Package words wraps text at spaces, for the command's help and the
// captions of the HTML report's charts, which have no layout of their own
// to wrap them.
package words

import "strings"

// Wrap breaks s at spaces into lines of at most width bytes; a word
// longer than width is a line of its own.
func Wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines, line = append(lines, line), ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}
