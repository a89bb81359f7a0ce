package engine

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/internal/nodeauth"
)

// A flood of refused connections from one host (a port scan, a peer that
// retries) is logged at the first refusal and at doublings of the count,
// not once a connection; another host's first refusal is logged at once.
func TestRefusedLoggerThrottles(t *testing.T) {
	var buf bytes.Buffer
	logRefused := refusedLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	const n = 1000
	for i := range n {
		nodeauth.Rejected.Add(1)
		logRefused(nodeauth.Refusal{Peer: fmt.Sprintf("127.0.0.2:%d", 30000+i), Reason: "no handshake"})
	}
	lines := strings.Count(buf.String(), "\n")
	if lines == 0 || lines > 12 {
		t.Fatalf("%d refusals from one host logged %d lines, want 1 to 12:\n%s", n, lines, buf.String())
	}
	if !strings.Contains(buf.String(), "peer=127.0.0.2:30000 ") {
		t.Errorf("the first refusal was not logged:\n%s", buf.String())
	}
	buf.Reset()
	nodeauth.Rejected.Add(1)
	logRefused(nodeauth.Refusal{Peer: "127.0.0.3:40000", Reason: "no handshake", TLS: true})
	if !strings.Contains(buf.String(), "refused a TLS handshake") || !strings.Contains(buf.String(), "peer=127.0.0.3:40000") {
		t.Errorf("another host's first refusal was not logged at once: %q", buf.String())
	}
}
