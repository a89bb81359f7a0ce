package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"

	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/actors/cluster"
	"github.com/snapflow/snapflow/topology"
)

// errSignalled is the cause of the context of a process stopped by SIGINT or
// SIGTERM.
var errSignalled = errors.New("stopped by a signal")

// faults returns the worker's injected faults (test flags), nil when none.
func (o options) faults() *actorstest.Faults {
	if o.loseFrom == 0 {
		return nil
	}
	// Every batch from seq loseFrom on, on the channels from this worker's
	// sources to other nodes, is lost in the first incarnation, as a cut
	// link would lose it: the senders soon wait for credit that never
	// comes, and no later batch shows the gap.
	var lost, healed atomic.Bool
	return &actorstest.Faults{RemoteBatch: func(from, to string, seq uint64) actorstest.BatchFault {
		switch {
		case healed.Load() || !strings.HasPrefix(from, "source#"):
		case seq >= uint64(o.loseFrom):
			if !lost.Swap(true) {
				fmt.Fprintf(os.Stderr, "losing the batches from %s to %s from seq %d on\n", from, to, seq)
			}
			return actorstest.Drop
		case lost.Load() && seq == 1: // a new incarnation: the link is back
			healed.Store(true)
		}
		return actorstest.Deliver
	}}
}

// runWorker serves the job's tasks until the coordinator ends the job (nil)
// or ctx ends: a worker stopped by a signal also returns nil, once it has
// cleaned up.
func runWorker(ctx context.Context, o options, stdout io.Writer, logger *slog.Logger) error {
	out := &lineWriter{w: stdout}
	err := cluster.ServeWorker(ctx, cluster.Worker{
		Join:            o.join,
		Listen:          o.listen,
		Slots:           o.slots,
		Jobs:            []func() *topology.Graph{func() *topology.Graph { return buildJob(o.job) }},
		TLS:             o.tls(),
		Secret:          o.secret,
		RegisterTimeout: o.registerTimeout,
		Logger:          logger,
		AllowPlaintext:  o.allowPlaintext,
		Listening:       func(addr string) { out.println(listeningPrefix + addr) },
		Faults:          o.faults(),
	})
	switch {
	case err == nil:
		logger.Info("the coordinator ended the job; the worker exits")
		return nil
	case errors.Is(err, errSignalled) && ctx.Err() != nil:
		logger.Info("worker stopped by a signal")
		return nil
	case errors.Is(err, cluster.ErrRegister):
		return fmt.Errorf("worker could not register with the coordinator at %s: %w", o.join, err)
	}
	return err
}
