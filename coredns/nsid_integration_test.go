package rrl_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"

	_ "github.com/coredns/coredns/plugin/nsid"
)

// The byte limits judge what leaves the server: the OPT record that
// CoreDNS's writer adds below every plugin, and the option that the nsid
// plugin adds above rrl, after rrl has decided.

// nsidZone writes a zone file for nsid.test. with a TXT record at sN for
// each N in sizes, whose answer is N bytes long to a query with EDNS and
// no option (the OPT record included); it returns the file's path.
func nsidZone(t *testing.T, sizes []int) string {
	t.Helper()
	var zone strings.Builder
	zone.WriteString("$ORIGIN nsid.test.\n@ 3600 IN SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ 3600 IN NS ns1\nns1 3600 IN A 127.0.0.1\n")
	for _, size := range sizes {
		name := "s" + strconv.Itoa(size) + ".nsid.test."
		q := new(dns.Msg).SetQuestion(name, dns.TypeTXT)
		m := new(dns.Msg).SetReply(q)
		m.SetEdns0(1232, false)
		txt := &dns.TXT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 300}}
		m.Answer = []dns.RR{txt}
		for m.Len() < size {
			if n := len(txt.Txt); n > 0 && len(txt.Txt[n-1]) < 255 {
				txt.Txt[n-1] += strings.Repeat("x", min(size-m.Len(), 255-len(txt.Txt[n-1])))
				continue
			}
			txt.Txt = append(txt.Txt, "")
		}
		if m.Len() != size {
			t.Fatalf("an answer of %d bytes came to %d", size, m.Len())
		}
		zone.WriteString(txt.String() + "\n")
	}
	f := filepath.Join(t.TempDir(), "db.nsid.test")
	if err := os.WriteFile(f, []byte(zone.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// nsidServer starts CoreDNS with one block for nsid.test.: nsid with an
// identifier of idLen bytes, rrl with the given lines, file with sizes.
func nsidServer(t *testing.T, idLen int, lines string, sizes []int) string {
	t.Helper()
	p := freePort(t, "udp")
	startCorefile(t, fmt.Sprintf(`nsid.test.:%d {
    bind 127.0.0.1
    nsid %s
    rrl {
        %s
        cookie-secret 00112233445566778899aabbccddeeff
    }
    file %s nsid.test.
}
`, p, strings.Repeat("i", idLen), lines, nsidZone(t, sizes)))
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
}

// nsidQuery asks for name's TXT with EDNS (a 1232-byte buffer), the NSID
// option and, unless cookie is "", a COOKIE option.
func nsidQuery(name, cookie string) *dns.Msg {
	m := txtQuery(name, cookie)
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})
	return m
}

// TestIntegrationNoCookieUDPSizeWithNSID: with nocookie-udp-size 512 and
// a 200-byte NSID, answers of every size from 380 to 530 bytes reach an
// unproven UDP client at 512 bytes or less, with TC set on those cut;
// with a client cookie too, whose server cookie adds 28 bytes more. Asked
// without the NSID option, the shorter answers go whole.
func TestIntegrationNoCookieUDPSizeWithNSID(t *testing.T) {
	sizes := make([]int, 0, 151)
	for size := 380; size <= 530; size++ {
		sizes = append(sizes, size)
	}
	addr := nsidServer(t, 200, "nocookie-udp-size 512", sizes)
	for _, nsid := range []bool{false, true} {
		for _, cookie := range []string{"", "a1b2c3d4e5f60718"} {
			whole, cut := 0, 0
			for _, size := range sizes {
				q := txtQuery("s"+strconv.Itoa(size)+".nsid.test.", cookie)
				if nsid {
					q = nsidQuery(q.Question[0].Name, cookie)
				}
				m, n := exchangeUDP(t, "127.68.0.1", addr, q)
				switch {
				case n > 512:
					t.Fatalf("NSID %v, cookie %q: the %d-byte answer went out as %d bytes, TC %v: over nocookie-udp-size", nsid, cookie, size, n, m.Truncated)
				case nsid && nsidOf(m) == "":
					t.Fatalf("the reply to a %d-byte answer has no NSID: the test shows nothing", size)
				case m.Truncated:
					cut++
				default:
					whole++
				}
			}
			t.Logf("NSID %v, cookie %q: %d whole, %d truncated", nsid, cookie, whole, cut)
			if cut == 0 || (!nsid && whole == 0) {
				t.Errorf("NSID %v, cookie %q: %d whole and %d truncated replies; want some truncated, and without NSID some whole", nsid, cookie, whole, cut)
			}
		}
	}
}

// nsidOf returns the NSID option's data in m, hex-encoded, or "".
func nsidOf(m *dns.Msg) string {
	if o := m.IsEdns0(); o != nil {
		for _, e := range o.Option {
			if n, ok := e.(*dns.EDNS0_NSID); ok {
				return n.Nsid
			}
		}
	}
	return ""
}

// TestIntegrationAllBytesPerSecondWithNSID: under all-bytes-per-second
// 3000, a burst over 60 names of 300-byte answers, each of which the nsid
// plugin makes 300 bytes longer, delivers the budget plus one answer (and
// what accrues while the burst lasts), counted as the client received it.
func TestIntegrationAllBytesPerSecondWithNSID(t *testing.T) {
	sizes := make([]int, 60)
	for i := range sizes {
		sizes[i] = 300 + i // 60 names, each with its own response account
	}
	addr := nsidServer(t, 300, "all-bytes-per-second "+strconv.Itoa(bytesBudget), sizes)
	queries := make([]*dns.Msg, len(sizes))
	for i, size := range sizes {
		queries[i] = nsidQuery("s"+strconv.Itoa(size)+".nsid.test.", "")
	}
	b := burstBytes(t, "127.69.0.1", addr, queries, func(m *dns.Msg) bool { return len(m.Answer) == 1 && nsidOf(m) != "" })
	t.Logf("60 names: %d answers, %d bytes (the largest %d) in %v", b.got, b.bytes, b.largest, b.elapsed)
	if limit := b.limit(); b.got == 0 || b.largest < 600 || b.bytes > limit {
		t.Errorf("60 names of about 600 bytes on the wire: %d answers, %d bytes; want at most %d", b.got, b.bytes, limit)
	}
}

// TestIntegrationNoCookieUDPSizeReportOnly: in report-only mode
// nocookie-udp-size cuts nothing: a 530-byte answer with a 200-byte NSID
// goes whole, as it would without rrl.
func TestIntegrationNoCookieUDPSizeReportOnly(t *testing.T) {
	addr := nsidServer(t, 200, "nocookie-udp-size 512\n        report-only", []int{530})
	m, n := exchangeUDP(t, "127.70.0.1", addr, nsidQuery("s530.nsid.test.", ""))
	if m.Truncated || len(m.Answer) != 1 || n < 730 {
		t.Errorf("report-only: %d bytes, TC %v, %d answers; want the whole answer with its NSID", n, m.Truncated, len(m.Answer))
	}
}
