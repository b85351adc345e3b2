package kerneldrop

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// The XDP program's stack: two keys built from the packet, the deadline
// found and the counter's index. Every access is aligned to its size, as
// the verifier wants on the stack.
const (
	// The listener key, listenerKeySize bytes: the destination address
	// (16, IPv4 mapped), the destination port (2, network order), 2 zero
	// bytes and the receiving interface's index (4, host order).
	stackListener     = -24
	stackListenerPort = stackListener + 16
	stackListenerPad  = stackListener + 18
	stackListenerIf   = stackListener + 20

	// The blocked key, blockedKeySize bytes: the prefix length (4, host
	// order), the tag (4, host order: group<<1 | family) and the source
	// address (16; IPv4 in the first 4 bytes, the rest zero).
	stackBlocked     = -48
	stackBlockedTag  = stackBlocked + 4
	stackBlockedAddr = stackBlocked + 8

	stackUntil   = -56 // the deadline of the entry found (8)
	stackCounter = -60 // the counter's index, the tag (4)
)

// Offsets in the packet and in struct xdp_md.
const (
	xdpData        = 0  // xdp_md.data
	xdpDataEnd     = 4  // xdp_md.data_end
	xdpIngressIf   = 12 // xdp_md.ingress_ifindex
	ethLen         = 14 // Ethernet header; lo has one too, zeroed
	ethType        = 12
	ipv4MinLen     = 20
	ipv4Proto      = ethLen + 9
	ipv4Frag       = ethLen + 6
	ipv4Src        = ethLen + 12
	ipv4Dst        = ethLen + 16
	ipv6Len        = 40
	ipv6Next       = ethLen + 6
	ipv6Src        = ethLen + 8
	ipv6Dst        = ethLen + 24
	ipv6UDP        = ethLen + ipv6Len
	udpLen         = 8
	udpDstPort     = 2
	protoUDP       = 17
	xdpDrop        = 1
	xdpPass        = 2
	familyIPv4     = 0
	familyIPv6     = 1
	ethTypeIPv4Raw = 0x0008 // 0x0800 as a little-endian load of the wire's bytes
	ethTypeIPv6Raw = 0xdd86 // 0x86dd likewise
	ipv4OffsetRaw  = 0xff1f // the fragment offset's 13 bits (0x1fff) likewise
)

// program returns the XDP program that drops UDP packets from blocked
// networks to listeners, given the three maps' descriptors.
//
// In outline:
//
//	parse Ethernet, then IPv4 (IHL-aware; a non-first fragment passes) or
//	IPv6 (the next header must be UDP), then UDP; anything else passes
//	group = listeners[dst addr, dst port, ifindex]
//	    or listeners[unspecified addr of the family, dst port, ifindex]
//	    else pass
//	until = blocked[longest prefix of (group<<1|family, src addr)] else pass
//	if now (CLOCK_BOOTTIME) >= until: pass (user space removes the entry)
//	counters[group<<1|family]++ (per CPU); drop
//
// The registers: R6 the context, R7 the packet's start, R8 its end, R9 the
// family; R1-R5 are scratch and R0 the helpers' results.
func program(listeners, blocked, counters int) asm.Instructions {
	r0, r1, r2, r3, r4, r5 := asm.R0, asm.R1, asm.R2, asm.R3, asm.R4, asm.R5
	r6, r7, r8, r9, fp := asm.R6, asm.R7, asm.R8, asm.R9, asm.R10
	return asm.Instructions{
		asm.Mov.Reg(r6, r1),
		asm.LoadMem(r7, r6, xdpData, asm.Word),
		asm.LoadMem(r8, r6, xdpDataEnd, asm.Word),

		// Ethernet.
		asm.Mov.Reg(r2, r7),
		asm.Add.Imm(r2, ethLen),
		asm.JGT.Reg(r2, r8, "pass"),
		asm.LoadMem(r3, r7, ethType, asm.Half),
		asm.JEq.Imm(r3, ethTypeIPv4Raw, "ipv4"),
		asm.JEq.Imm(r3, ethTypeIPv6Raw, "ipv6"),
		asm.Ja.Label("pass"),

		// IPv4: the fixed header, UDP, not a later fragment.
		asm.Mov.Reg(r2, r7).WithSymbol("ipv4"),
		asm.Add.Imm(r2, ethLen+ipv4MinLen),
		asm.JGT.Reg(r2, r8, "pass"),
		asm.LoadMem(r3, r7, ipv4Proto, asm.Byte),
		asm.JNE.Imm(r3, protoUDP, "pass"),
		asm.LoadMem(r3, r7, ipv4Frag, asm.Half),
		asm.JSet.Imm(r3, ipv4OffsetRaw, "pass"),
		// The UDP header after IHL 32-bit words.
		asm.LoadMem(r4, r7, ethLen, asm.Byte),
		asm.And.Imm(r4, 0x0f),
		asm.LSh.Imm(r4, 2),
		asm.JLT.Imm(r4, ipv4MinLen, "pass"),
		asm.Mov.Reg(r5, r7),
		asm.Add.Reg(r5, r4),
		asm.Add.Imm(r5, ethLen),
		asm.Mov.Reg(r2, r5),
		asm.Add.Imm(r2, udpLen),
		asm.JGT.Reg(r2, r8, "pass"),
		asm.LoadMem(r3, r5, udpDstPort, asm.Half),
		asm.StoreMem(fp, stackListenerPort, r3, asm.Half),
		// The listener key's address: ::ffff:dst.
		asm.StoreImm(fp, stackListener, 0, asm.Word),
		asm.StoreImm(fp, stackListener+4, 0, asm.Word),
		asm.StoreImm(fp, stackListener+8, 0, asm.Half),
		asm.StoreImm(fp, stackListener+10, 0xffff, asm.Half),
		asm.LoadMem(r3, r7, ipv4Dst, asm.Word),
		asm.StoreMem(fp, stackListener+12, r3, asm.Word),
		// The blocked key's address: src, then zeros; /32 plus the tag.
		asm.LoadMem(r3, r7, ipv4Src, asm.Word),
		asm.StoreMem(fp, stackBlockedAddr, r3, asm.Word),
		asm.StoreImm(fp, stackBlockedAddr+4, 0, asm.Word),
		asm.StoreImm(fp, stackBlockedAddr+8, 0, asm.Word),
		asm.StoreImm(fp, stackBlockedAddr+8+4, 0, asm.Word),
		asm.StoreImm(fp, stackBlocked, 32+32, asm.Word),
		asm.Mov.Imm(r9, familyIPv4),
		asm.Ja.Label("listener"),

		// IPv6: the fixed header and UDP right after it.
		asm.Mov.Reg(r2, r7).WithSymbol("ipv6"),
		asm.Add.Imm(r2, ipv6UDP+udpLen),
		asm.JGT.Reg(r2, r8, "pass"),
		asm.LoadMem(r3, r7, ipv6Next, asm.Byte),
		asm.JNE.Imm(r3, protoUDP, "pass"),
		asm.LoadMem(r3, r7, ipv6UDP+udpDstPort, asm.Half),
		asm.StoreMem(fp, stackListenerPort, r3, asm.Half),
		asm.LoadMem(r3, r7, ipv6Dst, asm.DWord),
		asm.StoreMem(fp, stackListener, r3, asm.DWord),
		asm.LoadMem(r3, r7, ipv6Dst+8, asm.DWord),
		asm.StoreMem(fp, stackListener+8, r3, asm.DWord),
		asm.LoadMem(r3, r7, ipv6Src, asm.DWord),
		asm.StoreMem(fp, stackBlockedAddr, r3, asm.DWord),
		asm.LoadMem(r3, r7, ipv6Src+8, asm.DWord),
		asm.StoreMem(fp, stackBlockedAddr+8, r3, asm.DWord),
		asm.StoreImm(fp, stackBlocked, 32+128, asm.Word),
		asm.Mov.Imm(r9, familyIPv6),

		// The listener: the exact address, else the family's unspecified
		// address on that port.
		asm.StoreImm(fp, stackListenerPad, 0, asm.Half).WithSymbol("listener"),
		asm.LoadMem(r3, r6, xdpIngressIf, asm.Word),
		asm.StoreMem(fp, stackListenerIf, r3, asm.Word),
		asm.LoadMapPtr(r1, listeners),
		asm.Mov.Reg(r2, fp),
		asm.Add.Imm(r2, stackListener),
		asm.FnMapLookupElem.Call(),
		asm.JNE.Imm(r0, 0, "group"),
		asm.StoreImm(fp, stackListener, 0, asm.Word),
		asm.StoreImm(fp, stackListener+4, 0, asm.Word),
		asm.StoreImm(fp, stackListener+12, 0, asm.Word),
		asm.JEq.Imm(r9, familyIPv4, "wildcard"),
		asm.StoreImm(fp, stackListener+8, 0, asm.Word),
		asm.StoreImm(fp, stackListener+8+4, 0, asm.Word),
		asm.LoadMapPtr(r1, listeners).WithSymbol("wildcard"),
		asm.Mov.Reg(r2, fp),
		asm.Add.Imm(r2, stackListener),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(r0, 0, "pass"),

		// The blocked network: the longest prefix under the group's tag.
		asm.LoadMem(r3, r0, 0, asm.Word).WithSymbol("group"),
		asm.LSh.Imm(r3, 1),
		asm.Or.Reg(r3, r9),
		asm.StoreMem(fp, stackBlockedTag, r3, asm.Word),
		asm.StoreMem(fp, stackCounter, r3, asm.Word),
		asm.LoadMapPtr(r1, blocked),
		asm.Mov.Reg(r2, fp),
		asm.Add.Imm(r2, stackBlocked),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(r0, 0, "pass"),
		asm.LoadMem(r3, r0, 0, asm.DWord),
		asm.StoreMem(fp, stackUntil, r3, asm.DWord),
		asm.FnKtimeGetBootNs.Call(),
		asm.LoadMem(r3, fp, stackUntil, asm.DWord),
		asm.JGE.Reg(r0, r3, "pass"),

		// Counted, then dropped.
		asm.LoadMapPtr(r1, counters),
		asm.Mov.Reg(r2, fp),
		asm.Add.Imm(r2, stackCounter),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(r0, 0, "drop"),
		asm.LoadMem(r3, r0, 0, asm.DWord),
		asm.Add.Imm(r3, 1),
		asm.StoreMem(r0, 0, r3, asm.DWord),
		asm.Mov.Imm(r0, xdpDrop).WithSymbol("drop"),
		asm.Return(),

		asm.Mov.Imm(r0, xdpPass).WithSymbol("pass"),
		asm.Return(),
	}
}

const (
	// maxListeners bounds the listener map (addresses × ports ×
	// interfaces over all Lists).
	maxListeners = 4096
	// maxBlocked bounds the blocked map over all Lists; each List keeps to
	// its MaxNetworks, at most maxNetworksLimit. The map is not
	// preallocated: entries cost memory only while they exist.
	maxBlocked = 1 << 18

	noPrealloc = 1 // BPF_F_NO_PREALLOC
)

// mapSpecs are the program's three maps.
func mapSpecs() (listeners, blocked, counters *ebpf.MapSpec) {
	listeners = &ebpf.MapSpec{
		Name:       "rrl_listeners",
		Type:       ebpf.Hash,
		KeySize:    listenerKeySize,
		ValueSize:  4,
		MaxEntries: maxListeners,
		Flags:      noPrealloc,
	}
	blocked = &ebpf.MapSpec{
		Name:       "rrl_blocked",
		Type:       ebpf.LPMTrie,
		KeySize:    blockedKeySize,
		ValueSize:  8,
		MaxEntries: maxBlocked,
		Flags:      noPrealloc,
	}
	counters = &ebpf.MapSpec{
		Name:       "rrl_dropped",
		Type:       ebpf.PerCPUArray,
		KeySize:    4,
		ValueSize:  8,
		MaxEntries: 2 * maxGroups,
	}
	return listeners, blocked, counters
}
