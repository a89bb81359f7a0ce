package nexmark_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/nexmark"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// BenchmarkQ5Slides runs q5 over 10s windows sliding every 1s and every
// 5s, checkpoints off, for profiles of the window operator (go test
// -bench Q5 -cpuprofile). b.N counts runs of 2M events.
func BenchmarkQ5Slides(b *testing.B) {
	q, _ := nexmark.QueryNamed("q5")
	for _, slide := range []time.Duration{time.Second, 5 * time.Second} {
		b.Run(fmt.Sprint(slide), func(b *testing.B) {
			c := nexmark.Config{Events: 2_000_000, OutOfOrder: 10 * time.Millisecond, Seed: 1}
			p := nexmark.Params{Parallelism: 2, Window: 10 * time.Second, Slide: slide}
			for i := range b.N {
				g := topology.New(fmt.Sprintf("q5-%d", i))
				out := q.Build(nexmark.Source(g, "events", c, topology.Parallelism(2)), p)
				out.Discard("rows", func(int) {})
				if err := actors.Run(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithCheckpointInterval(0),
					actors.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(c.Events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkQueries runs each query over 2M events with checkpoints off,
// for profiles (go test -bench Queries/q4 -cpuprofile).
func BenchmarkQueries(b *testing.B) {
	for _, q := range nexmark.Queries {
		b.Run(q.Name, func(b *testing.B) {
			c := nexmark.Config{Events: 2_000_000, OutOfOrder: 10 * time.Millisecond, Seed: 1}
			for i := range b.N {
				g := topology.New(fmt.Sprintf("%s-%d", q.Name, i))
				out := q.Build(nexmark.Source(g, "events", c, topology.Parallelism(2)), nexmark.Params{Parallelism: 2})
				out.Discard("rows", func(int) {})
				if err := actors.Run(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithCheckpointInterval(0),
					actors.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(c.Events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
