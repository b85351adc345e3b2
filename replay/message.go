package replay

import (
	"net/netip"
	"time"
)

// Message is one DNS message as a server sent or received it: the unit
// every input (pcap, pcapng, dnstap) is reduced to.
type Message struct {
	Time     time.Time      // when it was captured, or logged by the server
	Client   netip.AddrPort // the client's address and port
	Server   netip.AddrPort // the server's; the zero value when the input does not say
	UDP      bool           // over bare UDP, the only transport RRL limits responses on
	Response bool           // sent by the server; otherwise a query to it
	Wire     []byte         // the DNS message, valid until the next message is read

	// Took is, for a response, how long the server took over its query,
	// when the input says: a dnstap response carries its query's time
	// too. 0 when it does not; the replay then takes the time from the
	// query's capture to the response's, if it saw the query. A response
	// not over UDP is charged with it to stream-time-per-second.
	Took time.Duration
}

// Skip reasons: why a packet of the input was not replayed. They key the
// report's skipped counts.
const (
	SkipNotIP            = "not IP"
	SkipNotUDPOrTCP      = "not UDP or TCP"
	SkipNotDNSPort       = "not to or from the server port"
	SkipTruncated        = "truncated packet"
	SkipFragment         = "IP fragment of an incomplete datagram"
	SkipLinkType         = "unsupported link type"
	SkipNotDNS           = "not a DNS message"
	SkipTCPGap           = "TCP data lost or out of order"
	SkipTCPOverflow      = "TCP stream over the reassembly limit"
	SkipTCPCut           = "TCP message cut off (connection closed, idle or evicted, or input ended)"
	SkipDnstapType       = "dnstap message not a client query or response"
	SkipDnstapIncomplete = "dnstap message without address, time or DNS message"
	SkipNoQuestion       = "query without a question (not limited)"
	SkipOutOfZone        = "outside the limited zones"
	SkipBadRecord        = "unreadable capture record"
)
