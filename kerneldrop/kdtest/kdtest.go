// Package kdtest helps the tests of programs that use a kernel drop list.
//
// An interface takes one XDP program at a time, and the test binaries of
// several packages run at once: each test that attaches one to lo takes
// Lock first, a file lock that every such test in this repository shares
// (and coredns/e2e/kerneldrop.sh, with flock(1)), and holds it until the
// test binary exits.
package kdtest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

var lock struct {
	once sync.Once
	err  error
}

// Lock takes the lock on lo's XDP program for the rest of the test binary,
// waiting for another binary that holds it, or fails tb.
func Lock(tb testing.TB) {
	tb.Helper()
	lock.once.Do(func() {
		f, err := os.OpenFile(filepath.Join(os.TempDir(), "rrl-xdp-lo.lock"), os.O_CREATE|os.O_RDWR, 0o600)
		if err == nil {
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX) // f stays open, and the lock with it
		}
		lock.err = err
	})
	if lock.err != nil {
		tb.Fatalf("the lock on lo's XDP program: %v", lock.err)
	}
}

// NeedRoot skips tb unless the process runs as root (or with CAP_BPF and
// CAP_NET_ADMIN, which a root check cannot see, so such a process runs
// as root for these tests), then takes Lock.
func NeedRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("attaching XDP to lo needs root (or CAP_BPF and CAP_NET_ADMIN)")
	}
	Lock(tb)
}
