package capgen

import (
	"io"
	"time"

	dnstap "github.com/dnstap/golang-dnstap"
	"google.golang.org/protobuf/proto"
)

// TapWriter writes exchanges as a server's dnstap log: a CLIENT_QUERY and a
// CLIENT_RESPONSE each, stamped as Writer stamps the packets.
type TapWriter struct {
	fw  dnstap.Writer
	enc *dnstap.Encoder
}

// NewTapWriter starts a dnstap frame stream in w (bidirectional, as on a
// socket, when bidirectional is set; w must then be read from too).
func NewTapWriter(w io.Writer, bidirectional bool) (*TapWriter, error) {
	fw, err := dnstap.NewWriter(w, &dnstap.WriterOptions{Bidirectional: bidirectional})
	if err != nil {
		return nil, err
	}
	return &TapWriter{fw: fw, enc: dnstap.NewEncoder(fw)}, nil
}

// QueryTime and ResponseTime are when Writer captures an exchange's query
// and response: over TCP, after the handshake.
func QueryTime(e *Exchange) time.Time {
	if e.TCP {
		return e.At.Add(2 * ResponseDelay / 8)
	}
	return e.At
}

func ResponseTime(e *Exchange) time.Time {
	if e.TCP {
		return e.At.Add(3 * ResponseDelay / 8)
	}
	return e.At.Add(ResponseDelay)
}

// Write writes the exchange's query and response (if any).
func (t *TapWriter) Write(e *Exchange) error {
	if err := t.Encode(e, dnstap.Message_CLIENT_QUERY, QueryTime(e), e.Query); err != nil || e.Response == nil {
		return err
	}
	return t.Encode(e, dnstap.Message_CLIENT_RESPONSE, ResponseTime(e), e.Response)
}

// Encode writes one message of the given type about the exchange, with
// wire as its DNS message (none if nil), stamped at (no time of its kind
// if at is zero).
func (t *TapWriter) Encode(e *Exchange, typ dnstap.Message_Type, at time.Time, wire []byte) error {
	protocol := dnstap.SocketProtocol_UDP
	if e.TCP {
		protocol = dnstap.SocketProtocol_TCP
	}
	m := &dnstap.Message{
		Type: &typ, SocketProtocol: &protocol,
		QueryAddress: e.Client.Addr().AsSlice(), QueryPort: proto.Uint32(uint32(e.Client.Port())),
		ResponseAddress: e.Server.Addr().AsSlice(), ResponsePort: proto.Uint32(uint32(e.Server.Port())),
		QueryTimeSec: proto.Uint64(uint64(e.At.Unix())), QueryTimeNsec: proto.Uint32(uint32(e.At.Nanosecond())),
	}
	switch typ {
	case dnstap.Message_CLIENT_RESPONSE, dnstap.Message_AUTH_RESPONSE, dnstap.Message_RESOLVER_RESPONSE:
		m.ResponseTimeSec, m.ResponseTimeNsec = proto.Uint64(uint64(at.Unix())), proto.Uint32(uint32(at.Nanosecond()))
		m.ResponseMessage = wire
	default:
		m.QueryTimeSec, m.QueryTimeNsec = proto.Uint64(uint64(at.Unix())), proto.Uint32(uint32(at.Nanosecond()))
		m.QueryMessage = wire
	}
	if at.IsZero() {
		m.QueryTimeSec, m.QueryTimeNsec, m.ResponseTimeSec, m.ResponseTimeNsec = nil, nil, nil, nil
		if typ == dnstap.Message_CLIENT_RESPONSE || typ == dnstap.Message_AUTH_RESPONSE {
			m.QueryTimeSec = proto.Uint64(uint64(e.At.Unix())) // a response's query time alone
		}
	}
	kind := dnstap.Dnstap_MESSAGE
	return t.enc.Encode(&dnstap.Dnstap{Type: &kind, Message: m})
}

// Close ends the stream (on a socket, once the reader acknowledges it).
func (t *TapWriter) Close() error { return t.fw.Close() }
