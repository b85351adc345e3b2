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
	"syscall"
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
		if tm.QueryTimeSec != nil { // servers log the query's time with its response
			q := time.Unix(int64(tm.GetQueryTimeSec()), int64(tm.GetQueryTimeNsec()))
			m.Took = max(m.Time.Sub(q), 0)
		}
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

// ListenOptions bound what the connections of a socket may hold.
type ListenOptions struct {
	// MaxConns is how many connections are read at once (0: 64). Further
	// ones wait in the kernel's backlog until one closes, so that no
	// number of connections exhausts the process's descriptors.
	MaxConns int
	// IdleTimeout closes a connection that sends nothing for this long
	// after its handshake (0: 5 minutes); the handshake itself has 10
	// seconds, or IdleTimeout if shorter.
	IdleTimeout time.Duration
	// AcceptError, if set, is told of each temporary accept error and the
	// pause before the next try.
	AcceptError func(err error, pause time.Duration)
}

// Defaults of ListenOptions.
const (
	DefaultMaxConns    = 64
	DefaultIdleTimeout = 5 * time.Minute
	handshakeTimeout   = 10 * time.Second
)

// Listen replays the dnstap frame streams that servers (such as CoreDNS's
// dnstap plugin) write to l, from any number of connections at once, until
// ctx is done, with the default ListenOptions. It closes l.
func (r *Replay) Listen(ctx context.Context, l net.Listener) error {
	return r.ListenWith(ctx, l, ListenOptions{})
}

// ListenWith is Listen with the given bounds. A temporary accept error,
// such as running out of descriptors, is retried after a pause that
// doubles from 5 ms to 1 s, as net/http's server does; any other ends the
// listening, and is returned once the frames already received are
// replayed.
func (r *Replay) ListenWith(ctx context.Context, l net.Listener, o ListenOptions) error {
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	ctx, cancel := context.WithCancel(ctx)
	frames := make(chan []byte, 1024)
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	acceptErr := make(chan error, 1)
	slots := make(chan struct{}, o.MaxConns)
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		var pause time.Duration
		for {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			c, err := l.Accept()
			if err != nil {
				<-slots
				if ctx.Err() == nil && temporary(err) {
					pause = min(max(2*pause, 5*time.Millisecond), time.Second)
					if o.AcceptError != nil {
						o.AcceptError(err, pause)
					}
					select {
					case <-time.After(pause):
						continue
					case <-ctx.Done():
						return
					}
				}
				acceptErr <- err
				return
			}
			pause = 0
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Go(func() {
				readConn(ctx, c, frames, o.IdleTimeout)
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
				c.Close()
				<-slots
			})
		}
	}()
	defer func() {
		cancel()
		l.Close()
		<-accepting // no connection is added after this
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
		r.drain(frames)
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-acceptErr:
			return err
		case b := <-frames:
			r.received(b)
		}
	}
}

// received replays a frame read from a socket; nil stands for one over
// MaxRecord, read through and dropped.
func (r *Replay) received(b []byte) {
	if b == nil {
		r.packets.Add(1)
		r.skip(SkipOversize)
		return
	}
	r.frame(b)
}

// temporary reports whether an accept error may pass: a lack of
// descriptors or buffers, or a connection aborted before it was accepted.
func temporary(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.ECONNRESET} {
		if errors.Is(err, e) {
			return true
		}
	}
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// drain replays the frames already received.
func (r *Replay) drain(frames chan []byte) {
	for {
		select {
		case b := <-frames:
			r.received(b)
		default:
			return
		}
	}
}

// idleConn is a connection whose reads, once armed after the handshake,
// fail when nothing arrives for idle.
type idleConn struct {
	net.Conn
	idle  time.Duration
	armed bool
}

func (c *idleConn) Read(p []byte) (int, error) {
	if c.armed {
		c.SetReadDeadline(time.Now().Add(c.idle))
	}
	return c.Conn.Read(p)
}

// readConn reads the frames of one connection (bidirectional frame
// streams, as dnstap writers use on sockets) into frames, until it ends,
// fails, or is idle for idle.
func readConn(ctx context.Context, c net.Conn, frames chan<- []byte, idle time.Duration) {
	ic := &idleConn{Conn: c, idle: idle}
	fr, err := dnstap.NewReader(ic, &dnstap.ReaderOptions{Bidirectional: true, Timeout: min(handshakeTimeout, idle)})
	if err != nil {
		return
	}
	ic.armed = true
	buf := make([]byte, maxFrame)
	for {
		n, err := fr.ReadFrame(buf)
		var b []byte // nil: a frame over MaxRecord, counted (a data frame is never empty)
		switch {
		case errors.Is(err, framestream.ErrDataFrameTooLarge):
		case err != nil:
			return
		default:
			b = append(b, buf[:n]...)
		}
		select {
		case frames <- b:
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
