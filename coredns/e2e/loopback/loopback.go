// Package loopback reads the addresses of the load tools that the
// end-to-end scripts run (soakload, sidebyside's flood and legitimate
// client): they send only to and from loopback addresses, and refuse any
// other with the flag's name.
package loopback

import (
	"fmt"
	"net/netip"
)

// Server reads the value v of the flag named name as a loopback
// host:port.
func Server(name, v string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(v)
	if err != nil || !ap.Addr().IsLoopback() {
		return netip.AddrPort{}, fmt.Errorf("-%s %q: want a loopback host:port", name, v)
	}
	return ap, nil
}

// Source reads the value v of the flag named name as a loopback address.
func Source(name, v string) (netip.Addr, error) {
	a, err := netip.ParseAddr(v)
	if err != nil || !a.IsLoopback() {
		return netip.Addr{}, fmt.Errorf("-%s %q: want a loopback address", name, v)
	}
	return a, nil
}
