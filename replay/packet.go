package replay

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/gopacket/gopacket/layers"
)

// packetDecoder reduces captured frames to DNS messages: it strips the link
// layer (Ethernet with any number of VLAN tags, Linux cooked SLL and SLL2,
// BSD loopback, raw IP), reads IPv4 and IPv6 (with extension headers), and
// hands UDP payloads on directly and TCP segments to a stream reassembler.
// It decodes by hand rather than with gopacket's layers, which allocate per
// packet: replay speed is bounded by this loop.
type packetDecoder struct {
	serverPort uint16
	tcp        *reassembler
	frag       *defragmenter
	packets    int
	skip       func(reason string)
	emit       func(*Message)
	msg        Message
}

func newPacketDecoder(serverPort uint16, skip func(string), emit func(*Message)) *packetDecoder {
	d := &packetDecoder{serverPort: serverPort, skip: skip, emit: emit}
	d.tcp = newReassembler(skip, emit)
	d.frag = newDefragmenter(skip)
	return d
}

// flush counts what the input ended in the middle of: datagrams missing
// fragments and TCP messages cut off.
func (d *packetDecoder) flush() {
	d.frag.flush()
	d.tcp.flush()
}

// Ethernet types.
const (
	etherIPv4    = 0x0800
	etherIPv6    = 0x86dd
	etherVLAN    = 0x8100
	etherQinQ    = 0x88a8
	etherQinQ2   = 0x9100
	protoTCP     = 6
	protoUDP     = 17
	linkTypeRaw  = 12 // DLT_RAW on some BSDs; 101 (LINKTYPE_RAW) elsewhere
	linkTypeRaw2 = 14
)

// decode handles one captured frame. truncated says the capture kept less
// than the frame (snap length).
func (d *packetDecoder) decode(lt layers.LinkType, data []byte, at time.Time, truncated bool) {
	if d.packets++; d.packets%sweepEverySegs == 0 && len(d.frag.pending) > 0 {
		d.frag.expire(at, false)
	}
	ip, ok := d.linkPayload(lt, data)
	if !ok {
		return
	}
	if len(ip) == 0 {
		d.skip(SkipTruncated)
		return
	}
	switch ip[0] >> 4 {
	case 4:
		d.ipv4(ip, at, truncated)
	case 6:
		d.ipv6(ip, at, truncated)
	default:
		d.skip(SkipNotIP)
	}
}

// linkPayload strips the link layer and returns the IP packet.
func (d *packetDecoder) linkPayload(lt layers.LinkType, data []byte) ([]byte, bool) {
	var etherType uint16
	switch lt {
	case layers.LinkTypeEthernet:
		if len(data) < 14 {
			d.skip(SkipTruncated)
			return nil, false
		}
		etherType, data = binary.BigEndian.Uint16(data[12:]), data[14:]
	case layers.LinkTypeLinuxSLL:
		if len(data) < 16 {
			d.skip(SkipTruncated)
			return nil, false
		}
		etherType, data = binary.BigEndian.Uint16(data[14:]), data[16:]
	case layers.LinkTypeLinuxSLL2:
		if len(data) < 20 {
			d.skip(SkipTruncated)
			return nil, false
		}
		etherType, data = binary.BigEndian.Uint16(data[0:]), data[20:]
	case layers.LinkTypeNull, layers.LinkTypeLoop:
		// A 4-byte address family, in the capturing host's byte order for
		// Null and big-endian for Loop; the IP version nibble says as much.
		if len(data) < 4 {
			d.skip(SkipTruncated)
			return nil, false
		}
		return data[4:], true
	case layers.LinkTypeRaw, linkTypeRaw, linkTypeRaw2, layers.LinkTypeIPv4, layers.LinkTypeIPv6:
		return data, true
	default:
		d.skip(SkipLinkType)
		return nil, false
	}
	for etherType == etherVLAN || etherType == etherQinQ || etherType == etherQinQ2 {
		if len(data) < 4 {
			d.skip(SkipTruncated)
			return nil, false
		}
		etherType, data = binary.BigEndian.Uint16(data[2:]), data[4:]
	}
	if etherType != etherIPv4 && etherType != etherIPv6 {
		d.skip(SkipNotIP)
		return nil, false
	}
	return data, true
}

func (d *packetDecoder) ipv4(p []byte, at time.Time, truncated bool) {
	if len(p) < 20 {
		d.skip(SkipTruncated)
		return
	}
	hl := int(p[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(p[2:]))
	if hl < 20 || total < hl {
		d.skip(SkipNotIP)
		return
	}
	if total > len(p) {
		d.skip(SkipTruncated)
		return
	}
	p = p[:total] // Ethernet pads short frames
	src := netip.AddrFrom4([4]byte(p[12:16]))
	dst := netip.AddrFrom4([4]byte(p[16:20]))
	proto, payload := p[9], p[hl:]
	if frag := binary.BigEndian.Uint16(p[6:]); frag&0x3fff != 0 { // more fragments, or an offset
		if truncated {
			d.skip(SkipTruncated)
			return
		}
		key := fragmentKey{src, dst, uint32(binary.BigEndian.Uint16(p[4:])), proto}
		var ok bool
		if payload, _, ok = d.frag.add(key, int(frag&0x1fff)*8, frag&0x2000 != 0, proto, payload, at); !ok {
			return
		}
	}
	d.transport(proto, src, dst, payload, at, truncated)
}

func (d *packetDecoder) ipv6(p []byte, at time.Time, truncated bool) {
	if len(p) < 40 {
		d.skip(SkipTruncated)
		return
	}
	payload := int(binary.BigEndian.Uint16(p[4:]))
	if 40+payload > len(p) {
		d.skip(SkipTruncated)
		return
	}
	src := netip.AddrFrom16([16]byte(p[8:24]))
	dst := netip.AddrFrom16([16]byte(p[24:40]))
	d.ipv6Payload(p[6], src, dst, p[40:40+payload], at, truncated, false)
}

// ipv6Payload walks the extension headers from next on, reassembling a
// fragmented datagram, and hands the transport's header on.
func (d *packetDecoder) ipv6Payload(next byte, src, dst netip.Addr, p []byte, at time.Time, truncated, reassembled bool) {
	for {
		switch next {
		case 0, 43, 60: // hop-by-hop, routing, destination options
			if len(p) < 8 || len(p) < (int(p[1])+1)*8 {
				d.skip(SkipTruncated)
				return
			}
			next, p = p[0], p[(int(p[1])+1)*8:]
			continue
		case 44: // fragment
			if len(p) < 8 || truncated || reassembled {
				d.skip(SkipTruncated)
				return
			}
			off := binary.BigEndian.Uint16(p[2:])
			key := fragmentKey{src, dst, binary.BigEndian.Uint32(p[4:]), 0}
			whole, proto, ok := d.frag.add(key, int(off&^7), off&1 != 0, p[0], p[8:], at)
			if ok {
				d.ipv6Payload(proto, src, dst, whole, at, false, true)
			}
			return
		}
		break
	}
	d.transport(next, src, dst, p, at, truncated)
}

// transport reads the UDP or TCP header and decides which side is the
// server: the one on the server port. When both are (server to server),
// the QR bit of a UDP message decides, and for TCP the lower address.
func (d *packetDecoder) transport(proto byte, src, dst netip.Addr, p []byte, at time.Time, truncated bool) {
	if proto != protoUDP && proto != protoTCP {
		d.skip(SkipNotUDPOrTCP)
		return
	}
	if len(p) < 8 {
		d.skip(SkipTruncated)
		return
	}
	sport, dport := binary.BigEndian.Uint16(p[0:]), binary.BigEndian.Uint16(p[2:])
	fromServer := sport == d.serverPort
	if !fromServer && dport != d.serverPort {
		d.skip(SkipNotDNSPort)
		return
	}
	if proto == protoTCP {
		if sport == dport {
			fromServer = src.Less(dst)
		}
		d.tcpSegment(src, dst, sport, dport, fromServer, p, at, truncated)
		return
	}
	ulen := int(binary.BigEndian.Uint16(p[4:]))
	if ulen < 8 {
		d.skip(SkipNotDNS)
		return
	}
	if ulen > len(p) || truncated {
		d.skip(SkipTruncated)
		return
	}
	wire := p[8:ulen]
	if len(wire) < dnsHeaderLen {
		d.skip(SkipNotDNS)
		return
	}
	if sport == dport {
		fromServer = wire[2]&0x80 != 0
	}
	m := &d.msg
	*m = Message{Time: at, UDP: true, Response: fromServer, Wire: wire}
	if fromServer {
		m.Client, m.Server = netip.AddrPortFrom(dst, dport), netip.AddrPortFrom(src, sport)
	} else {
		m.Client, m.Server = netip.AddrPortFrom(src, sport), netip.AddrPortFrom(dst, dport)
	}
	d.emit(m)
}

func (d *packetDecoder) tcpSegment(src, dst netip.Addr, sport, dport uint16, fromServer bool, p []byte, at time.Time, truncated bool) {
	if len(p) < 20 {
		d.skip(SkipTruncated)
		return
	}
	off := int(p[12]>>4) * 4
	if off < 20 || off > len(p) {
		d.skip(SkipTruncated)
		return
	}
	seg := tcpSegment{
		seq:     binary.BigEndian.Uint32(p[4:]),
		flags:   p[13],
		payload: p[off:],
		lost:    truncated,
		at:      at,
	}
	if fromServer {
		seg.client, seg.server = netip.AddrPortFrom(dst, dport), netip.AddrPortFrom(src, sport)
	} else {
		seg.client, seg.server = netip.AddrPortFrom(src, sport), netip.AddrPortFrom(dst, dport)
	}
	seg.fromServer = fromServer
	d.tcp.segment(&seg)
}

// dnsHeaderLen is the length of a DNS message header.
const dnsHeaderLen = 12
