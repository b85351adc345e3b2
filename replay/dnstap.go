package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	dnstap "github.com/dnstap/golang-dnstap"
	framestream "github.com/farsightsec/golang-framestream"
	"google.golang.org/protobuf/proto"
)

// maxFrame bounds a dnstap frame: a longer one is read through without
// being held, and skipped.
const maxFrame = MaxRecord

// readDnstap replays a dnstap file (frame streams, unidirectional).
func (r *Replay) readDnstap(in io.Reader) error {
	fr, err := dnstap.NewReader(in, nil)
	if err != nil {
		return fmt.Errorf("%w: dnstap: %v", ErrNotCapture, err)
	}
	buf := make([]byte, maxFrame)
	for !r.stopped.Load() {
		n, err := fr.ReadFrame(buf)
		switch {
		case err == io.EOF:
			return nil
		case errors.Is(err, framestream.ErrDataFrameTooLarge):
			r.skip(SkipOversize)
			continue
		case err != nil:
			r.skip(SkipBadRecord) // a cut or damaged file ends what can be read
			return nil
		}
		r.frame(buf[:n])
	}
	return nil
}

// frame replays one dnstap frame.
func (r *Replay) frame(b []byte) {
	r.packets.Add(1)
	var tap dnstap.Dnstap
	if err := proto.Unmarshal(b, &tap); err != nil {
		r.skip(SkipBadRecord)
		return
	}
	m, reason := tapMessage(tap.GetMessage())
	if reason != "" {
		r.skip(reason)
		return
	}
	r.Message(m)
}

// tapMessage turns a dnstap message into a Message: client queries and
// responses (and the authoritative server's, AUTH_QUERY and AUTH_RESPONSE,
// which BIND, Knot and NSD log) are replayed; the others are skipped.
func tapMessage(tm *dnstap.Message) (*Message, string) {
	if tm == nil {
		return nil, SkipDnstapType
	}
	m := &Message{}
	var stamped bool // a message without its time would set the clock to 1970
	switch tm.GetType() {
	case dnstap.Message_CLIENT_QUERY, dnstap.Message_AUTH_QUERY:
		m.Wire = tm.GetQueryMessage()
		m.Time = time.Unix(int64(tm.GetQueryTimeSec()), int64(tm.GetQueryTimeNsec()))
		stamped = tm.QueryTimeSec != nil
	case dnstap.Message_CLIENT_RESPONSE, dnstap.Message_AUTH_RESPONSE:
		m.Response = true
		m.Wire = tm.GetResponseMessage()
		m.Time = time.Unix(int64(tm.GetResponseTimeSec()), int64(tm.GetResponseTimeNsec()))
		stamped = tm.ResponseTimeSec != nil
	default:
		return nil, SkipDnstapType
	}
	client, ok := netip.AddrFromSlice(tm.GetQueryAddress())
	if !ok || len(m.Wire) == 0 || !stamped {
		return nil, SkipDnstapIncomplete
	}
	m.Client = netip.AddrPortFrom(client.Unmap(), uint16(tm.GetQueryPort()))
	if server, ok := netip.AddrFromSlice(tm.GetResponseAddress()); ok {
		m.Server = netip.AddrPortFrom(server.Unmap(), uint16(tm.GetResponsePort()))
	}
	m.UDP = tm.GetSocketProtocol() == dnstap.SocketProtocol_UDP
	return m, ""
}

// ListenAddr parses the -listen forms "unix:/path" and "tcp:host:port".
func ListenAddr(s string) (network, address string, err error) {
	network, address, ok := strings.Cut(s, ":")
	if !ok || address == "" || (network != "unix" && network != "tcp") {
		return "", "", fmt.Errorf("%q: want unix:/path/to/socket or tcp:127.0.0.1:PORT", s)
	}
	return network, address, nil
}

// Listen replays the dnstap frame streams that servers (such as CoreDNS's
// dnstap plugin) write to l, from any number of connections at once, until
// ctx is done. It closes l.
func (r *Replay) Listen(ctx context.Context, l net.Listener) error {
	frames := make(chan []byte, 1024)
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	acceptErr := make(chan error, 1)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Go(func() {
				readConn(ctx, c, frames)
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
				c.Close()
			})
		}
	}()
	defer func() {
		l.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	for {
		select {
		case <-ctx.Done():
			r.drain(frames)
			return nil
		case err := <-acceptErr:
			return err
		case b := <-frames:
			r.frame(b)
		}
	}
}

// drain replays the frames already received.
func (r *Replay) drain(frames chan []byte) {
	for {
		select {
		case b := <-frames:
			r.frame(b)
		default:
			return
		}
	}
}

// readConn reads the frames of one connection (bidirectional frame
// streams, as dnstap writers use on sockets) into frames.
func readConn(ctx context.Context, c net.Conn, frames chan<- []byte) {
	fr, err := dnstap.NewReader(c, &dnstap.ReaderOptions{Bidirectional: true, Timeout: 10 * time.Second})
	if err != nil {
		return
	}
	buf := make([]byte, maxFrame)
	for {
		n, err := fr.ReadFrame(buf)
		if errors.Is(err, framestream.ErrDataFrameTooLarge) {
			continue
		}
		if err != nil {
			return
		}
		select {
		case frames <- append([]byte(nil), buf[:n]...):
		case <-ctx.Done():
			return
		}
	}
}

// ListenOn opens the listener of a -listen address; a stale unix socket
// file is replaced.
func ListenOn(s string) (net.Listener, error) {
	network, address, err := ListenAddr(s)
	if err != nil {
		return nil, err
	}
	if network == "unix" {
		if fi, err := os.Stat(address); err == nil && fi.Mode()&os.ModeSocket != 0 {
			os.Remove(address)
		}
	}
	return net.Listen(network, address)
}
