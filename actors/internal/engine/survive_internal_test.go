package engine

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestSurvivePanicsEndsTheStream: a stream handler that panics the way
// protoactor-go's endpoint reader does during a shutdown (a method on a
// nil *sync.Map) ends its stream with an Internal error and a log line;
// a handler that returns keeps its result.
func TestSurvivePanicsEndsTheStream(t *testing.T) {
	var buf bytes.Buffer
	intercept := survivePanics(slog.New(slog.NewTextHandler(&buf, nil)))
	info := &grpc.StreamServerInfo{FullMethod: "/remote.Remoting/Receive"}
	var connections *sync.Map // what Shutdown leaves behind
	err := intercept(nil, nil, info, func(any, grpc.ServerStream) error {
		connections.Load("127.0.0.1:1")
		return nil
	})
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "panicked") {
		t.Errorf("panicking handler: err = %v, want an Internal error that says it panicked", err)
	}
	if !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "/remote.Remoting/Receive") {
		t.Errorf("log = %q, want a warning naming the method", buf.String())
	}
	want := status.Error(codes.Unavailable, "gone")
	if err := intercept(nil, nil, info, func(any, grpc.ServerStream) error { return want }); err != want {
		t.Errorf("returning handler: err = %v, want %v", err, want)
	}
}
