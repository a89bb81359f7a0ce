package main

import (
	"context"
	"log/slog"
)

// quietProtoactor is a slog handler that drops the records of
// protoactor-go's own log (a logger with component=protoactor) below Warn:
// it logs every connection at Info, which buries the job's story.
type quietProtoactor struct {
	slog.Handler
	quiet bool // this handler's logger is protoactor-go's
}

// Enabled implements slog.Handler.
func (h quietProtoactor) Enabled(ctx context.Context, l slog.Level) bool {
	if h.quiet && l < slog.LevelWarn {
		return false
	}
	return h.Handler.Enabled(ctx, l)
}

// WithAttrs implements slog.Handler.
func (h quietProtoactor) WithAttrs(attrs []slog.Attr) slog.Handler {
	quiet := h.quiet
	for _, a := range attrs {
		if a.Key == "component" && a.Value.String() == "protoactor" {
			quiet = true
		}
	}
	return quietProtoactor{Handler: h.Handler.WithAttrs(attrs), quiet: quiet}
}

// WithGroup implements slog.Handler.
func (h quietProtoactor) WithGroup(name string) slog.Handler {
	return quietProtoactor{Handler: h.Handler.WithGroup(name), quiet: h.quiet}
}
