package engine

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestProtoactorLoggerLowers: protoactor-go's connection messages go to
// Debug (a lost connection, a failed reconnect) or Warn (a stream refused,
// which says why); its other messages keep their level.
func TestProtoactorLoggerLowers(t *testing.T) {
	var buf bytes.Buffer
	log := protoactorLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	log.Error("EndpointWriter lost connection", "address", "127.0.0.1:1")
	log.Error("EndpointWriter failed to connect", "address", "127.0.0.1:1")
	log.Error("EndpointWriter failed to create receive stream", "error", "Unauthenticated")
	log.Error("EndpointWriter failed to create receive stream", "address", "127.0.0.1:2", "error", "connect: connection refused")
	log.Error("EndpointReader failed to deserialize")
	out := buf.String()
	for _, want := range []string{
		`level=WARN msg="EndpointWriter failed to create receive stream" component=protoactor error=Unauthenticated`,
		`level=ERROR msg="EndpointReader failed to deserialize" component=protoactor`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "lost connection") || strings.Contains(out, "failed to connect") || strings.Contains(out, "connection refused") {
		t.Errorf("connection ends logged above Debug:\n%s", out)
	}
	buf.Reset()
	debug := protoactorLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	debug.Error("EndpointWriter lost connection")
	if !strings.Contains(buf.String(), `level=DEBUG msg="EndpointWriter lost connection"`) {
		t.Errorf("a lost connection at Debug: %q", buf.String())
	}
}
