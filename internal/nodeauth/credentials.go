package nodeauth

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
)

// exporterLabel is the label of the TLS keying material the handshake
// binds to (RFC 5705 / RFC 8446 §7.5).
const exporterLabel = "EXPORTER-snapflow-node-auth"

// HandshakeTimeout bounds a node handshake.
const HandshakeTimeout = 10 * time.Second

// Rejected is the number of connections refused so far in this process.
var Rejected atomic.Uint64

// Refusal is a connection a node refused, or could not make.
type Refusal struct {
	Peer   string // the peer's address
	Reason string
	// TLS: the TLS handshake failed (Reason says why; "TLS mismatch" when
	// one side has TLS and the other none).
	TLS bool
}

// Config is what a node's transport credentials need.
type Config struct {
	Local
	// Server and Client are the node's TLS configurations, nil without
	// TLS.
	Server, Client *tls.Config
	// Refused is told of each connection the node's server refused, after
	// Rejected counts it.
	Refused func(Refusal)
	// DialFailed is told of each connection to a peer that failed at TLS
	// or at the handshake.
	DialFailed func(Refusal)
}

// Credentials returns gRPC transport credentials that run the node
// handshake on every connection, after TLS when cfg has it, and refuse the
// connection unless it completes. A completed connection's AuthInfo is an
// AuthInfo naming the peer's node.
func Credentials(cfg Config) credentials.TransportCredentials {
	c := &creds{cfg: cfg}
	if cfg.Server != nil {
		c.tlsServer = credentials.NewTLS(cfg.Server)
	}
	if cfg.Client != nil {
		c.tlsClient = credentials.NewTLS(cfg.Client)
	}
	return c
}

type creds struct {
	cfg                  Config
	tlsServer, tlsClient credentials.TransportCredentials
}

// AuthInfo is the AuthInfo of a connection whose peer completed the node
// handshake.
type AuthInfo struct {
	credentials.CommonAuthInfo
	Peer Peer
	// TLS is the TLS state; nil without TLS.
	TLS *tls.ConnectionState
}

// AuthType implements credentials.AuthInfo.
func (AuthInfo) AuthType() string { return "snapflow-node" }

func (c *creds) Info() credentials.ProtocolInfo {
	p := credentials.ProtocolInfo{SecurityProtocol: "snapflow-node"}
	if c.tlsServer != nil {
		p.SecurityProtocol = "snapflow-node+tls"
	}
	return p
}

func (c *creds) Clone() credentials.TransportCredentials {
	cc := *c
	return &cc
}

func (c *creds) OverrideServerName(string) error { return nil }

// ClientHandshake runs TLS (when configured) and the node handshake on a
// connection this node dialled to authority.
func (c *creds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, state, err := c.clientTLS(ctx, authority, raw)
	if err != nil {
		return nil, nil, err
	}
	deadline := time.Now().Add(HandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	peer, r, err := c.clientNode(conn, authority, state)
	if err != nil {
		conn.Close()
		if c.cfg.DialFailed != nil {
			c.cfg.DialFailed(Refusal{Peer: authority, Reason: err.Error(), TLS: strings.Contains(err.Error(), "TLS mismatch")})
		}
		return nil, nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return &bufConn{Conn: conn, r: r}, authInfo(peer, state), nil
}

func (c *creds) clientTLS(ctx context.Context, authority string, raw net.Conn) (net.Conn, *tls.ConnectionState, error) {
	if c.tlsClient == nil {
		return raw, nil, nil
	}
	conn, ai, err := c.tlsClient.ClientHandshake(ctx, authority, raw)
	if err != nil {
		reason := tlsReason(err, "the peer")
		if c.cfg.DialFailed != nil {
			c.cfg.DialFailed(Refusal{Peer: authority, Reason: reason, TLS: true})
		}
		return nil, nil, fmt.Errorf("nodeauth: %s: %s", authority, reason)
	}
	st := ai.(credentials.TLSInfo).State
	return conn, &st, nil
}

func (c *creds) clientNode(conn net.Conn, authority string, state *tls.ConnectionState) (Peer, *bufio.Reader, error) {
	exporter, err := export(state)
	if err != nil {
		return Peer{}, nil, err
	}
	dialled := authority
	if state != nil {
		dialled = "" // the exporter binds the proofs to this connection
	}
	cl, hello, err := NewClient(c.cfg.Local, dialled, exporter, rand.Reader)
	if err != nil {
		return Peer{}, nil, err
	}
	if err := hello.write(conn); err != nil {
		return Peer{}, nil, fmt.Errorf("nodeauth: %s: %w", authority, err)
	}
	r := bufio.NewReader(conn)
	sp, err := readServerProof(r)
	if err != nil {
		var nh *NotHandshake
		if !errors.As(err, &nh) && state == nil {
			// A TLS server closes on the handshake's first frame without
			// a word: ask it whether it speaks TLS.
			if why := ProbeTLS(authority, nil, time.Second); why != "" {
				return Peer{}, nil, fmt.Errorf("nodeauth: %s: TLS mismatch: %s", authority, why)
			}
		}
		return Peer{}, nil, fmt.Errorf("nodeauth: %s: %w", authority, err)
	}
	proof, peer, err := cl.Verify(sp)
	if err != nil {
		return Peer{}, nil, fmt.Errorf("nodeauth: %s: %w", authority, err)
	}
	if err := proof.write(conn); err != nil {
		return Peer{}, nil, fmt.Errorf("nodeauth: %s: %w", authority, err)
	}
	f, err := readFrame(r, kindVerdict, 1)
	if err != nil {
		return Peer{}, nil, fmt.Errorf("nodeauth: %s: no verdict: %w", authority, err)
	}
	if len(f[0]) > 0 {
		return Peer{}, nil, fmt.Errorf("nodeauth: %s refused this node: %s", authority, f[0])
	}
	return peer, r, nil
}

// bufConn reads through the handshake's reader, which may hold the
// first bytes the peer sent after it.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// ServerHandshake runs TLS (when configured) and the node handshake on an
// accepted connection; a refusal is counted, told to Refused, and sent to
// the peer when it got as far as the handshake.
func (c *creds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	addr := raw.RemoteAddr().String()
	refuse := func(reason string, isTLS bool) error {
		Rejected.Add(1)
		if c.cfg.Refused != nil {
			c.cfg.Refused(Refusal{Peer: addr, Reason: reason, TLS: isTLS})
		}
		return fmt.Errorf("nodeauth: refused %s: %s", addr, reason)
	}
	conn := raw
	var state *tls.ConnectionState
	if c.tlsServer != nil {
		_ = raw.SetDeadline(time.Now().Add(HandshakeTimeout))
		tc, ai, err := c.tlsServer.ServerHandshake(raw)
		if err != nil {
			raw.Close()
			return nil, nil, refuse(tlsReason(err, "it"), true)
		}
		st := ai.(credentials.TLSInfo).State
		conn, state = tc, &st
	}
	_ = conn.SetDeadline(time.Now().Add(HandshakeTimeout))
	peer, r, err := c.serverNode(conn, state)
	if err != nil {
		conn.Close()
		var nh *NotHandshake
		isTLS := errors.As(err, &nh) && strings.Contains(nh.Guess, "TLS mismatch")
		return nil, nil, refuse(strings.TrimPrefix(err.Error(), "nodeauth: "), isTLS)
	}
	_ = conn.SetDeadline(time.Time{})
	return &bufConn{Conn: conn, r: r}, authInfo(peer, state), nil
}

func (c *creds) serverNode(conn net.Conn, state *tls.ConnectionState) (Peer, *bufio.Reader, error) {
	exporter, err := export(state)
	if err != nil {
		return Peer{}, nil, err
	}
	r := bufio.NewReader(conn)
	hello, err := readHello(r)
	if err != nil {
		var nh *NotHandshake
		if errors.As(err, &nh) {
			// Said in the clear, so that a TLS client sees at once that
			// this node does not speak TLS.
			_ = writeFrame(conn, kindVerdict, []byte("this node refuses peers that do not speak its node handshake"))
		}
		return Peer{}, nil, err
	}
	s := NewServer(c.cfg.Local, exporter)
	sp, err := s.Answer(hello, rand.Reader)
	if err != nil {
		return Peer{}, nil, err
	}
	if err := sp.write(conn); err != nil {
		return Peer{}, nil, err
	}
	proof, err := readClientProof(r)
	if err != nil {
		if strings.Contains(err.Error(), "closed") {
			return Peer{}, nil, fmt.Errorf("%w: it closed the connection before proving the secret (a node with another secret, or a replay)", ErrSecret)
		}
		return Peer{}, nil, err
	}
	peer, err := s.Finish(proof)
	if err != nil {
		_ = writeFrame(conn, kindVerdict, []byte(err.Error()))
		return Peer{}, nil, err
	}
	return peer, r, writeFrame(conn, kindVerdict, nil)
}

func export(state *tls.ConnectionState) ([]byte, error) {
	if state == nil {
		return nil, nil
	}
	b, err := state.ExportKeyingMaterial(exporterLabel, nil, 32)
	if err != nil {
		return nil, fmt.Errorf("nodeauth: TLS exporter: %w", err)
	}
	return b, nil
}

func authInfo(p Peer, state *tls.ConnectionState) AuthInfo {
	level := credentials.NoSecurity
	if state != nil {
		level = credentials.PrivacyAndIntegrity
	}
	return AuthInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: level}, Peer: p, TLS: state}
}

// tlsReason says why a TLS handshake failed, "TLS mismatch" first when
// the peer does not speak TLS.
func tlsReason(err error, who string) string {
	var rec tls.RecordHeaderError
	if errors.As(err, &rec) || strings.Contains(err.Error(), "first record does not look like a TLS handshake") {
		return "TLS mismatch: " + who + " does not speak TLS (a node without TLS): " + err.Error()
	}
	if errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "EOF") {
		return "the TLS handshake failed (the peer closed it; a TLS mismatch, or a certificate it refused): " + err.Error()
	}
	return "the TLS handshake failed: " + err.Error()
}
