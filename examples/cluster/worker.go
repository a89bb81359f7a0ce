package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/topology"
)

// errSignalled is the cause of the context of a process stopped by SIGINT or
// SIGTERM.
var errSignalled = errors.New("stopped by a signal")

// runWorker serves the job's tasks until the coordinator ends the job (nil)
// or ctx ends: a worker stopped by a signal also returns nil, once it has
// cleaned up.
func runWorker(ctx context.Context, o options, stdout io.Writer, logger *slog.Logger) error {
	out := &lineWriter{w: stdout}
	err := actors.ServeWorker(ctx, actors.Worker{
		Join:            o.join,
		Listen:          o.listen,
		Slots:           o.slots,
		Jobs:            []func() *topology.Graph{func() *topology.Graph { return buildJob(o.job) }},
		TLS:             o.tls(),
		Secret:          o.secret,
		RegisterTimeout: o.registerTimeout,
		Logger:          logger,
		Listening:       func(addr string) { out.println(listeningPrefix + addr) },
	})
	switch {
	case err == nil:
		logger.Info("the coordinator ended the job; the worker exits")
		return nil
	case errors.Is(err, errSignalled) && ctx.Err() != nil:
		logger.Info("worker stopped by a signal")
		return nil
	case errors.Is(err, actors.ErrRegister):
		return fmt.Errorf("worker could not register with the coordinator at %s: %w", o.join, err)
	}
	return err
}
