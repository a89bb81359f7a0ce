package nodeauth

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// EnvSecret is the environment variable a node reads its secret from when
// its configuration gives none.
const EnvSecret = "SNAPFLOW_CLUSTER_SECRET"

// MinSecret is the least length of a secret, in bytes.
const MinSecret = 16

// Secret returns the secret configured (option names the option it came
// from, for errors), or the one in the environment when configured is
// empty, or an error that says how to set one.
func Secret(option, configured string, getenv func(string) string) (string, error) {
	s, from := configured, option
	if s == "" {
		s, from = getenv(EnvSecret), "$"+EnvSecret
	}
	if s == "" {
		return "", fmt.Errorf("%s is empty and %s is not set: every node of a cluster must share a secret of at least %d bytes (for example the output of `openssl rand -hex 32`), which authenticates the nodes to each other", option, EnvSecret, MinSecret)
	}
	if len(s) < MinSecret {
		return "", fmt.Errorf("%s: the secret has %d bytes, want at least %d", from, len(s), MinSecret)
	}
	return s, nil
}

// ErrUnauthenticated is the error of a call on a connection that did not
// complete the node handshake.
var ErrUnauthenticated = errors.New("nodeauth: a call on a connection without the node handshake")

// ServerOptions returns the options of a node's gRPC server that refuse,
// before its handler runs, every call on a connection that did not
// complete the node handshake (see Credentials): the transport refuses
// such connections already, and this holds should other credentials ever
// be configured.
func ServerOptions() []grpc.ServerOption {
	check := func(ctx context.Context) error {
		if p, ok := peer.FromContext(ctx); ok {
			if _, ok := p.AuthInfo.(AuthInfo); ok {
				return nil
			}
		}
		Rejected.Add(1)
		return status.Error(codes.Unauthenticated, ErrUnauthenticated.Error())
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := check(ctx); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := check(ss.Context()); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}

// PeerOf returns the node a call's connection authenticated.
func PeerOf(ctx context.Context) (Peer, bool) {
	if p, ok := peer.FromContext(ctx); ok {
		if ai, ok := p.AuthInfo.(AuthInfo); ok {
			return ai.Peer, true
		}
	}
	return Peer{}, false
}

// ErrPlaintext is wrapped by Listener's error for a listener off loopback
// without TLS.
var ErrPlaintext = errors.New("a listener off loopback without TLS")

// Listener checks the host a node listens on: off loopback (an address
// other than 127.0.0.0/8 and ::1, or a name other than localhost, which
// includes the unspecified 0.0.0.0 and ::), it needs TLS, unless
// allowPlaintext. It reports whether the listener is plaintext off
// loopback, for the caller's warning.
func Listener(option, host string, tls, allowPlaintext bool, allowOption string) (plaintextOff bool, err error) {
	if tls || Loopback(host) {
		return false, nil
	}
	if !allowPlaintext {
		return false, fmt.Errorf("%s host %q is not loopback, and there is no TLS: %w would let anyone on the network read and alter the traffic between the nodes; set TLS, or %s to accept that", option, host, ErrPlaintext, allowOption)
	}
	return true, nil
}

// Loopback reports whether host is a loopback address or "localhost".
func Loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// NewSecret returns a random secret of 32 bytes, hex-encoded, for programs
// that start every node of a cluster themselves (a demo, a benchmark, a
// test) and hand it to their children through EnvSecret.
func NewSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ProbeTLS says why the node at addr refuses this node's connections at
// TLS, or "" when TLS is not the reason (or it cannot tell). client is
// this node's client configuration, nil when it has no TLS. It dials addr
// once and reads what the peer sends first, within timeout.
func ProbeTLS(addr string, client *tls.Config, timeout time.Duration) string {
	d := &net.Dialer{Timeout: timeout}
	if client == nil {
		// A plaintext node: does the peer speak TLS? Only the handshake is
		// wanted, not its certificate.
		conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // a probe of the protocol only
		if err != nil {
			return ""
		}
		conn.Close()
		return "the peer speaks TLS and this node has none configured"
	}
	cfg := client.Clone()
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	conn, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		var record tls.RecordHeaderError
		var unknown x509.UnknownAuthorityError
		var host x509.HostnameError
		var alert tls.AlertError
		switch {
		case errors.As(err, &record):
			return "the peer does not speak TLS (a plaintext node)"
		case errors.As(err, &unknown):
			return "the peer's certificate is not signed by this node's CA (unknown authority): " + err.Error()
		case errors.As(err, &host):
			return "the peer's certificate is not for the name dialled: " + err.Error()
		case errors.As(err, &alert):
			return "the peer refused the handshake: " + err.Error()
		case strings.Contains(err.Error(), "tls:"):
			return "the handshake failed: " + err.Error()
		}
		return ""
	}
	defer conn.Close()
	// With TLS 1.3 the peer checks this node's certificate after the
	// handshake has completed here: its refusal is the first thing read.
	_ = conn.SetReadDeadline(time.Now().Add(timeout))
	if _, err := conn.Read(make([]byte, 1)); err != nil {
		var alert tls.AlertError
		if errors.As(err, &alert) || strings.Contains(err.Error(), "remote error: tls") {
			return "the peer refused this node's certificate (is it signed by the cluster's CA?): " + err.Error()
		}
	}
	return ""
}
