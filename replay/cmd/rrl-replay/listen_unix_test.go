//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/dnsrrl/rrl/replay/internal/capgen"
	"github.com/miekg/dns"
)

// TestMain runs the command itself when the test binary is started as a
// child by a test, with RRL_REPLAY_NOFILE as its limit of descriptors.
func TestMain(m *testing.M) {
	if os.Getenv("RRL_REPLAY_CHILD") != "" {
		if n, err := strconv.ParseUint(os.Getenv("RRL_REPLAY_NOFILE"), 10, 64); err == nil {
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(99)
			}
		}
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// -listen under a limit of 24 descriptors, with 40 idle connections
// (half silent, half idle after their handshake), outlives the exhaustion:
// it retries its accepts, closes the idle connections, reads the writer
// that came after them, and on SIGTERM prints the report of all it read.
func TestListenUnderDescriptorLimit(t *testing.T) {
	const idle, exchanges = 40, 200
	sock := filepath.Join(t.TempDir(), "tap.sock")
	// -duration ends the child even if this test dies before its SIGTERM.
	cmd := exec.Command(os.Args[0], "-q", "-json", "-idle-timeout", "500ms", "-duration", "3m", "-listen", "unix:"+sock)
	cmd.Env = append(os.Environ(), "RRL_REPLAY_CHILD=1", "RRL_REPLAY_NOFILE=24")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	dial := func() net.Conn {
		t.Helper()
		for range 200 { // until the socket is there
			c, err := net.Dial("unix", sock)
			if err == nil {
				return c
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("no socket; stderr: %s", stderr.String())
		return nil
	}
	for i := range idle {
		c := dial()
		defer c.Close()
		if i%2 == 1 {
			go capgen.NewTapWriter(c, true) // a handshake, then silence
		}
	}

	c := dial()
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute)) // a failure, not a hang, if never read
	tw, err := capgen.NewTapWriter(c, true)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i := range exchanges {
		q := capgen.Query(uint16(i), "example.org.", dns.TypeA, "")
		e := capgen.Exchange{At: at, Client: netip.MustParseAddrPort("198.51.100.7:4000"), Server: capgen.Server,
			Query: q, Response: capgen.Response(q, capgen.Answer, "example.org.")}
		if err := tw.Write(&e); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil { // returns once the replay has read it all
		t.Fatal(err)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	var rep struct{ Queries, Responses int64 }
	if jerr := json.Unmarshal(stdout.Bytes(), &rep); err != nil || jerr != nil {
		t.Fatalf("exit %v, %v; stderr:\n%s\nstdout:\n%s", err, jerr, stderr.String(), stdout.String())
	}
	if rep.Queries != exchanges || rep.Responses != exchanges {
		t.Errorf("%d queries, %d responses; want %d of each", rep.Queries, rep.Responses, exchanges)
	}
	if !bytes.Contains(stderr.Bytes(), []byte("too many open files; retrying in")) {
		t.Errorf("the descriptors never ran out; stderr:\n%s", stderr.String())
	}
}
