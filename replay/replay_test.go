package replay_test

import (
	"testing"

	"github.com/dnsrrl/rrl/replay"
	"github.com/dnsrrl/rrl/replay/internal/capgen"
	"github.com/gopacket/gopacket/layers"
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
