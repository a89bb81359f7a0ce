package nodeauth_test

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/nodeauth"
	"google.golang.org/grpc"
)

// TestProbeTLSPlaintextPeer: a node with TLS probing a plaintext gRPC
// server learns that the peer does not speak TLS; a plaintext node probing
// it learns nothing about TLS (it is not the reason).
func TestProbeTLSPlaintextPeer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	go func() { _ = s.Serve(l) }()
	defer s.Stop()
	got := nodeauth.ProbeTLS(l.Addr().String(), &tls.Config{MinVersion: tls.VersionTLS13}, 10*time.Second)
	if !strings.Contains(got, "does not speak TLS") {
		t.Errorf("a TLS node probing a plaintext peer: %q", got)
	}
	if got := nodeauth.ProbeTLS(l.Addr().String(), nil, 10*time.Second); got != "" {
		t.Errorf("a plaintext node probing a plaintext peer: %q, want nothing", got)
	}
}
