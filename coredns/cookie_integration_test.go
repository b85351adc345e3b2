package rrl_test

import (
	"encoding/hex"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/dnsrrl/rrl/miekgrrl"
)

// digCookie asks the integration server for www.example.test from src with
// dig, sending cookie (+cookie alone when it is ""), and returns the COOKIE
// option of the answer as dig prints it, with dig's verdict on it ("good"
// when the client cookie came back as sent).
func digCookie(t *testing.T, src, cookie string) (got, verdict string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(server.addr)
	flag := "+cookie"
	if cookie != "" {
		flag += "=" + cookie
	}
	out, err := exec.Command("dig", "-b", src, "-p", port, "@"+host, flag, "+tries=1", "+time=2",
		"+nobadcookie", "www.example.test", "A").CombinedOutput()
	if err != nil {
		t.Fatalf("dig: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`; COOKIE: ([0-9a-f]+) \((\w+)\)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("no COOKIE in dig's answer:\n%s", out)
	}
	return m[1], m[2]
}

// TestIntegrationDigCookie: a real client's cookies through CoreDNS. dig
// gets a server cookie for its client cookie; presenting a server cookie
// under half an hour old, it gets that cookie back as it sent it (RFC 9018
// section 4.3), and presenting one over half an hour old, a fresh one.
func TestIntegrationDigCookie(t *testing.T) {
	if _, err := exec.LookPath("dig"); err != nil {
		t.Skip("dig not installed")
	}
	startServer(t)
	const src = "127.0.12.1"
	first, verdict := digCookie(t, src, "")
	if len(first) != 48 || verdict != "good" {
		t.Fatalf("first answer's cookie %s (%s), want dig's client cookie and a 16-byte server cookie", first, verdict)
	}
	// The server's clock is the system's: cookies of a known age are made
	// with the block's secret (corefileTemplate) for dig's client cookie.
	secret, _ := miekgrrl.ParseSecret("00112233445566778899aabbccddeeff")
	cc, _ := hex.DecodeString(first[:16])
	made := func(age time.Duration) string {
		s := miekgrrl.NewCookies(secret).ServerCookie(cc, netip.MustParseAddr(src), time.Now().Add(-age))
		return first[:16] + hex.EncodeToString(s[:])
	}
	young := made(10 * time.Minute)
	if got, verdict := digCookie(t, src, young); got != young || verdict != "good" {
		t.Errorf("10-minute-old cookie: answer's cookie %s (%s), want it sent back as it came", got, verdict)
	}
	old := made(40 * time.Minute)
	if got, verdict := digCookie(t, src, old); got == old || got[:16] != first[:16] || len(got) != 48 || verdict != "good" {
		t.Errorf("40-minute-old cookie %s: answer's cookie %s (%s), want a fresh one", old, got, verdict)
	}
}
