package chaos

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/topology"
	"github.com/snapflow/snapflow/topology/filesink"
)

// The event-time shape's parameters.
const (
	etWindow     = 10 * time.Millisecond // tumbling event-time windows
	etOutOfOrder = 5 * time.Millisecond  // a split's records are up to 4ms out of order
	etViewsBase  = 1000                  // the views' keys are etViewsBase + a click key
	etRun        = 8                     // records of one split per read
	etSinkTasks  = 2                     // a two-phase-commit sink keeps its parallelism
)

var etBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// etTime is the event time of a click (key, seq): seq milliseconds from the
// base, up to 4ms earlier, within the out-of-orderness; but every 97th is
// 30ms behind, beyond it, and usually late.
func etTime(key, seq int64) int64 {
	behind := (key*7919 + seq*104729) % 5
	if seq%97 == 0 {
		behind = 30
	}
	return etBase + (seq-behind)*int64(time.Millisecond)
}

// etViewTime is the event time of view seq of a key: views come at half the
// clicks' rate over the same span of event time.
func etViewTime(key, seq int64) int64 { return etTime(key, 2*seq) }

func etWindowEnd(ts int64) int64 { return (ts/int64(etWindow) + 1) * int64(etWindow) }

// Row is a line of the event-time shape's output. Kind is:
//   - 'c': the count of the clicks of Key in the window ending at End (N);
//   - 'j': the join of Key's clicks (N) and views (M) in that window;
//   - 'p': a processing-time timer that the first click of Key in the window
//     registered has fired;
//   - 'l', 'L', 'V': a click (to the counter; to the join) or a view that
//     came after the watermark had passed its window End, with its seq in N.
type Row struct {
	Kind     byte
	Key, End int64
	N, M     int64
}

// String is the row as a line of the output.
func (r Row) String() string { return fmt.Sprintf("%c %d %d %d %d", r.Kind, r.Key, r.End, r.N, r.M) }

func parseRow(line string) (Row, error) {
	var r Row
	var kind string
	if _, err := fmt.Sscanf(line, "%s %d %d %d %d", &kind, &r.Key, &r.End, &r.N, &r.M); err != nil || len(kind) != 1 {
		return r, fmt.Errorf("a committed line %q is not a row: %v", line, err)
	}
	r.Kind = kind[0]
	return r, nil
}

// endWatch learns which keys' splits have been produced to their end, and
// wakes the quiet source once all of them have.
type endWatch struct {
	mu    sync.Mutex
	want  int
	ended map[int64]bool
	wakes []func()
}

func newEndWatch(keys int) *endWatch { return &endWatch{want: keys, ended: map[int64]bool{}} }

func (w *endWatch) mark(splits []keySplit) {
	w.mu.Lock()
	for _, sp := range splits {
		w.ended[sp.key] = true
	}
	var wakes []func()
	if len(w.ended) >= w.want {
		wakes, w.wakes = w.wakes, nil
	}
	w.mu.Unlock()
	for _, wake := range wakes {
		wake()
	}
}

// done reports whether every key has ended; if not, wake is called when
// they have.
func (w *endWatch) done(wake func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.ended) >= w.want {
		return true
	}
	if wake != nil {
		w.wakes = append(w.wakes, wake)
	}
	return false
}

// quietSplits is a split source whose splits hold no records: they are
// idle (see WatermarkStrategy.IdleTimeout) until the other sources have
// ended, and then end.
type quietSplits struct {
	ended  *endWatch
	splits [][]byte
	wake   func()
	asked  bool
}

func (q *quietSplits) SetWake(w func()) { q.wake = w }

func (q *quietSplits) Open(_ context.Context, splits [][]byte) error {
	q.splits = splits
	return nil
}

func (q *quietSplits) Read([]Event) (int, error) {
	var wake func()
	if !q.asked {
		wake, q.asked = q.wake, true
	}
	if q.ended.done(wake) {
		return 0, io.EOF
	}
	return 0, topology.ErrSourceIdle
}

func (q *quietSplits) Splits() [][]byte { return q.splits }
func (q *quietSplits) Close() error     { return nil }

// EventTimeConfig configures the event-time shape.
type EventTimeConfig struct {
	// Dir is where the exactly-once file sink commits the output rows.
	Dir string
	// Quiet adds a source of idle splits (it needs every task in one
	// process: it ends when it learns that the others have).
	Quiet bool
}

// EventTime returns the soak's event-time shape, run in phases of
// different parallelisms ended by savepoints while timers are pending (see
// Run), or as one job with Build. Two split sources with per-split
// watermarks, clicks (keys 0..keys-1, seqs 1..n/keys) and views (keys
// etViewsBase.., half as many keys, at half the density of event time),
// whose records are up to 4ms out of order, and optionally a source of idle
// splits, feed:
//   - count, a keyed process function that counts each key's clicks per
//     10ms event-time window with an event-time timer per window, and
//     registers a processing-time timer with each window's first click;
//   - join, a two-input keyed operator that joins each key's clicks and
//     views per window, with an event-time timer per window.
//
// Records that come after the watermark has passed their window go to
// side outputs. Every row goes through the exactly-once file sink; Verify
// then checks the committed rows against a reference computed in plain Go:
// no row twice, and each window's count plus its late records equal to the
// reference exactly. Which records are late depends on timing (a split
// that went idle, say); that they are all accounted for exactly once does
// not.
func EventTime(cfg EventTimeConfig) Shape {
	rows := filepath.Join(cfg.Dir, "rows")
	var ended *endWatch
	build := func(g *topology.Graph, p int, n int64, rate float64, gate *Gate) {
		perKey := n / keys
		wm := func(ts func(Event) int64, idle time.Duration) topology.Option {
			return topology.WithWatermarks(topology.WatermarkStrategy[Event]{
				Timestamp:      func(e Event) time.Time { return time.Unix(0, ts(e)) },
				OutOfOrderness: etOutOfOrder,
				IdleTimeout:    idle,
			})
		}
		if ended == nil {
			ended = newEndWatch(keys + keys/2)
		}
		clicks := keyedSplitsOf(g, "clicks", 0, keys, perKey, rate, gate, etRun, ended,
			[]topology.Option{topology.Parallelism(p), wm(func(e Event) int64 { return etTime(e.Key, e.Seq) }, time.Second)})
		views := keyedSplitsOf(g, "views", etViewsBase, keys/2, perKey/2, rate, gate, etRun, ended,
			[]topology.Option{topology.Parallelism(max(1, p-1)), wm(func(e Event) int64 { return etViewTime(e.Key-etViewsBase, e.Seq) }, time.Second)})
		counted := clicks
		if cfg.Quiet {
			quiet := topology.FromSplits(g, "quiet", topology.Splits{Initial: func(int) [][]byte { return [][]byte{{'q'}, {'q'}} }},
				func(int, int) topology.SplitSource[Event] { return &quietSplits{ended: ended} },
				topology.Parallelism(1+p%2), wm(func(Event) int64 { return 0 }, 20*time.Millisecond))
			counted = topology.Union(clicks, quiet)
		}
		lateC, lateJ := topology.NewSideOutput[Row]("late"), topology.NewSideOutput[Row]("late")
		counts := topology.Process(topology.KeyBy(counted, func(e Event) int64 { return e.Key }), "count",
			etCount(lateC), topology.Parallelism(p))
		joins := topology.CoProcess(topology.KeyBy(clicks, func(e Event) int64 { return e.Key }),
			topology.KeyBy(views, func(e Event) int64 { return e.Key - etViewsBase }), "join",
			etJoin(lateJ), topology.Parallelism(max(1, MaxPhaseParallelism+1-p)))
		out := topology.Union(counts, joins, topology.SideOutputOf(counts, lateC), topology.SideOutputOf(joins, lateJ))
		topology.TwoPhaseCommitSink(out, "rows", filesink.New(rows, filesink.Lines(Row.String)), topology.Parallelism(etSinkTasks))
	}
	return Shape{
		Name: "eventtime",
		Build: func(g *topology.Graph, n int64, rate float64, _ *Injector, _ *Violations) *Sink {
			build(g, 2, n, rate, nil)
			return nil
		},
		BuildPhase: func(g *topology.Graph, ph Phase, n int64, rate float64, _ *Injector, _ *Sink) {
			build(g, ph.Parallelism, n, rate, ph.Gate)
		},
		Verify: func(n int64, res *RunResult) error {
			return verifyEventTime(rows, n, res)
		},
		CheckSavepoint: checkTimersPending,
	}
}

// etCount is the count operator: clicks per key and window.
func etCount(late topology.SideOutput[Row]) func(*topology.KeyedSetup[int64]) topology.ProcessFunc[int64, Event, Row] {
	return func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, Event, Row] {
		counts := topology.MapOf[int64, int64](s, "count") // window end -> clicks
		procs := topology.MapOf[int64, int64](s, "procs")  // processing-time timer -> window end
		topology.OnTimer(s, func(ctx *topology.Context[int64], tm topology.Timer, out *topology.Collector[Row]) error {
			at := tm.Time.UnixNano()
			if tm.Domain == topology.ProcessingTime {
				if end, ok := procs.Get(at); ok {
					procs.Delete(at)
					out.Emit(Row{Kind: 'p', Key: ctx.Key(), End: end})
				}
				return nil
			}
			c, ok := counts.Get(at)
			if !ok {
				return fmt.Errorf("count: key %d: the timer of window %d fired without its count", ctx.Key(), at)
			}
			counts.Delete(at)
			out.Emit(Row{Kind: 'c', Key: ctx.Key(), End: at, N: c})
			return nil
		})
		return func(ctx *topology.Context[int64], e Event, _ *topology.Collector[Row]) error {
			end, isLate := etWindowOf(ctx)
			if isLate {
				late.Emit(ctx, Row{Kind: 'l', Key: e.Key, End: end, N: e.Seq})
				return nil
			}
			c, ok := counts.Get(end)
			if !ok {
				ctx.RegisterEventTimer(time.Unix(0, end))
				at := time.Now().Add(time.Millisecond)
				ctx.RegisterProcessingTimer(at)
				procs.Put(at.UnixNano(), end)
			}
			counts.Put(end, c+1)
			return nil
		}
	}
}

// etWindowOf returns the window of the record in hand, and whether the
// watermark has passed it (its timer has fired).
func etWindowOf(ctx *topology.Context[int64]) (end int64, late bool) {
	ts, _ := ctx.Timestamp()
	end = etWindowEnd(ts.UnixNano())
	wm, ok := ctx.Watermark()
	return end, ok && end <= wm.UnixNano()
}

// etJoin is the join operator: clicks and views per key and window.
func etJoin(late topology.SideOutput[Row]) func(*topology.KeyedSetup[int64]) topology.CoProcessFunc[int64, Event, Event, Row] {
	return func(s *topology.KeyedSetup[int64]) topology.CoProcessFunc[int64, Event, Event, Row] {
		clicks := topology.MapOf[int64, int64](s, "clicks") // window end -> count
		views := topology.MapOf[int64, int64](s, "views")
		topology.OnTimer(s, func(ctx *topology.Context[int64], tm topology.Timer, out *topology.Collector[Row]) error {
			end := tm.Time.UnixNano()
			c, _ := clicks.Get(end)
			v, _ := views.Get(end)
			clicks.Delete(end)
			views.Delete(end)
			out.Emit(Row{Kind: 'j', Key: ctx.Key(), End: end, N: c, M: v})
			return nil
		})
		side := func(m *topology.MapState[int64, int64, int64], kind byte) topology.ProcessFunc[int64, Event, Row] {
			return func(ctx *topology.Context[int64], e Event, _ *topology.Collector[Row]) error {
				end, isLate := etWindowOf(ctx)
				if isLate {
					late.Emit(ctx, Row{Kind: kind, Key: ctx.Key(), End: end, N: e.Seq})
					return nil
				}
				c, ok := m.Get(end)
				if !ok {
					ctx.RegisterEventTimer(time.Unix(0, end)) // once per window: one timer per key and time
				}
				m.Put(end, c+1)
				return nil
			}
		}
		return topology.CoProcessFunc[int64, Event, Event, Row]{First: side(clicks, 'L'), Second: side(views, 'V')}
	}
}

// etWindowKey is a key's window.
type etWindowKey struct{ key, end int64 }

// etReference computes, in plain Go, the clicks and views of each key's
// windows over n records.
func etReference(n int64) (clicks, views map[etWindowKey]int64) {
	clicks, views = map[etWindowKey]int64{}, map[etWindowKey]int64{}
	perKey := n / keys
	for k := range int64(keys) {
		for s := int64(1); s <= perKey; s++ {
			clicks[etWindowKey{k, etWindowEnd(etTime(k, s))}]++
		}
		if k < keys/2 {
			for s := int64(1); s <= perKey/2; s++ {
				views[etWindowKey{k, etWindowEnd(etViewTime(k, s))}]++
			}
		}
	}
	return clicks, views
}

// readRows reads the committed rows under dir.
func readRows(dir string) ([]Row, error) {
	lines, err := readLines(dir)
	if err != nil {
		return nil, err
	}
	rows := make([]Row, len(lines))
	for i, l := range lines {
		if rows[i], err = parseRow(l); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// verifyEventTime checks the committed rows against the reference (see
// EventTime) and counts them into res.
func verifyEventTime(dir string, n int64, res *RunResult) error {
	rows, err := readRows(dir)
	if err != nil {
		return err
	}
	refClicks, refViews := etReference(n)
	var problems []string
	bad := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	seen := map[string]bool{}
	counted := map[etWindowKey]int64{}   // clicks in 'c' rows and 'l' rows
	joined := map[etWindowKey][2]int64{} // clicks, views in 'j', 'L' and 'V' rows
	for _, r := range rows {
		id := string(r.Kind) + " " + fmt.Sprint(r.Key, r.End)
		if r.Kind == 'l' || r.Kind == 'L' || r.Kind == 'V' {
			id = string(r.Kind) + " " + fmt.Sprint(r.Key, r.N) // a record
		}
		if seen[id] {
			bad("row %q committed twice", r)
		}
		seen[id] = true
		w := etWindowKey{r.Key, r.End}
		j := joined[w]
		switch r.Kind {
		case 'c':
			counted[w] += r.N
			res.TimersFired++
		case 'j':
			j[0], j[1] = j[0]+r.N, j[1]+r.M
			res.TimersFired++
		case 'p':
			if refClicks[w] == 0 {
				bad("processing-time timer row %q for a window without clicks", r)
			}
			res.ProcTimersFired++
		case 'l':
			counted[w]++
			res.Late++
			if etWindowEnd(etTime(r.Key, r.N)) != r.End {
				bad("late click row %q: the click is of window %d", r, etWindowEnd(etTime(r.Key, r.N)))
			}
		case 'L':
			j[0]++
			res.Late++
		case 'V':
			j[1]++
			res.Late++
			if etWindowEnd(etViewTime(r.Key, r.N)) != r.End {
				bad("late view row %q: the view is of window %d", r, etWindowEnd(etViewTime(r.Key, r.N)))
			}
		default:
			bad("row %q of unknown kind", r)
		}
		joined[w] = j
	}
	for w, want := range refClicks {
		if got := counted[w]; got != want {
			bad("count: key %d window %d: %d clicks in rows, want %d", w.key, w.end, got, want)
		}
		if got := joined[w][0]; got != want {
			bad("join: key %d window %d: %d clicks in rows, want %d", w.key, w.end, got, want)
		}
	}
	for w, want := range refViews {
		if got := joined[w][1]; got != want {
			bad("join: key %d window %d: %d views in rows, want %d", w.key, w.end, got, want)
		}
	}
	for w := range counted {
		if refClicks[w] == 0 {
			bad("count: key %d window %d has rows, but no clicks", w.key, w.end)
		}
	}
	for w := range joined {
		if refClicks[w] == 0 && refViews[w] == 0 {
			bad("join: key %d window %d has rows, but no records", w.key, w.end)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("event-time output (%d rows) differs from the reference:\n  %s", len(rows), strings.Join(problems, "\n  "))
	}
	return nil
}

// checkTimersPending counts the pending event-time timers of a savepoint
// of the event-time shape, which the rescale moves, into res. (A savepoint
// may hold none: a recovery may have rolled the sources back to the start
// after they had reached the phase's gate.)
func checkTimersPending(name string, states map[string]*messages.TaskState, res *RunResult) error {
	event := 0
	for _, st := range states {
		e, _, err := topology.PendingTimers(st)
		if err != nil {
			return fmt.Errorf("savepoint %s: task %s: %w", name, st.GetTaskId(), err)
		}
		event += e
	}
	res.PendingAtSavepoints += event
	return nil
}
