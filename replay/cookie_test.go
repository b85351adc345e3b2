package replay_test

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/dnsrrl/rrl/miekgrrl"
	"github.com/dnsrrl/rrl/replay"
	"github.com/dnsrrl/rrl/replay/internal/capgen"
	"github.com/miekg/dns"
)

// cookieTraffic is 100 queries a second for 3 seconds from one client:
// the first half with a client cookie alone, the others with the server
// cookie that secret makes.
func cookieTraffic(t *testing.T, secret [16]byte) []capgen.Exchange {
	t.Helper()
	ck := miekgrrl.NewCookies(secret)
	client := addrPort("198.51.100.7:5300")
	cc := []byte("clientck")
	var ex []capgen.Exchange
	for i := 0; i < 300; i++ {
		at := start.Add(time.Duration(i) * 10 * time.Millisecond)
		cookie := hex.EncodeToString(cc)
		if i%2 == 1 {
			sc := ck.ServerCookie(cc, client.Addr(), at)
			cookie += hex.EncodeToString(sc[:])
		}
		q := capgen.Query(uint16(i), "www.example.org.", dns.TypeA, cookie)
		ex = append(ex, capgen.Exchange{At: at, Client: client, Server: capgen.Server, Query: q, Response: capgen.Response(q, capgen.Answer, "example.org.")})
	}
	return ex
}

func TestCookies(t *testing.T) {
	secret := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	other := [16]byte{9, 9, 9}
	ex := cookieTraffic(t, secret)
	capture := pcapOf(t, ethernet, false, ex)
	kv := []string{"responses-per-second=2", "requests-per-second=80"}
	withServerCookie := func(e *capgen.Exchange) bool { return e.Query[1]%2 == 1 }
	cases := []struct {
		name    string
		secrets [][16]byte
		valid   func(*capgen.Exchange) bool
		assumed bool
	}{
		{"no secret: server cookies assumed valid", nil, withServerCookie, true},
		{"the secret: server cookies valid", [][16]byte{secret}, withServerCookie, false},
		{"the secret as the previous one", [][16]byte{other, secret}, withServerCookie, false},
		{"another secret: no cookie valid", [][16]byte{other}, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := replayBytes(t, replay.Options{Settings: settings(t, kv...), CookieSecrets: c.secrets}, capture)
			exp := decide(t, kv, ex, c.valid)
			checkCounts(t, rep, exp)
			if c.valid != nil && rep.CookieExempt != 150 {
				t.Errorf("cookie exempt %d, want 150", rep.CookieExempt)
			}
			if got := rep.Cookies == "server cookies assumed valid (no cookie secret given)"; got != c.assumed {
				t.Errorf("the report says %q", rep.Cookies)
			}
		})
	}
}
