package rrl

import (
	"net"
	"net/netip"
)

// RRL limits responses and requests per client network. It is safe for
// concurrent use; Debit takes no lock shared by all callers.
type RRL struct {
	cfg Config
}

// NewRRL returns an RRL with a copy of cfg. A nil cfg means NewConfig(),
// which limits nothing.
func NewRRL(cfg *Config) *RRL {
	if cfg == nil {
		cfg = NewConfig()
	}
	return &RRL{cfg: *cfg}
}

// Debit charges one response to src's accounts and says what to do with it.
func (r *RRL) Debit(src net.Addr, tuple *ResponseTuple) (Action, IPReason, RTReason) {
	return Send, IPNotConfigured, RTNotConfigured
}

// DebitAddr is Debit for a server that already holds the client address as a
// netip.Addr: udp tells whether the response goes over UDP.
func (r *RRL) DebitAddr(src netip.Addr, udp bool, tuple *ResponseTuple) (Action, IPReason, RTReason) {
	return Send, IPNotConfigured, RTNotConfigured
}

// GetStats returns the counters accumulated since the last zeroing and, if
// zeroAfter is true, zeroes them.
func (r *RRL) GetStats(zeroAfter bool) Stats { return Stats{} }
