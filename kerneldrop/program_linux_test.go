package kerneldrop

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// TestProgramPackets runs the program on crafted packets (BPF_PROG_TEST_RUN,
// which presents them as received on lo): every shape it must drop or
// pass, without sending anything.
func TestProgramPackets(t *testing.T) {
	prog, ms := loadProgram(t)
	listeners, blocked, counters := ms[0], ms[1], ms[2]

	const group, lo = 3, 1 // BPF_PROG_TEST_RUN's packets come in on lo
	listen := func(ap string) {
		for _, k := range listenerKeys(netip.MustParseAddrPort(ap), lo) {
			if err := listeners.Update(k[:], uint32(group), ebpf.UpdateAny); err != nil {
				t.Fatal(err)
			}
		}
	}
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	list := func(p string, d time.Duration) {
		k := blockedKey(group, netip.MustParsePrefix(p))
		if err := blocked.Update(k[:], uint64(ts.Nano()+int64(d)), ebpf.UpdateAny); err != nil {
			t.Fatal(err)
		}
	}
	listen("127.0.0.1:53")
	listen("[::1]:53")
	listen("[::]:853")
	list("10.1.2.0/24", time.Hour)
	list("10.9.9.0/24", -time.Second) // expired
	list("2001:db8::/56", time.Hour)
	list("0.0.0.0/0", time.Hour) // under another group: never seen
	k := blockedKey(group+1, netip.MustParsePrefix("0.0.0.0/0"))
	blocked.Update(k[:], uint64(ts.Nano()+int64(time.Hour)), ebpf.UpdateAny)
	blocked.Delete(blockedKey(group, netip.MustParsePrefix("0.0.0.0/0")))

	type pkt struct {
		name string
		data []byte
		drop bool
	}
	v4 := func(src, dst string, proto byte, ihl int, frag uint16, dport uint16) []byte {
		b := make([]byte, 14+ihl*4+8+12)
		binary.BigEndian.PutUint16(b[12:], 0x0800)
		ip := b[14:]
		ip[0] = 0x40 | byte(ihl)
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
		binary.BigEndian.PutUint16(ip[6:], frag)
		ip[8], ip[9] = 64, proto
		s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		if ihl >= 5 {
			udp := ip[ihl*4:]
			binary.BigEndian.PutUint16(udp[0:], 40000)
			binary.BigEndian.PutUint16(udp[2:], dport)
			binary.BigEndian.PutUint16(udp[4:], 20)
		}
		return b
	}
	v6 := func(src, dst string, next byte, dport uint16) []byte {
		b := make([]byte, 14+40+8+12)
		binary.BigEndian.PutUint16(b[12:], 0x86dd)
		ip := b[14:]
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], 20)
		ip[6], ip[7] = next, 64
		s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
		copy(ip[8:], s[:])
		copy(ip[24:], d[:])
		binary.BigEndian.PutUint16(ip[40:], 40000)
		binary.BigEndian.PutUint16(ip[42:], dport)
		return b
	}
	const udp, tcp = 17, 6
	pkts := []pkt{
		{"IPv4 UDP from a listed network", v4("10.1.2.3", "127.0.0.1", udp, 5, 0, 53), true},
		{"IPv4 UDP with options", v4("10.1.2.3", "127.0.0.1", udp, 15, 0, 53), true},
		{"IPv4 UDP, first fragment", v4("10.1.2.3", "127.0.0.1", udp, 5, 0x2000, 53), true},
		{"IPv4 UDP, DF set", v4("10.1.2.3", "127.0.0.1", udp, 5, 0x4000, 53), true},
		{"IPv4 UDP, later fragment", v4("10.1.2.3", "127.0.0.1", udp, 5, 0x2000|185, 53), false},
		{"IPv4 UDP, last fragment", v4("10.1.2.3", "127.0.0.1", udp, 5, 1, 53), false},
		{"IPv4 UDP from another network", v4("10.1.3.3", "127.0.0.1", udp, 5, 0, 53), false},
		{"IPv4 UDP from an expired network", v4("10.9.9.9", "127.0.0.1", udp, 5, 0, 53), false},
		{"IPv4 TCP", v4("10.1.2.3", "127.0.0.1", tcp, 5, 0, 53), false},
		{"IPv4 UDP to another port", v4("10.1.2.3", "127.0.0.1", udp, 5, 0, 54), false},
		{"IPv4 UDP to another address", v4("10.1.2.3", "127.0.0.2", udp, 5, 0, 53), false},
		{"IPv4 UDP to [::] (dual stack)", v4("10.1.2.3", "127.0.0.2", udp, 5, 0, 853), true},
		{"IPv4, IHL 4", v4("10.1.2.3", "127.0.0.1", udp, 4, 0, 53), false},
		{"IPv4, truncated UDP", v4("10.1.2.3", "127.0.0.1", udp, 5, 0, 53)[:14+20+7], false},
		// IHL 15 cut after 20 bytes of header and 8 more: the UDP header
		// after the options lies past the end.
		{"IPv4, options past the end", v4("10.1.2.3", "127.0.0.1", udp, 15, 0, 53)[:14+20+8], false},
		{"IPv4, truncated header", v4("10.1.2.3", "127.0.0.1", udp, 5, 0, 53)[:14+19], false},
		{"IPv6 UDP from a listed network", v6("2001:db8:0:ff::1", "::1", udp, 53), true},
		{"IPv6 UDP to [::]", v6("2001:db8::1", "2001:db8:1::1", udp, 853), true},
		{"IPv6 UDP from another network", v6("2001:db8:0:100::1", "::1", udp, 53), false},
		{"IPv6 TCP", v6("2001:db8::1", "::1", tcp, 53), false},
		{"IPv6 hop-by-hop then UDP", v6("2001:db8::1", "::1", 0, 53), false},
		{"IPv6 fragment header", v6("2001:db8::1", "::1", 44, 53), false},
		{"IPv6, truncated UDP", v6("2001:db8::1", "::1", udp, 53)[:14+40+7], false},
		{"IPv4-mapped IPv6 source", v6("::ffff:10.1.2.3", "::1", udp, 53), false},
		{"ARP", append(make([]byte, 12), 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1), false},
		{"Ethernet header only", append(make([]byte, 12), 0x08, 0x00), false},
	}

	var wantV4, wantV6 uint64
	for _, p := range pkts {
		ret, err := prog.Run(&ebpf.RunOptions{Data: p.data})
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		want := uint32(xdpPass)
		if p.drop {
			want = xdpDrop
			if p.data[12] == 0x08 {
				wantV4++
			} else {
				wantV6++
			}
		}
		if ret != want {
			t.Errorf("%s: XDP action %d, want %d", p.name, ret, want)
		}
	}
	v4n, v6n, err := sumCounters(counters, group)
	if err != nil || v4n != wantV4 || v6n != wantV6 {
		t.Errorf("counted IPv4 %d, IPv6 %d (%v); want %d, %d", v4n, v6n, err, wantV4, wantV6)
	}
}
