package rrl

import (
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsrrl/rrl/miekgrrl"
)

// TestSecretIsStable: blocks without cookie-secret, parsed apart as a reload
// or a neighbouring block would be, accept each other's server cookies; a
// block with its own cookie-secret does not.
func TestSecretIsStable(t *testing.T) {
	first, err := parseString("rrl {\n responses-per-second 5\n}")
	if err != nil {
		t.Fatal(err)
	}
	second, err := parseString("rrl {\n errors-per-second 5\n}")
	if err != nil {
		t.Fatal(err)
	}
	own, err := parseString("rrl {\n responses-per-second 5\n cookie-secret 000102030405060708090a0b0c0d0e0f\n}")
	if err != nil {
		t.Fatal(err)
	}
	if first.secret == ([16]byte{}) {
		t.Fatal("the generated cookie secret is all zeros")
	}
	client := netip.MustParseAddr("192.0.2.1")
	now := time.Unix(1700000000, 0)
	cc := []byte("clientck")
	sc := first.cookies.ServerCookie(cc, client, now)
	req := withCookie(query("www.example.org.", dns.TypeA), hex.EncodeToString(cc)+hex.EncodeToString(sc[:]))
	if got := second.cookies.Check(req, client, now); got != miekgrrl.CookieValid {
		t.Errorf("a server cookie of one block is %v in another block without cookie-secret, want valid", got)
	}
	if got := own.cookies.Check(req, client, now); got == miekgrrl.CookieValid {
		t.Error("a block with its own cookie-secret accepts the generated secret's cookies")
	}
}

// TestSecretRegistry: within one loading of the Corefile, a second block
// on a listener with another secret is reported with the first block's
// zones; the same secret, another listener, or the next loading is not.
func TestSecretRegistry(t *testing.T) {
	r := &secretRegistry{m: map[string]listenerSecret{}}
	a, b := [16]byte{1}, [16]byte{2}
	gen1, gen2 := new(int), new(int)
	if _, clash := r.check(gen1, "dns://:53", a, []string{"a.test."}); clash {
		t.Fatal("the first block clashes")
	}
	if _, clash := r.check(gen1, "dns://:53", a, []string{"b.test."}); clash {
		t.Error("the same secret clashes")
	}
	if _, clash := r.check(gen1, "dns://:5353", b, []string{"c.test."}); clash {
		t.Error("another listener clashes")
	}
	other, clash := r.check(gen1, "dns://:53", b, []string{"d.test."})
	if !clash || strings.Join(other, ",") != "a.test." {
		t.Errorf("another secret on the listener: clash %v with %v, want a clash with a.test.", clash, other)
	}
	if _, clash := r.check(gen2, "dns://:53", b, []string{"d.test."}); clash {
		t.Error("a block of the next loading clashes with the previous one")
	}
}
