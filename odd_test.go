package rrl

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// nilStringer is a net.Addr whose methods panic on a nil receiver.
type nilStringer struct{ s *string }

func (a *nilStringer) Network() string { return "udp" }
func (a *nilStringer) String() string  { return *a.s }

// TestOddInputs checks the documented outcome for input that is not what a
// server normally passes: nothing panics, odd sources share the 0.0.0.0
// network's account, and odd tuples are accounted as errors.
func TestOddInputs(t *testing.T) {
	var typedNilUDP *net.UDPAddr
	var typedNilTCP *net.TCPAddr
	var typedNilOther *nilStringer
	oddSources := []net.Addr{
		nil,
		typedNilUDP,
		typedNilOther,
		&net.UDPAddr{},                    // no IP
		&net.UDPAddr{IP: net.IP{1, 2, 3}}, // three bytes
		otherAddr{"udp", "not an address"},
		otherAddr{"tcp", "not an address"}, // unparsable, so not known to be TCP
		otherAddr{"", ""},
		&net.TCPAddr{}, // no IP
		typedNilTCP,
		udp("0.0.0.0"),
	}
	r := newTestRRL(t, newTestClock(), "responses-per-second", "1", "slip-ratio", "0")
	a := answer("www.example.")
	for i, src := range oddSources {
		act, _, rtr := r.Debit(src, a)
		want := Drop // all share the account of 0.0.0.0/24, over UDP
		if i == 0 {
			want = Send
		}
		if act != want || (i > 0 && rtr != RTRateLimit) {
			t.Errorf("source %d (%#v): %v %v, want %v as part of 0.0.0.0/24 over UDP", i, src, act, rtr, want)
		}
	}
	if act, _, _ := r.DebitAddr(netip.Addr{}, true, a); act != Drop {
		t.Errorf("zero netip.Addr: %v, want Drop as part of 0.0.0.0/24", act)
	}

	// A nil tuple and an out-of-range category are errors.
	r = newTestRRL(t, newTestClock(), "errors-per-second", "1", "slip-ratio", "1")
	src := udp("192.0.2.1")
	if got := actions(r, src, nil, 1) + actions(r, src, &ResponseTuple{AllowanceCategory: 99, SalientName: "x."}, 1); got != "SD" {
		t.Errorf("nil tuple then category 99: %s, want one error account (SD)", got)
	}
	if s := r.GetStats(false); s.RPS[AllowanceError] != 2 {
		t.Errorf("odd tuples counted as %v, want errors", s.RPS)
	}

	// Empty and huge names.
	r = newTestRRL(t, newTestClock(), "responses-per-second", "1")
	for _, name := range []string{"", ".", "..", strings.Repeat("x", 64<<10), strings.Repeat("\xff", 70000)} {
		if act, _, _ := r.Debit(src, answer(name)); act == Drop {
			t.Errorf("first response for a %d-byte name dropped", len(name))
		}
	}

	// A nil RRL limits nothing, and so does NewRRL(nil).
	var nilRRL *RRL
	if act, _, _ := nilRRL.Debit(src, a); act != Send {
		t.Errorf("nil RRL: %v", act)
	}
	r = NewRRL(nil)
	if got := actions(r, src, a, 100); got != strings.Repeat("S", 100) {
		t.Errorf("NewRRL(nil): %s", got)
	}
}

// TestClockSteps checks that no step of an injected clock, a function's
// (SetNowFunc) or a ManualClock's (SetClock), locks a client out or
// overflows anything.
func TestClockSteps(t *testing.T) {
	t.Run("SetNowFunc", func(t *testing.T) {
		clock := newTestClock()
		c := testConfig(t, nil)
		c.SetNowFunc(clock.Now)
		clockSteps(t, c, clock.Set, clock.Now)
	})
	t.Run("SetClock", func(t *testing.T) {
		clock := NewManualClock(newTestClock().Now())
		c := testConfig(t, nil)
		c.SetClock(clock)
		clockSteps(t, c, clock.Set, clock.Now)
	})
}

// clockSteps runs TestClockSteps on the clock of c, which set moves and
// now reads.
func clockSteps(t *testing.T, c *Config, set func(time.Time), now func() time.Time) {
	for k, v := range map[string]string{"responses-per-second": "1", "window": "10", "slip-ratio": "0"} {
		if err := c.SetValue(k, v); err != nil {
			t.Fatal(err)
		}
	}
	r := NewRRL(c)
	src, a := udp("192.0.2.1"), answer("www.example.")
	debitN(r, src, a, 100) // deep in debt
	advance := func(d time.Duration) { set(now().Add(d)) }

	// The wall clock steps back a day: the RRL's time stands still at that
	// instant, then runs on at the clock's pace; nobody waits for a day.
	advance(-24 * time.Hour)
	if act, _, _ := r.Debit(src, a); act != Drop {
		t.Errorf("right after the step back: %v, want Drop (still in the penalty box)", act)
	}
	advance(12 * time.Second)
	if act, _, _ := r.Debit(src, a); act != Send {
		t.Errorf("a window after the step back: %v, want Send", act)
	}
	other := answer("other.example.")
	if act, _, _ := r.Debit(src, other); act != Send {
		t.Errorf("a fresh account after the step back: %v", act)
	}

	// A step far forward (to the year 9999, past int64 nanoseconds)
	// overflows nothing: accounts work on, and time keeps moving.
	set(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))
	if got := actions(r, src, a, 3); got != "SDD" {
		t.Errorf("after a step to 9999: %s, want SDD", got)
	}
	advance(11 * time.Second)
	if got := actions(r, src, a, 2); got != "SD" {
		t.Errorf("a window later: %s, want SD", got)
	}
}

func TestSource(t *testing.T) {
	var typedNil *net.UDPAddr
	for _, c := range []struct {
		src  net.Addr
		addr string
		udp  bool
	}{
		{udp("192.0.2.1"), "192.0.2.1", true},
		{tcp("2001:db8::1"), "2001:db8::1", false},
		{otherAddr{"tcp", "[2001:db8::2]:853"}, "2001:db8::2", false},
		{otherAddr{"udp4", "192.0.2.9"}, "192.0.2.9", true},
		{otherAddr{"tcp", "bogus"}, "invalid IP", true},
		{typedNil, "invalid IP", true},
		{nil, "invalid IP", true},
	} {
		addr, isUDP := Source(c.src)
		if addr.String() != c.addr || isUDP != c.udp {
			t.Errorf("Source(%#v) = %s, %v; want %s, %v", c.src, addr, isUDP, c.addr, c.udp)
		}
	}
}
