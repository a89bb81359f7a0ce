package engine

import (
	"context"
	"log/slog"
	"strings"
)

// protoactorLogger returns the logger of protoactor-go's own log: base,
// with component=protoactor, and the connection messages of its remote
// package lowered. It logs at Error every connection that ends or cannot be
// made, also when a node ends on purpose (every normal end of a cluster
// job) and when a lost node is retried; snapflow reports the losses that
// matter itself ("worker lost", "lost the coordinator"), so those go to
// Debug. A stream that the peer refused goes to Warn: it carries why (a
// refused handshake, a TLS mismatch); one that cannot be opened because the
// peer is gone goes to Debug too.
func protoactorLogger(base *slog.Logger) *slog.Logger {
	return slog.New(loweredHandler{base.Handler()}).With("component", "protoactor")
}

// loweredLevels are the levels given to protoactor-go's messages.
var loweredLevels = map[string]slog.Level{
	"EndpointWriter lost connection":                                  slog.LevelDebug,
	"EndpointWriter failed to connect":                                slog.LevelDebug,
	"EndpointWriter error when closing the stream":                    slog.LevelDebug,
	"EndpointWriter error when closing the client conn":               slog.LevelDebug,
	"EndpointReader failed to send disconnection message":             slog.LevelDebug,
	"EndpointWatcher receive message for already terminated endpoint": slog.LevelDebug,
	"EndpointWriter failed to create receive stream":                  slog.LevelWarn,
	"EndpointWriter failed to send connect request":                   slog.LevelWarn,
	"EndpointWriter failed to receive connect response":               slog.LevelWarn,
}

type loweredHandler struct{ slog.Handler }

// refusal reports whether r's error says that the peer refused the
// stream (another secret, a TLS mismatch), rather than that it is gone.
func refusal(r slog.Record) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "error" {
			e := a.Value.String()
			found = strings.Contains(e, "Unauthenticated") || strings.Contains(e, "tls:") ||
				strings.Contains(e, "certificate") || strings.Contains(e, "handshake")
		}
		return !found
	})
	return found
}

// Enabled is true when the handler takes Debug records too: a record's
// level is known only in Handle.
func (h loweredHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, l) || (l > slog.LevelDebug && h.Handler.Enabled(ctx, slog.LevelDebug))
}

func (h loweredHandler) Handle(ctx context.Context, r slog.Record) error {
	if l, ok := loweredLevels[r.Message]; ok && l < r.Level {
		r.Level = l
		if l == slog.LevelWarn && !refusal(r) {
			r.Level = slog.LevelDebug // a peer that is gone: its loss is reported by snapflow
		}
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h loweredHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return loweredHandler{h.Handler.WithAttrs(attrs)}
}

func (h loweredHandler) WithGroup(name string) slog.Handler {
	return loweredHandler{h.Handler.WithGroup(name)}
}
