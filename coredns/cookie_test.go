package rrl

import (
	"context"
	"encoding/hex"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsrrl/rrl/miekgrrl"
)

// madeCookie returns the whole cookie a client presents after h gave it a
// server cookie for the client cookie cc at issued: the plugin takes the time
// from the system clock, so a cookie of a known age is made with the block's
// secret.
func madeCookie(h *RRL, cc string, client string, issued time.Time) string {
	b, _ := hex.DecodeString(cc)
	s := h.cookies.ServerCookie(b, netip.MustParseAddr(client), issued)
	return cc + hex.EncodeToString(s[:])
}

// TestCookieResentWhileYoung: the plugin sends a valid server cookie under
// half an hour old back as it came, as the middleware does (RFC 9018
// section 4.3), and replaces an older one, or one made with the previous
// secret, by a fresh one.
func TestCookieResentWhileYoung(t *testing.T) {
	const block = "{\n responses-per-second 1\n slip-ratio 1\n cookie-secret 000102030405060708090a0b0c0d0e0f 0f0e0d0c0b0a09080706050403020100\n}"
	h := testHandler(t, block, zoneNext, newClock())
	const cc, ip = "0102030405060708", "127.0.1.1"
	previous := miekgrrl.NewCookies([16]byte{15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0})
	ps := previous.ServerCookie([]byte{1, 2, 3, 4, 5, 6, 7, 8}, netip.MustParseAddr(ip), time.Now().Add(-time.Minute))
	for _, tc := range []struct {
		name   string
		cookie string
		resend bool
	}{
		{"10 minutes old", madeCookie(h, cc, ip, time.Now().Add(-10*time.Minute)), true},
		{"29 minutes old", madeCookie(h, cc, ip, time.Now().Add(-29*time.Minute)), true},
		{"31 minutes old", madeCookie(h, cc, ip, time.Now().Add(-31*time.Minute)), false},
		{"previous secret", cc + hex.EncodeToString(ps[:]), false},
	} {
		o, m := ask(t, h, ip, false, withCookie(query("www.example.org.", dns.TypeA), tc.cookie))
		got := cookieOf(m)
		if o != sent {
			t.Fatalf("%s: %v, want sent (a valid cookie is exempt)", tc.name, o)
		}
		if tc.resend && got != tc.cookie {
			t.Errorf("%s: answer cookie %s, want %s sent back as it came", tc.name, got, tc.cookie)
		}
		if !tc.resend && (got == tc.cookie || len(got) != 48 || got[:16] != cc) {
			t.Errorf("%s: answer cookie %s, want a fresh one for %s", tc.name, got, cc)
		}
	}
}

// TestCookieAllocations: a request with a cookie costs one allocation more
// than one without, the copy of the reply that carries the server cookie:
// the option is decoded once into the recorder, and the reply is copied once.
func TestCookieAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not the program's under the race detector")
	}
	h := testHandler(t, "{\n responses-per-second 1000000\n}", trivialNext(), nil)
	ws := benchClients()
	ctx := context.Background()
	plain := query("www.example.org.", dns.TypeA)
	plain.SetEdns0(1232, false)
	const cc = "0102030405060708"
	young := make([]*dns.Msg, len(ws))
	for i, w := range ws {
		client, _ := netip.AddrFromSlice(w.addr.IP)
		young[i] = withCookie(query("www.example.org.", dns.TypeA), madeCookie(h, cc, client.Unmap().String(), time.Now()))
	}
	for name, rs := range map[string][]*dns.Msg{"client cookie": {withCookie(query("www.example.org.", dns.TypeA), cc)}, "young server cookie": young} {
		i := 0
		without := testing.AllocsPerRun(500, func() { h.ServeDNS(ctx, ws[i&255], plain); i++ })
		with := testing.AllocsPerRun(500, func() { h.ServeDNS(ctx, ws[i&255], rs[i%len(rs)]); i++ })
		if with-without > 1 {
			t.Errorf("%s: %.2f allocations per query, %.2f without a cookie; want at most one more", name, with, without)
		}
	}
}
