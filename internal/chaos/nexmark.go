package chaos

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/snapflow/snapflow/internal/nexmark"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/topology"
	"github.com/snapflow/snapflow/topology/filesink"
	"github.com/snapflow/snapflow/topology/window"
)

// NexmarkConfig configures the Nexmark shape.
type NexmarkConfig struct {
	// Dir is where the exactly-once file sink commits the query's rows.
	Dir string
	// Query is the query's name (q5, q11, ...).
	Query string
}

// nexmarkSplits is the Nexmark source's splits: at least the highest
// parallelism of a phase, so that every source task has one.
const nexmarkSplits = 2 * MaxPhaseParallelism

// nexmarkParams are the query's windows, scaled to the soak's short
// stream: 100,000 events per second of event time.
var nexmarkParams = nexmark.Params{Window: 40 * time.Millisecond, Slide: 10 * time.Millisecond, Gap: 5 * time.Millisecond}

// splitGate is a Gate over the Nexmark source's splits.
type splitGate struct{ g *Gate }

func (s splitGate) Limit(_ int, length int64) int64 { return s.g.limit(length) }
func (s splitGate) Reached(split int)               { s.g.reach(int64(split)) }

// Nexmark returns a soak shape that runs one Nexmark query in phases of
// different parallelisms ended by savepoints (every operator but the
// two-phase-commit sink is rescaled), with its rows committed by the
// exactly-once file sink. Verify compares the committed rows with the
// query's plain Go reference over the same events: equal, row for row,
// with no row twice.
func Nexmark(cfg NexmarkConfig) (Shape, error) {
	q, ok := nexmark.QueryNamed(cfg.Query)
	if !ok {
		return Shape{}, fmt.Errorf("chaos: no Nexmark query %q", cfg.Query)
	}
	rows := filepath.Join(cfg.Dir, "rows")
	stream := func(n int64, rate float64, gate *Gate) nexmark.Config {
		c := nexmark.Config{Events: n, Splits: nexmarkSplits, OutOfOrder: 2 * time.Millisecond, Seed: 24, Pace: rate}
		if gate != nil {
			c.Gate = splitGate{gate}
		}
		return c
	}
	build := func(g *topology.Graph, p int, n int64, rate float64, gate *Gate) {
		c := stream(n, rate, gate)
		if gate != nil {
			// Every split registers; the gate opens once each has read
			// up to its limit (the splits' lengths differ by at most one).
			gate.register(0, nexmarkSplits, n/nexmarkSplits)
		}
		params := nexmarkParams
		params.Parallelism = p
		out := q.Build(nexmark.Source(g, "events", c, topology.Parallelism(p)), params)
		topology.TwoPhaseCommitSink(out.Lines(), "rows", filesink.New(rows, filesink.Lines(func(s string) string { return s })),
			topology.Parallelism(etSinkTasks))
	}
	return Shape{
		Name: "nexmark-" + q.Name,
		Build: func(g *topology.Graph, n int64, rate float64, _ *Injector, _ *Violations) *Sink {
			build(g, 2, n, rate, nil)
			return nil
		},
		BuildPhase: func(g *topology.Graph, ph Phase, n int64, rate float64, _ *Injector, _ *Sink) {
			build(g, ph.Parallelism, n, rate, ph.Gate)
		},
		Verify: func(n int64, res *RunResult) error {
			got, err := readLines(rows)
			if err != nil {
				return err
			}
			want := q.Reference(stream(n, 0, nil), nexmarkParams)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				return fmt.Errorf("nexmark %s: %d rows committed, the reference has %d; %s", q.Name, len(got), len(want), firstLineDiff(got, want))
			}
			res.Rows += len(got)
			return nil
		},
		CheckSavepoint: func(_ string, states map[string]*messages.TaskState, res *RunResult) error {
			for _, st := range states {
				res.OpenWindows += window.OpenWindows(st)
			}
			return nil
		},
	}, nil
}

// readLines reads the committed part files' lines, file by file in name
// order.
func readLines(dir string) ([]string, error) {
	parts, err := filepath.Glob(filepath.Join(dir, "part-*"))
	if err != nil {
		return nil, err
	}
	slices.Sort(parts)
	var lines []string
	for _, p := range parts {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(p), err)
		}
	}
	return lines, nil
}

func firstLineDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("first difference at row %d: %q, want %q", i, got[i], want[i])
		}
	}
	return "one is a prefix of the other"
}
