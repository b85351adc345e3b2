package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/dnsrrl/rrl/replay"
)

// runSuggest reads the files twice: once for the traffic's peaks, from
// which it suggests settings, and again under the suggestion, to check
// it. So the files must be files (not the standard input, which cannot be
// read twice), and there is one configuration (no -sweep, no -listen).
func (c *cli) runSuggest(opts replay.Options, files []string, stdout, stderr io.Writer) int {
	switch {
	case c.listen != "" || c.sweep != "":
		fmt.Fprintln(stderr, "rrl-replay: -suggest reads capture files: not with -listen or -sweep")
		return exitUsage
	case slices.Contains(files, "-"):
		fmt.Fprintln(stderr, "rrl-replay: -suggest reads its captures twice (to suggest, then to check): give files, not - (the standard input)")
		return exitUsage
	}
	s, err := replay.NewSuggester(opts)
	if err != nil {
		fmt.Fprintf(stderr, "rrl-replay: %v\n", err)
		return exitUsage
	}
	if err := c.replay(s.Replay(), files, stderr); err != nil {
		fmt.Fprintf(stderr, "rrl-replay: %v\n", err)
		return exitFailed
	}
	sg, err := s.Suggest()
	if err != nil {
		fmt.Fprintf(stderr, "rrl-replay: -suggest: %v\n", err)
		return exitNothing
	}
	check, err := sg.NewCheck()
	if err != nil {
		fmt.Fprintf(stderr, "rrl-replay: -suggest: the suggestion does not apply: %v\n", err)
		return exitFailed
	}
	if err := c.replay(check, files, stderr); err != nil {
		fmt.Fprintf(stderr, "rrl-replay: %v\n", err)
		return exitFailed
	}
	sg.Checked(check)
	if c.htmlFile != "" {
		if err := writeFile(c.htmlFile, func(w io.Writer) error { return replay.WriteSuggestionHTML(w, sg) }); err != nil {
			fmt.Fprintf(stderr, "rrl-replay: %v\n", err)
			return exitFailed
		}
	}
	if c.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(sg)
	} else {
		err = replay.WriteSuggestion(stdout, sg)
	}
	if err != nil {
		fmt.Fprintf(stderr, "rrl-replay: %v\n", err)
		return exitFailed
	}
	return 0
}

// writeFile creates name and writes it with write, reporting the first
// error, the close's included.
func writeFile(name string, write func(io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
