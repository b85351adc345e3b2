package main

import (
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// setReadBuffer asks the kernel for a receive buffer of n bytes on conn
// (SO_RCVBUF, which net.core.rmem_max caps) and reads back what it
// granted. When the cap cut it, it tries SO_RCVBUFFORCE, which passes the
// cap for a process with CAP_NET_ADMIN (root), and keeps what it got
// otherwise.
func setReadBuffer(conn *net.UDPConn, n int) (rcvBuf, error) {
	r := rcvBuf{asked: n, max: rmemMax()}
	if err := conn.SetReadBuffer(n); err != nil {
		return r, err
	}
	raw, err := conn.SyscallConn()
	if err != nil {
		return r, err
	}
	read := func() (int, error) {
		var v int
		var gerr error
		if err := raw.Control(func(fd uintptr) {
			v, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
		}); err != nil {
			return 0, err
		}
		return v, gerr
	}
	if r.granted, err = read(); err != nil {
		return r, err
	}
	if r.granted >= 2*n {
		return r, nil
	}
	var ferr error
	if err := raw.Control(func(fd uintptr) {
		ferr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, n)
	}); err != nil || ferr != nil {
		return r, nil // not privileged: the capped buffer stays
	}
	r.forced = true
	r.granted, err = read()
	return r, err
}

// rmemMax returns net.core.rmem_max, or 0 if it cannot be read.
func rmemMax() int {
	b, err := os.ReadFile("/proc/sys/net/core/rmem_max")
	if err != nil {
		return 0
	}
	v, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return v
}
