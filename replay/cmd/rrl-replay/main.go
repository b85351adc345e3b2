// Command rrl-replay replays captured DNS traffic (pcap, pcapng or dnstap
// files, or a live dnstap socket) through the rate limiter with the given
// settings, and reports which clients would have been limited, when, and
// how much of a reflection would have been cut. See the module's README.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/dnsrrl/rrl"
	"github.com/dnsrrl/rrl/miekgrrl"
	"github.com/dnsrrl/rrl/replay"
	"github.com/dnsrrl/rrl/replay/internal/words"
)

const usage = `usage: rrl-replay [flags] CAPTURE... [flags]
       rrl-replay [flags] -listen unix:/path/to/socket | tcp:127.0.0.1:PORT

Replays DNS traffic through the response rate limiter, with the capture's
own timestamps as the clock, and reports what the settings would have
done: responses sent, slipped and dropped per category, the most limited
client networks and responses, and the bytes a reflection would have lost.

CAPTURE is a pcap, pcapng or dnstap (frame streams) file, possibly
gzipped, or - for the standard input; several are replayed in order, as
one stream. Flags may come before or after them; after --, every
argument is a file. Ctrl-C stops and reports what was read. With -listen,
rrl-replay reads the dnstap that a running server writes (CoreDNS:
"dnstap unix:///path full") until interrupted or -duration has passed,
then reports.

Examples:
  rrl-replay -suggest capture.pcap     # settings from the traffic, checked
  rrl-replay -set responses-per-second=5 -sweep slip-ratio=1,2,3 capture.pcap
  rrl-replay -corefile Corefile -server-port 5353 -json capture.pcapng

Queries are charged as the servers charge them, when they arrive; their
responses unless the query carried a valid server cookie. A server cookie
is assumed valid unless -cookie-secret is given to check it.

Settings (-set, -sweep) take the core's keywords, as a Corefile's rrl
block does; every rate is off until set, so with no settings nothing is
limited:
  %s

Flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ", ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

type cli struct {
	sets       multiFlag
	corefile   string
	sweep      string
	jsonOut    bool
	htmlFile   string
	top        int
	serverPort uint
	zones      string
	secret     string
	listen     string
	duration   time.Duration
	maxConns   int
	idle       time.Duration
	quiet      bool
	suggest    bool
}

func run(args []string, stdout, stderr io.Writer) int {
	var c cli
	fs := flag.NewFlagSet("rrl-replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	help := func() {
		fmt.Fprintf(stderr, usage, strings.Join(words.Wrap(strings.Join(rrl.Keywords(), ", "), 72), "\n  "))
		fs.PrintDefaults()
	}
	fs.Usage = func() {} // after a bad flag, its error and a hint (below), not the help
	fs.Var(&c.sets, "set", "a setting as `keyword=value`, such as responses-per-second=5 (repeatable)")
	fs.StringVar(&c.corefile, "corefile", "", "take the settings and zones from the first rrl block of this Corefile")
	fs.StringVar(&c.sweep, "sweep", "", "replay once per value of a setting, `keyword=v1,v2,...`, and compare")
	fs.BoolVar(&c.jsonOut, "json", false, "write the report as JSON (an array of reports with -sweep)")
	fs.StringVar(&c.htmlFile, "html", "", "also write the report with charts as a self-contained HTML `file`")
	fs.IntVar(&c.top, "top", 10, "list this many of the most limited networks and responses (-1: all)")
	fs.UintVar(&c.serverPort, "server-port", 53, "the server's `port` in packet captures, which tells queries from responses")
	fs.StringVar(&c.zones, "zones", "", "limit only queries for names in these comma-separated `zones` (default: the Corefile's, else all)")
	fs.StringVar(&c.secret, "cookie-secret", "", "validate server cookies with this `hex` secret (32 hex digits; a second after a comma is the previous one)")
	fs.StringVar(&c.listen, "listen", "", "read dnstap from this `socket`, unix:/path or tcp:host:port, instead of files")
	fs.DurationVar(&c.duration, "duration", 0, "with -listen, stop and report after this long (default: at Ctrl-C)")
	fs.IntVar(&c.maxConns, "max-conns", replay.DefaultMaxConns, "with -listen, read at most this many `connections` at once; more wait")
	fs.DurationVar(&c.idle, "idle-timeout", replay.DefaultIdleTimeout, "with -listen, close a connection that sends nothing for this long")
	fs.BoolVar(&c.quiet, "q", false, "no progress line on stderr")
	fs.BoolVar(&c.suggest, "suggest", false, "suggest settings from the capture's ordinary traffic: an rrl block for a Corefile, each line with its reason,\n"+
		"networks far above the rest named as attacks and left out, and the capture replayed under it as a check\n"+
		"(-set and -corefile settings are kept as given; with -json, a JSON object; with -html, charts of the peaks)")
	files, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			help()
			return 0
		}
		fmt.Fprintln(stderr, hint)
		return exitUsage
	}
	if (len(files) == 0) == (c.listen == "") {
		fmt.Fprintln(stderr, "rrl-replay: give capture files or -listen, not both or neither (-h for help)")
		return exitUsage
	}
	if err := checkFiles(files); err != nil {
		fmt.Fprintf(stderr, "rrl-replay: %v\n", err)
		return exitFailed
	}
	if c.listen != "" {
		if _, _, err := replay.ListenAddr(c.listen); err != nil {
			fmt.Fprintf(stderr, "rrl-replay: -listen %v\n", err)
			return exitUsage
		}
	}
	if c.maxConns < 1 || c.idle <= 0 {
		fmt.Fprintf(stderr, "rrl-replay: -max-conns %d, -idle-timeout %v: want at least 1 connection and a positive duration\n", c.maxConns, c.idle)
		return exitUsage
	}
	opts, otherBlocks, err := c.options()
	if err != nil {
		fmt.Fprintf(stderr, "rrl-replay: %v\n", err)
		return exitUsage
	}
	for _, zones := range otherBlocks {
		fmt.Fprintf(stderr, "rrl-replay: %s: the rrl block for %s is not replayed; only the first block is (one configuration a replay)\n",
			c.corefile, strings.Join(zones, " "))
	}
	if c.suggest {
		return c.runSuggest(opts, files, stdout, stderr)
	}
	r, err := replay.New(opts)
	if err != nil {
		fmt.Fprintf(stderr, "rrl-replay: %v\n", err)
		return exitUsage
	}
	stopProgress := progress(r, stderr, c.quiet)
	err = c.replay(r, files, stderr)
	stopProgress()
	if err != nil {
		fmt.Fprintf(stderr, "rrl-replay: %v\n", err)
		if packets, _ := r.Stats(); packets > 0 {
			// What arrived before the failure is reported all the same.
			fmt.Fprintln(stderr, "rrl-replay: reporting what was read")
			c.write(r.Reports(), stdout, stderr)
		}
		return exitFailed
	}
	reports := r.Reports()
	if code := c.write(reports, stdout, stderr); code != 0 {
		return code
	}
	return check(reports[0], stderr)
}

// parseInterleaved parses flags wherever they are among the file
// arguments, as most commands do, and returns the files: flag.Parse stops
// at the first file, and would take "capture.pcap -set x=1" for three
// files and the report for one of no settings. After "--" every argument
// is a file, so that a file named like a flag can be given.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return files, nil
		}
		if stop := len(args) - len(rest); stop > 0 && args[stop-1] == "--" {
			return append(files, rest...), nil
		}
		files, args = append(files, rest[0]), rest[1:]
	}
}

// checkFiles fails on the first file that is not there, before anything
// is replayed: a report of the files before it would hide the mistake
// (a setting without its -set, say) on stderr alone.
func checkFiles(files []string) error {
	for _, f := range files {
		if f == "-" {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			if kw, _, ok := strings.Cut(f, "="); ok && slices.Contains(rrl.Keywords(), kw) {
				return fmt.Errorf("%v (a setting? write -set %s)", err, f)
			}
			return err
		}
	}
	return nil
}

// Exit statuses.
const (
	exitFailed  = 1 // an input could not be read, or is not a capture
	exitUsage   = 2 // a bad flag, setting or Corefile
	exitDamaged = 3 // the input is damaged: the report covers what could be read
	exitNothing = 4 // nothing was replayed: no query or response matched
)

// hint follows the one-line error of a bad flag.
const hint = "run rrl-replay -h for help"

// check warns on stderr of what the report alone would hide, and returns
// the exit status that says it: a damaged input (such as a file cut
// short), else nothing replayed (a zone or port that matches nothing).
func check(rep *replay.Report, stderr io.Writer) int {
	code := 0
	if rep.Queries == 0 && rep.Responses == 0 {
		fmt.Fprintf(stderr, "rrl-replay: warning: no query or response was replayed, of %d packets read%s\n", rep.Packets, skipReasons(rep.Skipped))
		code = exitNothing
	}
	// Damage comes first: it may be why nothing was replayed.
	if n := rep.Skipped[replay.SkipBadRecord] + rep.Skipped[replay.SkipOversize]; n > 0 {
		fmt.Fprintf(stderr, "rrl-replay: warning: the input is damaged (cut short?): %d unreadable or oversize capture records; the report covers what could be read\n", n)
		code = exitDamaged
	}
	return code
}

// skipReasons lists the reasons packets were skipped, the most common
// first, with a hint at the flag that decides the two a user can change.
func skipReasons(skipped map[string]int64) string {
	reasons := make([]string, 0, len(skipped))
	for k := range skipped {
		reasons = append(reasons, k)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if skipped[reasons[i]] != skipped[reasons[j]] {
			return skipped[reasons[i]] > skipped[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	var b strings.Builder
	for i, k := range reasons {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %s", skipped[k], k)
		switch k {
		case replay.SkipNotDNSPort:
			b.WriteString(" (see -server-port)")
		case replay.SkipOutOfZone:
			b.WriteString(" (see -zones, or the Corefile's zones)")
		}
	}
	return b.String()
}

// options turns the flags into replay options, and returns the zones of
// the Corefile's rrl blocks that the replay leaves out (all but the first).
func (c *cli) options() (replay.Options, [][]string, error) {
	opts := replay.Options{ServerPort: uint16(c.serverPort), Top: c.top}
	var otherBlocks [][]string
	if c.serverPort == 0 || c.serverPort > 65535 {
		return opts, nil, fmt.Errorf("-server-port %d: want 1 to 65535", c.serverPort)
	}
	if c.top == 0 || c.top < -1 {
		return opts, nil, fmt.Errorf("-top %d: want a number of entries, or -1 for all", c.top)
	}
	if c.corefile != "" {
		f, err := os.Open(c.corefile)
		if err != nil {
			return opts, nil, err
		}
		cf, err := replay.ParseCorefile(c.corefile, f)
		f.Close()
		if err != nil {
			return opts, nil, err
		}
		opts.Settings, opts.Zones, opts.CookieSecrets = cf.Settings, cf.Zones, cf.CookieSecrets
		if opts.ZoneData, err = cf.ReadZones(); err != nil {
			return opts, nil, err
		}
		otherBlocks = cf.OtherBlocks
	}
	for _, s := range c.sets {
		set, err := replay.ParseSetting(s)
		if err != nil {
			return opts, nil, fmt.Errorf("-set: %v", err)
		}
		opts.Settings = append(opts.Settings, set)
	}
	if c.sweep != "" {
		sw, err := replay.ParseSweep(c.sweep)
		if err != nil {
			return opts, nil, fmt.Errorf("-sweep: %v", err)
		}
		opts.Sweep = sw
	}
	if c.zones != "" {
		opts.Zones = nil
		for _, z := range strings.Split(c.zones, ",") {
			opts.Zones = append(opts.Zones, strings.TrimSpace(z)) // replay.New checks them
		}
	}
	if c.secret != "" {
		vals := strings.Split(c.secret, ",")
		for i := range vals {
			vals[i] = strings.TrimSpace(vals[i])
		}
		var err error
		if opts.CookieSecrets, err = miekgrrl.ParseSecrets(vals); err != nil {
			return opts, nil, fmt.Errorf("-cookie-secret: %v", err)
		}
	}
	return opts, otherBlocks, nil
}

// replay reads the files, or the socket, until they end or the user
// interrupts (Ctrl-C or SIGTERM): what was read is then reported.
func (c *cli) replay(r *replay.Replay, files []string, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.listen != "" {
		l, err := replay.ListenOn(c.listen)
		if err != nil {
			return err
		}
		if c.duration > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.duration)
			defer cancel()
		}
		return r.ListenWith(ctx, l, replay.ListenOptions{MaxConns: c.maxConns, IdleTimeout: c.idle,
			AcceptError: func(err error, pause time.Duration) {
				fmt.Fprintf(stderr, "rrl-replay: %v; retrying in %v\n", err, pause)
			}})
	}
	done, watched := make(chan struct{}), make(chan struct{})
	defer func() { close(done); <-watched }() // before stop cancels ctx
	go func() {
		defer close(watched)
		select {
		case <-ctx.Done():
			fmt.Fprintln(stderr, "rrl-replay: interrupted; reporting what was read")
			r.Stop()
			os.Stdin.Close() // a read from a pipe that is not writing ends now
		case <-done:
		}
	}()
	for _, f := range files {
		if err := r.ReadFile(f); err != nil {
			if ctx.Err() != nil {
				return nil // the input closed under the read
			}
			return err
		}
	}
	return nil
}

func (c *cli) write(reports []*replay.Report, stdout, stderr io.Writer) int {
	if c.htmlFile != "" {
		f, err := os.Create(c.htmlFile)
		if err == nil {
			err = replay.WriteHTML(f, reports)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "rrl-replay: %v\n", err)
			return 1
		}
	}
	var err error
	if c.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if c.sweep != "" {
			err = enc.Encode(reports)
		} else {
			err = enc.Encode(reports[0])
		}
	} else {
		err = replay.WriteText(stdout, reports)
	}
	if err != nil {
		fmt.Fprintf(stderr, "rrl-replay: %v\n", err)
		return 1
	}
	return 0
}

// progress writes a progress line to stderr every second while the replay
// runs, when stderr is a terminal and -q is not given. It returns the
// function that stops it and clears the line.
func progress(r *replay.Replay, stderr io.Writer, quiet bool) func() {
	f, ok := stderr.(*os.File)
	if quiet || !ok || !isTerminal(f) {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		start := time.Now()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(f, "\r\033[K")
				return
			case <-t.C:
				p, m := r.Stats()
				secs := time.Since(start).Seconds()
				fmt.Fprintf(f, "\r\033[Kread %d packets, %d DNS messages (%.0f packets/s)", p, m, float64(p)/secs)
			}
		}
	}()
	return func() { close(done); <-finished }
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
