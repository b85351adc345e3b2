// Package capgen writes packet captures of DNS traffic for the tests,
// the benchmark and the sample capture of package replay: UDP and TCP over
// IPv4 and IPv6, framed in any of the link types the replay reads, in pcap
// or pcapng. IP, UDP and TCP headers are serialised by gopacket's layers.
package capgen

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Link is how packets are framed: a link type, and for Ethernet the VLAN
// tags to put before the IP header.
type Link struct {
	Type layers.LinkType
	VLAN []uint16
}

// Writer writes packets to a pcap or pcapng file.
type Writer struct {
	link   Link
	pcap   *pcapgo.Writer
	ng     *pcapgo.NgWriter
	buf    gopacket.SerializeBuffer
	ipID   uint16
	Snap   int // if > 0, packets are cut to this many bytes, as by a snap length
	frames int
}

// NewWriter starts a capture in w: pcapng if ng, else pcap (nanosecond
// timestamps).
func NewWriter(w io.Writer, link Link, ng bool) (*Writer, error) {
	cw := &Writer{link: link, buf: gopacket.NewSerializeBuffer()}
	if ng {
		n, err := pcapgo.NewNgWriter(w, link.Type)
		if err != nil {
			return nil, err
		}
		cw.ng = n
		return cw, nil
	}
	cw.pcap = pcapgo.NewWriterNanos(w)
	return cw, cw.pcap.WriteFileHeader(65536, link.Type)
}

// Flush writes out what a pcapng writer buffers.
func (w *Writer) Flush() error {
	if w.ng != nil {
		return w.ng.Flush()
	}
	return nil
}

// UDP writes one UDP datagram from src to dst.
func (w *Writer) UDP(at time.Time, src, dst netip.AddrPort, payload []byte) error {
	udp := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
	return w.packet(at, src.Addr(), dst.Addr(), layers.IPProtocolUDP, udp, payload)
}

// TCP flags for Writer.TCP.
const (
	FIN = 1 << iota
	SYN
	RST
	PSH
	ACK
)

// TCP writes one TCP segment from src to dst.
func (w *Writer) TCP(at time.Time, src, dst netip.AddrPort, seq uint32, flags int, payload []byte) error {
	tcp := &layers.TCP{SrcPort: layers.TCPPort(src.Port()), DstPort: layers.TCPPort(dst.Port()), Seq: seq, Window: 65535,
		FIN: flags&FIN != 0, SYN: flags&SYN != 0, RST: flags&RST != 0, PSH: flags&PSH != 0, ACK: flags&ACK != 0}
	return w.packet(at, src.Addr(), dst.Addr(), layers.IPProtocolTCP, tcp, payload)
}

type transportLayer interface {
	gopacket.SerializableLayer
	SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
}

func (w *Writer) packet(at time.Time, src, dst netip.Addr, proto layers.IPProtocol, tl transportLayer, payload []byte) error {
	var ip gopacket.SerializableLayer
	if src.Is4() {
		w.ipID++
		ip4 := &layers.IPv4{Version: 4, TTL: 64, Id: w.ipID, Protocol: proto, SrcIP: net.IP(src.AsSlice()), DstIP: net.IP(dst.AsSlice())}
		tl.SetNetworkLayerForChecksum(ip4)
		ip = ip4
	} else {
		ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: proto, SrcIP: net.IP(src.AsSlice()), DstIP: net.IP(dst.AsSlice())}
		tl.SetNetworkLayerForChecksum(ip6)
		ip = ip6
	}
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(w.buf, opts, ip, tl, gopacket.Payload(payload)); err != nil {
		return err
	}
	frame, err := w.frame(w.buf.Bytes(), src.Is4())
	if err != nil {
		return err
	}
	return w.Frame(at, frame)
}

// Frame writes a frame as it is, cut to Snap bytes if that is set.
func (w *Writer) Frame(at time.Time, frame []byte) error {
	ci := gopacket.CaptureInfo{Timestamp: at, CaptureLength: len(frame), Length: len(frame)}
	if w.Snap > 0 && len(frame) > w.Snap {
		frame, ci.CaptureLength = frame[:w.Snap], w.Snap
	}
	w.frames++
	if w.ng != nil {
		return w.ng.WritePacket(ci, frame)
	}
	return w.pcap.WritePacket(ci, frame)
}

// frame puts the link layer's header before an IP packet.
func (w *Writer) frame(ip []byte, v4 bool) ([]byte, error) {
	etherType := uint16(layers.EthernetTypeIPv6)
	if v4 {
		etherType = uint16(layers.EthernetTypeIPv4)
	}
	var h []byte
	switch w.link.Type {
	case layers.LinkTypeEthernet:
		h = []byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2}
		for _, id := range w.link.VLAN {
			h = binary.BigEndian.AppendUint16(h, uint16(layers.EthernetTypeDot1Q))
			h = binary.BigEndian.AppendUint16(h, id&0x0fff)
		}
		h = binary.BigEndian.AppendUint16(h, etherType)
	case layers.LinkTypeLinuxSLL:
		// packet type (0: to us), ARPHRD_ETHER, address length, address, protocol
		h = []byte{0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0}
		h = binary.BigEndian.AppendUint16(h, etherType)
	case layers.LinkTypeLinuxSLL2:
		// protocol, reserved, interface index, ARPHRD_ETHER, packet type, address length, address
		h = binary.BigEndian.AppendUint16(nil, etherType)
		h = append(h, 0, 0, 0, 0, 0, 1, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0)
	case layers.LinkTypeNull:
		af := uint32(2) // AF_INET; AF_INET6 is 24, 28 or 30 by system
		if !v4 {
			af = 30
		}
		h = binary.LittleEndian.AppendUint32(nil, af)
	case layers.LinkTypeLoop:
		af := uint32(2)
		if !v4 {
			af = 24
		}
		h = binary.BigEndian.AppendUint32(nil, af)
	case layers.LinkTypeRaw, layers.LinkTypeIPv4, layers.LinkTypeIPv6:
	default:
		return nil, fmt.Errorf("capgen: link type %v not supported", w.link.Type)
	}
	return append(h, ip...), nil
}

// UDPFragments writes a UDP datagram from src to dst as IP fragments of at
// most mtu bytes of IP payload each (rounded down to 8), last fragment
// first when reverse is set.
func (w *Writer) UDPFragments(at time.Time, src, dst netip.AddrPort, payload []byte, mtu int, reverse bool) error {
	// The UDP header and payload as they would go unfragmented, checksum included.
	udp := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
	var ip gopacket.NetworkLayer
	if src.Addr().Is4() {
		ip = &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IP(src.Addr().AsSlice()), DstIP: net.IP(dst.Addr().AsSlice())}
	} else {
		ip = &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: net.IP(src.Addr().AsSlice()), DstIP: net.IP(dst.Addr().AsSlice())}
	}
	udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, udp, gopacket.Payload(payload)); err != nil {
		return err
	}
	data := buf.Bytes()
	chunk := mtu &^ 7
	var frames [][]byte
	w.ipID++
	for off := 0; off < len(data); off += chunk {
		end := min(off+chunk, len(data))
		more := end < len(data)
		var layersOut []gopacket.SerializableLayer
		if v4, ok := ip.(*layers.IPv4); ok {
			f := *v4
			f.Id, f.FragOffset = w.ipID, uint16(off/8)
			if more {
				f.Flags = layers.IPv4MoreFragments
			}
			layersOut = []gopacket.SerializableLayer{&f}
		} else {
			f := *ip.(*layers.IPv6)
			f.NextHeader = layers.IPProtocolIPv6Fragment
			layersOut = []gopacket.SerializableLayer{&f, &layers.IPv6Fragment{NextHeader: layers.IPProtocolUDP,
				FragmentOffset: uint16(off / 8), MoreFragments: more, Identification: uint32(w.ipID)}}
		}
		fb := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(fb, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, append(layersOut, gopacket.Payload(data[off:end]))...); err != nil {
			return err
		}
		frame, err := w.frame(fb.Bytes(), src.Addr().Is4())
		if err != nil {
			return err
		}
		frames = append(frames, frame)
	}
	if reverse {
		slices.Reverse(frames)
	}
	for _, f := range frames {
		if err := w.Frame(at, f); err != nil {
			return err
		}
	}
	return nil
}
