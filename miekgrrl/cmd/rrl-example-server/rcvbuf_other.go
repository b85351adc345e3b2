//go:build !linux

package main

import "net"

// setReadBuffer asks the kernel for a receive buffer of n bytes on conn;
// what it granted is not read back on this system.
func setReadBuffer(conn *net.UDPConn, n int) (rcvBuf, error) {
	return rcvBuf{asked: n}, conn.SetReadBuffer(n)
}
