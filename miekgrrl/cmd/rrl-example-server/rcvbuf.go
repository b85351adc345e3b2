package main

import "fmt"

// maxRcvBuf is the largest receive buffer -udp-rcvbuf asks for: the kernel
// doubles what it is asked, in an int.
const maxRcvBuf = 1 << 30

// rcvBuf is what became of a request for a UDP receive buffer.
type rcvBuf struct {
	asked   int
	granted int  // SO_RCVBUF read back; 0 where it cannot be read
	forced  bool // set past net.core.rmem_max with SO_RCVBUFFORCE
	max     int  // net.core.rmem_max; 0 where it cannot be read
}

func (r rcvBuf) String() string {
	if r.granted == 0 {
		return fmt.Sprintf("UDP receive buffer: %d bytes asked (what the kernel granted cannot be read here)", r.asked)
	}
	s := fmt.Sprintf("UDP receive buffer: %d bytes asked, %d granted (SO_RCVBUF reads back twice what is set: the kernel counts its bookkeeping in it)", r.asked, r.granted)
	switch {
	case r.forced:
		s += fmt.Sprintf(", past net.core.rmem_max (%d) with SO_RCVBUFFORCE", r.max)
	case r.granted < 2*r.asked:
		s += fmt.Sprintf(", capped by net.core.rmem_max (%d): raise it (sysctl -w net.core.rmem_max=%d) or run with CAP_NET_ADMIN", r.max, r.asked)
	}
	return s
}
