//go:build linux

package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// openPTY opens a pseudo-terminal: its controlling side, which reads what
// is written to the terminal, and the terminal itself.
func openPTY(t *testing.T) (control, term *os.File) {
	t.Helper()
	control, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	fd := control.Fd()
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatalf("unlocking the pseudo-terminal: %v", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatalf("asking the pseudo-terminal's number: %v", e)
	}
	term, err = os.OpenFile("/dev/pts/"+strconv.FormatUint(uint64(n), 10), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return control, term
}

// progressRun is rrl-replay reading a capture from a named pipe, which
// stays open (so the replay goes on) until hold is closed.
type progressRun struct {
	code   int
	stdout bytes.Buffer
	done   chan struct{}
}

func startReplay(t *testing.T, stderr *os.File, hold <-chan struct{}, args ...string) *progressRun {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "capture")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no named pipe: %v", err)
	}
	capture, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	p := &progressRun{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.code = run(append(args, fifo), &p.stdout, stderr)
	}()
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0) // once the replay opens it
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer w.Close()
		w.Write(capture)
		<-hold
	}()
	return p
}

// collect reads r until it ends, into a buffer safe to look at meanwhile.
type collected struct {
	mu   sync.Mutex
	b    bytes.Buffer
	done chan struct{}
}

func collect(r io.Reader) *collected {
	c := &collected{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			c.mu.Lock()
			c.b.Write(buf[:n])
			c.mu.Unlock()
			if err != nil {
				return // EIO once the terminal is closed, EOF for a pipe
			}
		}
	}()
	return c
}

func (c *collected) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.String()
}

// Under a terminal, rrl-replay shows a progress line on stderr, rewritten
// each second and cleared at the end; with -q, or with stderr not a
// terminal, it shows none. All three replays run at once, held open until
// the first has shown its line twice (two seconds, two chances for the
// others to show theirs), then let finish and report.
func TestProgressLine(t *testing.T) {
	control, term := openPTY(t)
	defer control.Close()
	quietControl, quietTerm := openPTY(t)
	defer quietControl.Close()
	pipeR, pipeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pipeR.Close()
	shown, quiet, piped := collect(control), collect(quietControl), collect(pipeR)

	hold := make(chan struct{})
	onTerm := startReplay(t, term, hold)
	withQ := startReplay(t, quietTerm, hold, "-q")
	toPipe := startReplay(t, pipeW, hold)

	for deadline := time.Now().Add(20 * time.Second); strings.Count(shown.String(), "\r\033[Kread ") < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(hold)
			t.Fatalf("no progress line on the terminal: %q", shown.String())
		}
	}
	close(hold)
	for _, p := range []*progressRun{onTerm, withQ, toPipe} {
		<-p.done
		if p.code != 0 || !strings.Contains(p.stdout.String(), "responses") {
			t.Errorf("exit %d, report %q", p.code, p.stdout.String())
		}
	}
	term.Close()
	quietTerm.Close()
	pipeW.Close()
	<-shown.done
	<-quiet.done
	<-piped.done

	out := shown.String()
	if !strings.Contains(out, " packets, ") || !strings.Contains(out, " DNS messages (") || !strings.HasSuffix(out, "\r\033[K") {
		t.Errorf("terminal: progress %q; want lines of packets and messages read, cleared at the end", out)
	}
	if s := quiet.String(); s != "" {
		t.Errorf("-q: %q on the terminal; want nothing", s)
	}
	if s := piped.String(); s != "" {
		t.Errorf("stderr a pipe: %q; want nothing", s)
	}
}
