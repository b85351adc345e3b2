package replay_test

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"

	"github.com/dnsrrl/rrl/replay"
	"github.com/dnsrrl/rrl/replay/internal/capgen"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Every link type, pcap and pcapng, carrying the same mixed traffic (UDP
// and TCP, IPv4 and IPv6, a flood and a spray) replays to the counts the
// core decides for the same sequence.
func TestLinkTypes(t *testing.T) {
	ex := traffic(t, 8, 200, 0.3, 0.1)
	kv := []string{"responses-per-second=5", "nxdomains-per-second=2", "errors-per-second=1", "requests-per-second=40"}
	exp := decide(t, kv, ex, nil)
	if exp.categories["answer"].Slipped == 0 || exp.categories["answer"].Dropped == 0 || exp.requestsDropped == 0 {
		t.Fatalf("the traffic limits nothing: %+v", exp)
	}
	links := map[string]capgen.Link{
		"ethernet":        ethernet,
		"ethernet 802.1Q": {Type: layers.LinkTypeEthernet, VLAN: []uint16{10}},
		"ethernet QinQ":   {Type: layers.LinkTypeEthernet, VLAN: []uint16{10, 20}},
		"linux SLL":       {Type: layers.LinkTypeLinuxSLL},
		"linux SLL2":      {Type: layers.LinkTypeLinuxSLL2},
		"null":            {Type: layers.LinkTypeNull},
		"loop":            {Type: layers.LinkTypeLoop},
		"raw":             {Type: layers.LinkTypeRaw},
	}
	for name, link := range links {
		for _, ng := range []bool{false, true} {
			t.Run(name+map[bool]string{false: " pcap", true: " pcapng"}[ng], func(t *testing.T) {
				rep := replayBytes(t, replay.Options{Settings: settings(t, kv...)}, pcapOf(t, link, ng, ex))
				checkCounts(t, rep, exp)
				if len(rep.Skipped) != 0 {
					t.Errorf("skipped %v", rep.Skipped)
				}
				if rep.Queries != int64(len(ex)) {
					t.Errorf("queries %d, want %d", rep.Queries, len(ex))
				}
			})
		}
	}
}

// The IPv4 and IPv6 link types take only their own version.
func TestLinkTypeIPv4IPv6(t *testing.T) {
	var v4, v6 []capgen.Exchange
	for _, e := range traffic(t, 4, 100, 0, 0) {
		if e.Client.Addr().Is4() {
			v4 = append(v4, e)
		} else {
			v6 = append(v6, e)
		}
	}
	if len(v4) == 0 || len(v6) == 0 {
		t.Fatal("the traffic lacks a version")
	}
	kv := []string{"responses-per-second=1"}
	for _, c := range []struct {
		link layers.LinkType
		ex   []capgen.Exchange
	}{{layers.LinkTypeIPv4, v4}, {layers.LinkTypeIPv6, v6}} {
		rep := replayBytes(t, replay.Options{Settings: settings(t, kv...)}, pcapOf(t, capgen.Link{Type: c.link}, false, c.ex))
		checkCounts(t, rep, decide(t, kv, c.ex, nil))
	}
}

// A server on another port than 53 is found when the option names its
// port; without it, none of its packets is taken for DNS.
func TestServerPort(t *testing.T) {
	ex := traffic(t, 6, 100, 0.3, 0)
	for i := range ex {
		ex[i].Server = netip.AddrPortFrom(ex[i].Server.Addr(), 5353)
		if ex[i].Client.Port() == 53 {
			ex[i].Client = netip.AddrPortFrom(ex[i].Client.Addr(), 5300)
		}
	}
	capture := pcapOf(t, ethernet, false, ex)
	kv := []string{"responses-per-second=5", "requests-per-second=40"}
	rep := replayBytes(t, replay.Options{Settings: settings(t, kv...), ServerPort: 5353}, capture)
	checkCounts(t, rep, decide(t, kv, ex, nil))
	if rep.Responses == 0 || rep.Slipped+rep.Dropped == 0 || len(rep.Skipped) != 0 {
		t.Errorf("server port 5353: %d responses, %d slipped, %d dropped, skipped %v", rep.Responses, rep.Slipped, rep.Dropped, rep.Skipped)
	}
	rep = replayBytes(t, replay.Options{Settings: settings(t, kv...)}, capture)
	if rep.Queries != 0 || rep.Responses != 0 || rep.Skipped[replay.SkipNotDNSPort] == 0 {
		t.Errorf("default port 53: %d queries, %d responses, skipped %v", rep.Queries, rep.Responses, rep.Skipped)
	}
}

// A pcapng whose interfaces have different link types (tcpdump -i any on
// some systems, or a merge of captures): each packet is read with its own
// interface's link type.
func TestPcapngInterfaces(t *testing.T) {
	ex := traffic(t, 6, 200, 0.3, 0.1)
	kv := []string{"responses-per-second=5", "nxdomains-per-second=2"}
	// Even exchanges on an Ethernet interface, odd ones on a raw IP one.
	var parts [2][]capgen.Exchange
	for i, e := range ex {
		parts[i%2] = append(parts[i%2], e)
	}
	type frame struct {
		ci   gopacket.CaptureInfo
		data []byte
	}
	var frames []frame
	for i, link := range []capgen.Link{ethernet, {Type: layers.LinkTypeRaw}} {
		r, err := pcapgo.NewNgReader(bytes.NewReader(pcapOf(t, link, true, parts[i])), pcapgo.DefaultNgReaderOptions)
		if err != nil {
			t.Fatal(err)
		}
		for {
			data, ci, err := r.ReadPacketData()
			if err != nil {
				break
			}
			ci.InterfaceIndex = i
			frames = append(frames, frame{ci, data})
		}
	}
	slices.SortStableFunc(frames, func(a, b frame) int { return a.ci.Timestamp.Compare(b.ci.Timestamp) })
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriterInterface(&buf, pcapgo.NgInterface{Name: "eth0", LinkType: layers.LinkTypeEthernet, SnapLength: 65536}, pcapgo.DefaultNgWriterOptions)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddInterface(pcapgo.NgInterface{Name: "tun0", LinkType: layers.LinkTypeRaw, SnapLength: 65536}); err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		if err := w.WritePacket(f.ci, f.data); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	rep := replayBytes(t, replay.Options{Settings: settings(t, kv...)}, buf.Bytes())
	checkCounts(t, rep, decide(t, kv, ex, nil))
	if len(rep.Skipped) != 0 || rep.Queries != int64(len(ex)) {
		t.Errorf("%d queries, %d packets of %d, skipped %v", rep.Queries, rep.Packets, len(frames), rep.Skipped)
	}
}

// TestPcapngSections: a pcapng file of two sections (two captures joined,
// as cat makes them), each with its own interface 0 of another link type,
// replays whole: each packet is read with its own section's link type.
func TestPcapngSections(t *testing.T) {
	ex := traffic(t, 6, 200, 0.3, 0.1)
	kv := []string{"responses-per-second=5", "nxdomains-per-second=2"}
	half := len(ex) / 2
	joined := append(pcapOf(t, ethernet, true, ex[:half]), pcapOf(t, capgen.Link{Type: layers.LinkTypeRaw}, true, ex[half:])...)
	rep := replayBytes(t, replay.Options{Settings: settings(t, kv...)}, joined)
	checkCounts(t, rep, decide(t, kv, ex, nil))
	if len(rep.Skipped) != 0 || rep.Queries != int64(len(ex)) {
		t.Errorf("%d queries of %d, skipped %v", rep.Queries, len(ex), rep.Skipped)
	}
}
