package window_test

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/internal/leaktest"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
	"github.com/snapflow/snapflow/topology/window"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// event is a test record: a key and an event time in ms.
type event struct {
	Key int64
	At  int64 // ms
	Seq int64
}

const bound = 50 // ms out of order at most

// events makes n events over keys, in time order but up to bound ms out
// of order, and every lateEvery-th (0: none) far behind.
func events(seed uint64, n, keys int, lateEvery int) []event {
	rng := rand.New(rand.NewPCG(seed, 1))
	es := make([]event, n)
	for i := range es {
		at := int64(i) + rng.Int64N(bound)
		if lateEvery > 0 && i%lateEvery == lateEvery-1 {
			at -= 3000
		}
		es[i] = event{Key: rng.Int64N(int64(keys)), At: max(at, 0), Seq: int64(i)}
	}
	return es
}

func ms(x int64) time.Time { return time.UnixMilli(x).UTC() }

// row is an output row as the tests compare them.
type row struct {
	Key        int64
	Start, End int64 // ms
	Value      int64
}

func rowOf[V int64 | event](r window.Result[int64, V], value func(V) int64) row {
	return row{r.Key, r.Window.Start.UnixMilli(), r.Window.End.UnixMilli(), value(r.Value)}
}

func sortRows(rs []row) []row {
	slices.SortFunc(rs, func(a, b row) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Start, b.Start), cmp.Compare(a.End, b.End), cmp.Compare(a.Value, b.Value))
	})
	return rs
}

// collect is a sink's rows, safe for concurrent tasks.
type collect[T any] struct {
	mu   sync.Mutex
	rows []T
}

func (c *collect[T]) write(v T) error {
	c.mu.Lock()
	c.rows = append(c.rows, v)
	c.mu.Unlock()
	return nil
}

func source(g *topology.Graph, es []event) topology.Stream[event] {
	return topology.FromSource(g, "events", func(sub, p int) topology.Source[event] { return &slice{es: es, at: sub, step: p} }, topology.Parallelism(2),
		topology.WithWatermarks(topology.WatermarkStrategy[event]{
			Timestamp:      func(e event) time.Time { return ms(e.At) },
			OutOfOrderness: bound * time.Millisecond,
		}))
}

func run(t *testing.T, g *topology.Graph, opts ...actors.Option) {
	t.Helper()
	opts = append([]actors.Option{actors.WithStore(snapshots.NewMem()), actors.WithCheckpointInterval(5 * time.Millisecond),
		actors.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)
	if err := actors.Run(context.Background(), g, opts...); err != nil {
		t.Fatal(err)
	}
}

// reference counts es per window the way the definitions say.
func reference(es []event, windowsOf func(ts int64) [][2]int64) []row {
	m := map[row]int64{}
	for _, e := range es {
		for _, w := range windowsOf(e.At) {
			m[row{Key: e.Key, Start: w[0], End: w[1]}]++
		}
	}
	var rs []row
	for r, n := range m {
		r.Value = n
		rs = append(rs, r)
	}
	return sortRows(rs)
}

func sessionsReference(es []event, gap int64) []row {
	byKey := map[int64][]int64{}
	for _, e := range es {
		byKey[e.Key] = append(byKey[e.Key], e.At)
	}
	var rs []row
	for k, ts := range byKey {
		slices.Sort(ts)
		cur := row{Key: k, Start: ts[0], End: ts[0] + gap, Value: 1}
		for _, x := range ts[1:] {
			if x <= cur.End {
				cur.End, cur.Value = max(cur.End, x+gap), cur.Value+1
				continue
			}
			rs = append(rs, cur)
			cur = row{Key: k, Start: x, End: x + gap, Value: 1}
		}
		rs = append(rs, cur)
	}
	return sortRows(rs)
}

func countRows(rs []window.Result[int64, int64]) []row {
	out := make([]row, len(rs))
	for i, r := range rs {
		out[i] = rowOf(r, func(n int64) int64 { return n })
	}
	return sortRows(out)
}

func keyed(s topology.Stream[event]) topology.KeyedStream[event, int64] {
	return topology.KeyBy(s, func(e event) int64 { return e.Key })
}

// TestCountMatchesDefinitions runs each assigner over out-of-order events
// (none late) and compares every row with the definitions', exactly.
func TestCountMatchesDefinitions(t *testing.T) {
	es := events(1, 20000, 37, 0)
	cases := []struct {
		name string
		spec window.Spec
		want []row
	}{
		{"tumbling", window.Tumbling(100 * time.Millisecond), reference(es, func(ts int64) [][2]int64 {
			s := ts - ts%100
			return [][2]int64{{s, s + 100}}
		})},
		{"tumbling-offset", window.Tumbling(100 * time.Millisecond).WithOffset(30 * time.Millisecond), reference(es, func(ts int64) [][2]int64 {
			s := ts - (ts-30+100)%100
			return [][2]int64{{s, s + 100}}
		})},
		{"sliding", window.Sliding(300*time.Millisecond, 50*time.Millisecond), reference(es, func(ts int64) (ws [][2]int64) {
			for s := ts - ts%50; s > ts-300; s -= 50 {
				ws = append(ws, [2]int64{s, s + 300})
			}
			return ws
		})},
		{"sessions", window.Sessions(120 * time.Millisecond), sessionsReference(es, 120)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := topology.New("windows-" + c.name)
			counts := window.Count(window.Of(keyed(source(g, es)), c.spec), "count", topology.Parallelism(3))
			var got collect[window.Result[int64, int64]]
			topology.Sink(counts, "out", got.write)
			run(t, g)
			if rs := countRows(got.rows); !slices.Equal(rs, c.want) {
				t.Fatalf("%d rows, want %d; first difference: %s", len(rs), len(c.want), firstDiff(rs, c.want))
			}
			if c.name == "sessions" && len(c.want) >= len(es)/2 {
				t.Fatalf("only %d sessions merged from %d events: the test does not exercise merging", len(es)-len(c.want), len(es))
			}
		})
	}
}

func firstDiff(got, want []row) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("row %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(got), len(want))
}

// TestAggregateReduceProcessAgree computes the same per-window sum three
// ways on sliding windows, with a failure restored from a checkpoint in
// each, and requires the rows to equal the definition's.
func TestAggregateReduceProcessAgree(t *testing.T) {
	es := events(2, 20000, 23, 0)
	want := map[row]int64{}
	for _, e := range es {
		for s := e.At - e.At%40; s > e.At-200; s -= 40 {
			want[row{Key: e.Key, Start: s, End: s + 200}] += e.Seq
		}
	}
	spec := window.Sliding(200*time.Millisecond, 40*time.Millisecond)
	sum := func(a, b int64) int64 { return a + b }
	for _, kind := range []string{"aggregate", "reduce", "process"} {
		t.Run(kind, func(t *testing.T) {
			g := topology.New("sum-" + kind)
			w := window.Of(keyed(source(g, es)), spec)
			var out topology.Stream[window.Result[int64, int64]]
			switch kind {
			case "aggregate":
				out = window.Aggregate(w, "sum", window.Aggregator[event, int64, int64]{
					Add: func(a int64, e event) int64 { return a + e.Seq }, Merge: sum,
				}, topology.Parallelism(2))
			case "reduce":
				r := window.Reduce(w, "sum", func(a, b event) event { return event{Key: a.Key, Seq: a.Seq + b.Seq} }, nil, topology.Parallelism(2))
				out = topology.Map(r, "value", func(r window.Result[int64, event]) window.Result[int64, int64] {
					return window.Result[int64, int64]{Key: r.Key, Window: r.Window, Value: r.Value.Seq}
				})
			case "process":
				out = window.Process(w, "sum", func(k int64, win window.Window, items []event, out *topology.Collector[window.Result[int64, int64]]) error {
					var s int64
					for _, e := range items {
						if e.Key != k || e.At < win.Start.UnixMilli() || e.At >= win.End.UnixMilli() {
							return fmt.Errorf("record %+v in window %v of key %d", e, win, k)
						}
						s += e.Seq
					}
					out.Emit(window.Result[int64, int64]{Key: k, Window: win, Value: s})
					return nil
				}, nil, topology.Parallelism(2))
			}
			var got collect[window.Result[int64, int64]]
			topology.Sink(out, "out", got.write)
			var failed atomic.Bool
			faults := &actorstest.Faults{Complete: func(task string, _ uint64) {
				if strings.HasPrefix(task, "sum#") && !failed.Swap(true) {
					panic("injected failure")
				}
			}}
			run(t, g, actorstest.WithFaults(faults))
			// The sink is at-least-once: a replay writes the same rows
			// again. Every distinct row must be the definition's.
			seen := map[row]bool{}
			for _, r := range got.rows {
				x := rowOf(r, func(n int64) int64 { return n })
				k := row{Key: x.Key, Start: x.Start, End: x.End}
				if want[k] != x.Value {
					t.Fatalf("row %+v, want value %d", x, want[k])
				}
				seen[k] = true
			}
			if len(seen) != len(want) {
				t.Fatalf("%d windows, want %d", len(seen), len(want))
			}
			if !failed.Load() {
				t.Log("the job ended before the injected failure")
			}
		})
	}
}

// TestLateRecords sends records far behind the watermark: each record is
// counted in its window's final row or sent to the side output, once;
// with allowed lateness, windows fire again. A record is late only if the
// watermark reaches its window before it does, so the source holds each
// record far behind until its window has fired for every key: lateness is
// exercised however fast the job runs.
func TestLateRecords(t *testing.T) {
	const keys, lateEvery = 11, 97
	es := events(3, 20000, keys, lateEvery)
	// Every window has every key among the records in time (those far
	// behind wait at the gate, so they cannot make it fire): each window
	// fires for all keys, and the gate below never waits forever.
	for w := int64(0); w < es[len(es)-1].At/100; w++ {
		in := map[int64]bool{}
		for i, e := range es {
			if i%lateEvery != lateEvery-1 && e.At/100 == w {
				in[e.Key] = true
			}
		}
		if len(in) != keys {
			t.Fatalf("window %d has %d of the %d keys in time: the gate below could wait forever", w, len(in), keys)
		}
	}
	for _, lateness := range []time.Duration{0, 200 * time.Millisecond} {
		t.Run(fmt.Sprint(lateness), func(t *testing.T) {
			g := topology.New("late")
			late := topology.NewSideOutput[event]("late")
			f := &firings{keys: keys, ends: map[int64]int64{}}
			src := topology.FromSource(g, "events", func(sub, p int) topology.Source[event] {
				return &lateGate{slice: slice{es: es, at: sub, step: p}, fired: f}
			}, topology.Parallelism(2), topology.WithWatermarks(topology.WatermarkStrategy[event]{
				Timestamp:      func(e event) time.Time { return ms(e.At) },
				OutOfOrderness: bound * time.Millisecond,
			}))
			counts := window.Count(window.Of(keyed(src), window.Tumbling(100*time.Millisecond)).AllowedLateness(lateness).LateTo(late), "count", topology.Parallelism(2))
			var got collect[window.Result[int64, int64]]
			var lates collect[event]
			topology.Sink(counts, "out", func(r window.Result[int64, int64]) error {
				f.fire(r.Key, r.Window.End.UnixMilli())
				return got.write(r)
			})
			topology.Sink(topology.SideOutputOf(counts, late), "late", lates.write)
			run(t, g)
			final := map[row]int64{} // the last firing of each window: counts only grow
			fired := map[row]int{}
			for _, r := range countRows(got.rows) {
				k := row{Key: r.Key, Start: r.Start, End: r.End}
				final[k] = max(final[k], r.Value)
				fired[k]++
			}
			want := map[row]int64{}
			for _, e := range es {
				s := e.At - e.At%100
				want[row{Key: e.Key, Start: s, End: s + 100}]++
			}
			for _, e := range lates.rows {
				s := e.At - e.At%100
				want[row{Key: e.Key, Start: s, End: s + 100}]--
			}
			for k, n := range want {
				if final[k] != n {
					t.Fatalf("window %+v: final count %d, want %d (records minus late ones)", k, final[k], n)
				}
			}
			refired := 0
			for _, n := range fired {
				refired += n - 1
			}
			t.Logf("lateness %v: %d late records to the side output, %d windows fired again", lateness, len(lates.rows), refired)
			if len(lates.rows) == 0 && lateness == 0 {
				t.Fatal("no record was late: the test does not exercise lateness")
			}
			if lateness == 0 && refired != 0 {
				t.Fatalf("%d windows fired twice without allowed lateness", refired)
			}
			// The first records far behind reach their window within the
			// allowed lateness: the watermark is then under 200 ms.
			if lateness > 0 && refired == 0 {
				t.Fatal("no window fired again: the test does not exercise allowed lateness")
			}
		})
	}
}

// TestProcessingTime windows records by the clock: every window that
// fires is whole slices of the clock, and counts no more records than
// were sent.
func TestProcessingTime(t *testing.T) {
	g := topology.New("proc")
	fired := make(chan struct{})
	var once sync.Once
	src := topology.FromSource(g, "ticks", func(int, int) topology.Source[event] { return &ticker{fired: fired} })
	counts := window.Count(window.Of(keyed(src), window.Tumbling(2*time.Millisecond).OnProcessingTime()), "count")
	var got collect[window.Result[int64, int64]]
	topology.Sink(counts, "out", func(r window.Result[int64, int64]) error {
		once.Do(func() { close(fired) })
		return got.write(r)
	})
	run(t, g)
	if len(got.rows) == 0 {
		t.Fatal("no window fired")
	}
	for _, r := range got.rows {
		if d := r.Window.End.Sub(r.Window.Start); d != 2*time.Millisecond || r.Window.Start.UnixNano()%int64(2*time.Millisecond) != 0 || r.Value < 1 {
			t.Fatalf("row %+v", r)
		}
	}
}

// slice reads its share of es (every step-th from at), a few records a
// read, so that watermarks advance between reads and late records are
// late.
type slice struct {
	es       []event
	at, step int
}

func (s *slice) Open(_ context.Context, off []byte) error {
	if off != nil {
		s.at = int(binary.BigEndian.Uint64(off))
	}
	return nil
}

func (s *slice) Read(buf []event) (int, error) {
	n := 0
	for ; n < min(len(buf), 16) && s.at < len(s.es); n++ {
		buf[n] = s.es[s.at]
		s.at += s.step
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}
func (s *slice) Offset() []byte { return binary.BigEndian.AppendUint64(nil, uint64(s.at)) }
func (s *slice) Close() error   { return nil }

// firings is the latest end of a fired window per key, for lateGate.
type firings struct {
	mu    sync.Mutex
	keys  int
	ends  map[int64]int64
	waits []gateWait
}

type gateWait struct {
	end  int64
	wake func()
}

// reached reports whether a window ending at end or later has fired for
// every key; f.mu is held.
func (f *firings) reached(end int64) bool {
	if len(f.ends) < f.keys {
		return false
	}
	for _, e := range f.ends {
		if e < end {
			return false
		}
	}
	return true
}

func (f *firings) fire(key, end int64) {
	f.mu.Lock()
	f.ends[key] = max(f.ends[key], end)
	var wake []func()
	f.waits = slices.DeleteFunc(f.waits, func(w gateWait) bool {
		if f.reached(w.end) {
			wake = append(wake, w.wake)
			return true
		}
		return false
	})
	f.mu.Unlock()
	for _, w := range wake {
		w()
	}
}

// await reports whether windows ending at end have fired for every key;
// when not, it calls wake once they have.
func (f *firings) await(end int64, wake func()) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reached(end) {
		return true
	}
	f.waits = append(f.waits, gateWait{end, wake})
	return false
}

// lateGate is slice, but a record whose window the source's own watermark
// has passed waits until that window has fired for every key (reported
// through fired): it then reaches the count behind the watermark, late.
// The source is idle meanwhile, which sends its watermark downstream.
type lateGate struct {
	slice
	fired *firings
	maxAt int64
	wake  func()
}

func (s *lateGate) SetWake(wake func()) { s.wake = wake }

func (s *lateGate) Read(buf []event) (int, error) {
	n := 0
	for ; n < min(len(buf), 16) && s.at < len(s.es); n++ {
		e := s.es[s.at]
		if end := e.At - e.At%100 + 100; end <= s.maxAt-bound-1 {
			if n > 0 {
				return n, nil // the records before it go first, and the watermark after them
			}
			if !s.fired.await(end, s.wake) {
				return 0, topology.ErrSourceIdle
			}
		}
		buf[n] = e
		s.maxAt = max(s.maxAt, e.At)
		s.at += s.step
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// ticker sends a record per read until a window has fired.
type ticker struct {
	fired <-chan struct{}
	n     int64
}

func (s *ticker) Open(context.Context, []byte) error { return nil }
func (s *ticker) Read(buf []event) (int, error) {
	select {
	case <-s.fired:
		return 0, io.EOF
	case <-time.After(100 * time.Microsecond): // pacing, not synchronisation
	}
	buf[0] = event{Key: s.n % 3, Seq: s.n}
	s.n++
	return 1, nil
}
func (s *ticker) Offset() []byte { return nil }
func (s *ticker) Close() error   { return nil }

// TestRefusesBadSpecs: what the operator cannot do is refused when the
// graph is validated, naming the operator.
func TestRefusesBadSpecs(t *testing.T) {
	for _, c := range []struct {
		spec     window.Spec
		lateness time.Duration
		want     string
	}{
		{window.Tumbling(0), 0, "size 0s is not positive"},
		{window.Sliding(10*time.Second, 3*time.Second), 0, "not a multiple of its slide"},
		{window.Sliding(time.Second, 2*time.Second), 0, "longer than its size"},
		{window.Sessions(-time.Second), 0, "gap -1s is not positive"},
		{window.Spec{}, 0, "the window spec is empty"},
		{window.Tumbling(time.Second), -time.Second, "allowed lateness -1s is negative"},
		{window.Tumbling(time.Second).OnProcessingTime(), time.Second, "applies to event-time windows"},
	} {
		g := topology.New("bad")
		w := window.Of(keyed(source(g, nil)), c.spec).AllowedLateness(c.lateness)
		topology.Sink(window.Count(w, "counter"), "out", func(window.Result[int64, int64]) error { return nil })
		err := g.Validate()
		if err == nil || !strings.Contains(err.Error(), `operator "counter"`) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: Validate = %v, want %q", c.spec, err, c.want)
		}
	}
	type bad struct{ F any }
	g := topology.New("bad-acc")
	topology.Sink(window.Aggregate(window.Of(keyed(source(g, nil)), window.Tumbling(time.Second)), "agg", window.Aggregator[event, bad, bad]{
		Add: func(b bad, _ event) bad { return b }, Merge: func(a, _ bad) bad { return a },
	}), "out", func(window.Result[int64, bad]) error { return nil })
	if err := g.Validate(); err == nil || !strings.Contains(err.Error(), `operator "agg"`) || !errors.Is(err, err) {
		t.Errorf("an accumulator with an interface field: Validate = %v", err)
	}
}

// TestNoTimestamps: event-time windows over a source without watermarks
// fail the job with ErrNoTimestamp rather than guess.
func TestNoTimestamps(t *testing.T) {
	g := topology.New("nots")
	src := topology.FromSlice(g, "events", []event{{Key: 1}})
	topology.Sink(window.Count(window.Of(keyed(src), window.Tumbling(time.Second)), "count"), "out", func(window.Result[int64, int64]) error { return nil })
	err := actors.Run(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		actors.WithRestartPolicy(restart.Policy{MaxFailures: restart.NoRestarts}))
	if !errors.Is(err, window.ErrNoTimestamp) {
		t.Fatalf("Run = %v, want ErrNoTimestamp", err)
	}
}

// TestStateClearedAfterFiring: once every window has fired, the
// operator's final checkpoint holds no window state.
func TestStateClearedAfterFiring(t *testing.T) {
	es := events(4, 5000, 13, 0)
	for _, spec := range []window.Spec{window.Tumbling(50 * time.Millisecond), window.Sliding(100*time.Millisecond, 25*time.Millisecond), window.Sessions(30 * time.Millisecond)} {
		store := snapshots.NewMem()
		g := topology.New("cleared")
		counts := window.Count(window.Of(keyed(source(g, es)), spec).AllowedLateness(10*time.Millisecond), "count", topology.Parallelism(2))
		rows := 0
		topology.Sink(counts, "out", func(window.Result[int64, int64]) error { rows++; return nil })
		run(t, g, actors.WithStore(store))
		rp, err := snapshots.NewCheckpoints(store, "cleared", nil).LoadLatest(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		tasks := 0
		for _, st := range rp.States {
			if st.GetOperator() == "count" {
				tasks++
				if n := window.OpenWindows(st); n != 0 {
					t.Errorf("%v: task %s: %d keys with open windows in the final checkpoint", spec, st.GetTaskId(), n)
				}
			}
		}
		if tasks != 2 || rows == 0 {
			t.Fatalf("%v: %d count tasks in the final checkpoint, %d rows", spec, tasks, rows)
		}
	}
}

// gated reads its events one per read; an event that has a gate is
// read only once the gate's channel is closed (by the sink, once a row
// has come out), so that the watermark has passed what that row needs
// before the event is read. Until then the source is idle, and it wakes
// when the gate opens.
type gated struct {
	es    []event
	gates map[int]<-chan struct{}
	at    int
	wake  func()
}

func (s *gated) SetWake(wake func()) { s.wake = wake }
func (s *gated) Open(ctx context.Context, _ []byte) error {
	for _, c := range s.gates {
		go func() {
			select {
			case <-c:
				s.wake()
			case <-ctx.Done():
			}
		}()
	}
	return nil
}
func (s *gated) Read(buf []event) (int, error) {
	if s.at == len(s.es) {
		return 0, io.EOF
	}
	if c := s.gates[s.at]; c != nil {
		select {
		case <-c:
		default:
			return 0, topology.ErrSourceIdle
		}
	}
	buf[0] = s.es[s.at]
	s.at++
	return 1, nil
}
func (s *gated) Offset() []byte { return nil }
func (s *gated) Close() error   { return nil }

// runGated runs spec with lateness over es, event gate waiting for the
// row wait, and returns the rows.
func runGated(t *testing.T, spec window.Spec, lateness time.Duration, es []event, gate int, wait row) []row {
	t.Helper()
	seen := make(chan struct{})
	var once sync.Once
	g := topology.New("gated")
	src := topology.FromSource(g, "events", func(int, int) topology.Source[event] {
		return &gated{es: es, gates: map[int]<-chan struct{}{gate: seen}}
	}, topology.WithWatermarks(topology.WatermarkStrategy[event]{Timestamp: func(e event) time.Time { return ms(e.At) }}))
	var got collect[window.Result[int64, int64]]
	topology.Sink(window.Count(window.Of(keyed(src), spec).AllowedLateness(lateness), "count"), "out", func(r window.Result[int64, int64]) error {
		if rowOf(r, func(n int64) int64 { return n }) == wait {
			once.Do(func() { close(seen) })
		}
		return got.write(r)
	})
	run(t, g, actors.WithRestartPolicy(restart.Policy{MaxFailures: restart.NoRestarts}))
	return countRows(got.rows)
}

// TestSessionLateMergeKeepsOtherWindows: a late record merges into a
// fired session, within the allowed lateness; a later session of the
// same key, whose timer falls at the time of the absorbed session's
// cleanup, still fires.
func TestSessionLateMergeKeepsOtherWindows(t *testing.T) {
	es := []event{{Key: 1, At: 1000}, {Key: 1, At: 1020}, {Key: 1, At: 1005}}
	got := runGated(t, window.Sessions(10*time.Millisecond), 20*time.Millisecond, es, 2, row{Key: 1, Start: 1000, End: 1010, Value: 1})
	want := []row{{1, 1000, 1010, 1}, {1, 1000, 1015, 2}, {1, 1020, 1030, 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
}

// TestSlidingLateRecordFiresNoWindowTwice: after a key's windows have
// fired and its state was cleared, a record of that key which is late
// for one of its windows fires only the windows still ahead of the
// watermark.
func TestSlidingLateRecordFiresNoWindowTwice(t *testing.T) {
	es := []event{{Key: 1, At: 1015}, {Key: 2, At: 1045}, {Key: 1, At: 1035}}
	got := runGated(t, window.Sliding(30*time.Millisecond, 10*time.Millisecond), 0, es, 2, row{Key: 1, Start: 1010, End: 1040, Value: 1})
	want := []row{
		{1, 990, 1020, 1}, {1, 1000, 1030, 1}, {1, 1010, 1040, 1}, {1, 1020, 1050, 1}, {1, 1030, 1060, 1},
		{2, 1020, 1050, 1}, {2, 1030, 1060, 1}, {2, 1040, 1070, 1},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
}
