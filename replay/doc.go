// Package replay runs captured DNS traffic through the response rate
// limiter of package rrl, to show what a configuration would have done to
// it: which client networks would have been limited, when, what they would
// have been denied, and how much of a reflection would have been cut.
//
// Input is a pcap or pcapng file (Ethernet with VLAN tags, Linux cooked
// SLL and SLL2, BSD loopback or raw IP; IPv4 and IPv6, fragments
// reassembled; DNS over UDP, and over TCP with the streams reassembled), a
// dnstap file, or a live dnstap socket. Each query is charged with
// DebitRequest when it arrives and its response with DebitResponse, as the
// servers charge them, and responses are classified with miekgrrl.Tuple.
// The limiter's clock is the traffic's own timestamps, so a replay is
// deterministic and runs as fast as the input can be read; memory is
// bounded whatever the input's size.
//
// A Replay takes a configuration (Options: settings in the grammar of
// rrl.Config.SetValue, or a Corefile's rrl block through ParseCorefile,
// and optionally a Sweep of one setting's values), reads input with
// ReadFile, Read or Listen, and returns a Report per configuration, which
// WriteText and WriteHTML render; a Report marshals to the JSON that
// rrl-replay -json writes.
package replay
