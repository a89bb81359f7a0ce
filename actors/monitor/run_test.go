package monitor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/actors/internal/engine"
	"github.com/snapflow/snapflow/actors/monitor"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// records is how many records the test jobs' source produces.
const records = 3000

// testGraph is a source of count records (unbounded when count < 0), a
// keyed count at parallelism 2 and a sink.
func testGraph(name string, count int64) *topology.Graph { return testGraphP(name, count, 2) }

// testGraphP is testGraph with the keyed count at parallelism p.
func testGraphP(name string, count int64, p int) *topology.Graph {
	g := topology.New(name)
	nums := topology.Generate(g, "gen", count, func(i int64) int64 { return i })
	counts := topology.Process(topology.KeyBy(nums, func(v int64) int64 { return v % 16 }), "count",
		func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			n := topology.Value[int64](s, "n")
			return func(_ *topology.Context[int64], _ int64, out *topology.Collector[int64]) error {
				c, _ := n.Get()
				n.Set(c + 1)
				out.Emit(c + 1)
				return nil
			}
		}, topology.Parallelism(p))
	topology.Sink(counts, "sink", func(int64) error { return nil })
	return g
}

// seen is what the test's own listener saw, with the monitor's state after
// each event.
type seen struct {
	mu              sync.Mutex
	completed       int
	settled         int // completed, settled after a failover
	aborted         int
	declined        int
	taskFigures     int         // per-task figures over the completed checkpoints
	figureCounts    map[int]int // completed checkpoints by how many task figures they carry
	failures        []actors.FailureCause
	restores        int
	restoreEpoch    uint64
	afterRestore    int         // checkpoints completed after the restore
	armed           atomic.Bool // the failure may be injected
	enough          chan struct{}
	lastCompleted   uint64
	states          []string
	checkpointsSeen []uint64 // completed, in order
}

func (s *seen) listener(mon *monitor.Monitor) func(actors.Event) {
	return func(e actors.Event) {
		state := mon.Job().State // the monitor's listener ran first
		s.mu.Lock()
		defer s.mu.Unlock()
		switch e.Kind {
		case actors.EventCheckpointCompleted:
			s.completed++
			if e.Settled {
				s.settled++
			}
			s.taskFigures += len(e.Tasks)
			if s.figureCounts == nil {
				s.figureCounts = map[int]int{}
			}
			s.figureCounts[len(e.Tasks)]++
			s.lastCompleted = e.Checkpoint
			s.checkpointsSeen = append(s.checkpointsSeen, e.Checkpoint)
			if s.completed == 2 {
				s.armed.Store(true)
			}
			if s.restores > 0 {
				if s.afterRestore++; s.afterRestore == 2 {
					close(s.enough)
				}
			}
		case actors.EventCheckpointAborted:
			if e.Declined {
				s.declined++
			} else {
				s.aborted++
			}
		case actors.EventTaskFailed:
			s.failures = append(s.failures, e.Cause)
		case actors.EventRestoring:
			s.restores++
			s.restoreEpoch = e.Epoch
		}
		if len(s.states) == 0 || s.states[len(s.states)-1] != state {
			s.states = append(s.states, state)
		}
	}
}

// runJob runs an unbounded testGraph with a monitor on reg and one
// injected failure: task count#0 panics before its first snapshot after two
// checkpoints completed. Once two more completed after the restore, the job
// stops with a savepoint.
func runJob(t *testing.T, reg *prometheus.Registry, name string) (*monitor.Monitor, *actors.Job, *seen) {
	t.Helper()
	mon, err := monitor.New(monitor.Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	s := &seen{enough: make(chan struct{})}
	var failed atomic.Bool
	faults := &actorstest.Faults{Snapshot: func(task string, _ uint64) {
		if task == "count#0" && s.armed.Load() && failed.CompareAndSwap(false, true) {
			panic("monitor test: injected failure")
		}
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	j, err := actors.Start(ctx, testGraph(name, -1), actors.WithStore(snapshots.NewMem()),
		actors.WithCheckpointInterval(5*time.Millisecond), actorstest.WithFaults(faults),
		actors.WithListener(mon.Listener()), actors.WithListener(s.listener(mon)))
	if err != nil {
		t.Fatal(err)
	}
	mon.Attach(j)
	select {
	case <-s.enough:
	case <-j.Done():
		t.Fatalf("the job ended: %v", j.Wait())
	case <-ctx.Done():
		t.Fatal("no two checkpoints completed after a restore in time")
	}
	if _, err := j.StopWithSavepoint(ctx, "end"); err != nil {
		t.Fatal(err)
	}
	if err := j.Wait(); !errors.Is(err, actors.ErrStopped) {
		t.Fatalf("the job ended with %v, want actors.ErrStopped", err)
	}
	if !failed.Load() {
		t.Fatal("the injected failure never ran")
	}
	return mon, j, s
}

func causeLabel(c actors.FailureCause) string {
	if c == "" {
		return string(actors.CauseOther)
	}
	return string(c)
}

func TestMetricsAfterRun(t *testing.T) {
	reg := prometheus.NewRegistry()
	mon, j, s := runJob(t, reg, "monitored")

	if len(s.failures) != 1 || s.restores != 1 {
		t.Fatalf("the run saw %d task failures and %d restores, want 1 and 1", len(s.failures), s.restores)
	}
	if s.completed < 5 { // 2, 2 after the restore, the savepoint
		t.Fatalf("%d checkpoints completed, want at least 5", s.completed)
	}
	t.Logf("the run: %d checkpoints completed (by number of task figures: %v), %d aborted, %d declined, failure cause %q",
		s.completed, s.figureCounts, s.aborted, s.declined, s.failures[0])

	// Counters and gauges, compared whole.
	var want strings.Builder
	fmt.Fprintf(&want, `
# HELP snapflow_checkpoints_total Checkpoints and savepoints ended, by result (completed, aborted, declined).
# TYPE snapflow_checkpoints_total counter
snapflow_checkpoints_total{job_name="monitored",result="aborted"} %d
snapflow_checkpoints_total{job_name="monitored",result="completed"} %d
snapflow_checkpoints_total{job_name="monitored",result="declined"} %d
# HELP snapflow_last_checkpoint_id Id of the newest completed checkpoint or savepoint (0: none).
# TYPE snapflow_last_checkpoint_id gauge
snapflow_last_checkpoint_id{job_name="monitored"} %d
# HELP snapflow_restores_total Rollbacks of the job to a checkpoint after a failure.
# TYPE snapflow_restores_total counter
snapflow_restores_total{job_name="monitored"} 1
# HELP snapflow_task_failures_total Task failures, by cause.
# TYPE snapflow_task_failures_total counter
`, s.aborted, s.completed, s.declined, s.lastCompleted)
	for _, c := range []string{"commit", "error", "link-lost", "node-lost", "other", "panic", "restore"} {
		v := 0
		if c == causeLabel(s.failures[0]) {
			v = 1
		}
		fmt.Fprintf(&want, "snapflow_task_failures_total{cause=%q,job_name=\"monitored\"} %d\n", c, v)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want.String()),
		"snapflow_checkpoints_total", "snapflow_last_checkpoint_id", "snapflow_restores_total", "snapflow_task_failures_total"); err != nil {
		t.Error(err)
	}

	// Histograms: one sample per completed checkpoint, or per task of one
	// (alignment: per task with several input channels).
	aligning := 0
	for _, tp := range engine.PlanOf(j).Tasks {
		if len(tp.Inputs) > 1 {
			aligning++
		}
	}
	hists := gatherHistograms(t, reg)
	for name, n := range map[string]int{
		"snapflow_checkpoint_duration_seconds":  s.completed - s.settled, // a settled one's duration includes the failover
		"snapflow_checkpoint_size_bytes":        s.completed,
		"snapflow_checkpoint_in_flight_bytes":   s.completed,
		"snapflow_checkpoint_alignment_seconds": s.taskFigures / len(engine.PlanOf(j).Tasks) * aligning,
		"snapflow_checkpoint_sync_seconds":      s.taskFigures,
		"snapflow_checkpoint_async_seconds":     s.taskFigures,
	} {
		h, ok := hists[name]
		if !ok {
			t.Errorf("%s: not exported", name)
			continue
		}
		if got := h.GetSampleCount(); got != uint64(n) {
			t.Errorf("%s: %d samples, want %d", name, got, n)
		}
	}
	if s.taskFigures == 0 {
		t.Log("awaiting the runtime: EventCheckpointCompleted carries no per-task figures yet, the per-task histograms are empty")
	}
	for n := range s.figureCounts { // none: settled after a failover
		if n != 0 && n != len(engine.PlanOf(j).Tasks) {
			t.Errorf("completed checkpoints by number of task figures: %v; the job has %d tasks", s.figureCounts, len(engine.PlanOf(j).Tasks))
		}
	}

	// The age is computed at scrape, after the last checkpoint.
	if n, err := testutil.GatherAndCount(reg, "snapflow_last_checkpoint_age_seconds"); err != nil || n != 1 {
		t.Errorf("snapflow_last_checkpoint_age_seconds: %d series (%v), want 1", n, err)
	}
	if age := gaugeValue(t, reg, "snapflow_last_checkpoint_age_seconds"); age < 0 {
		t.Errorf("snapflow_last_checkpoint_age_seconds is %v", age)
	}

	checkTaskMetrics(t, reg, j)

	// The status agrees.
	st := mon.Job()
	if st.Name != "monitored" || st.State != monitor.StateStopped {
		t.Errorf("status: job %q %s, want monitored stopped", st.Name, st.State)
	}
	want2 := monitor.Counts{Completed: uint64(s.completed), Aborted: uint64(s.aborted), Declined: uint64(s.declined), TaskFailures: 1, Restores: 1}
	if st.Counts != want2 {
		t.Errorf("status counts %+v, want %+v", st.Counts, want2)
	}
	if st.LastCheckpoint == nil || st.LastCheckpoint.ID != s.lastCompleted || st.LastCheckpoint.Savepoint != "end" {
		t.Errorf("status last checkpoint %+v, want id %d", st.LastCheckpoint, s.lastCompleted)
	}
	if st.Epoch != s.restoreEpoch || st.Epoch < 2 {
		t.Errorf("status epoch %d, want the restore's (%d)", st.Epoch, s.restoreEpoch)
	}

	// The job went starting -> running -> restoring -> running, and was
	// stopped.
	s.mu.Lock()
	states := strings.Join(s.states, " ")
	s.mu.Unlock()
	if states != "running restoring running" && states != "starting running restoring running" {
		t.Errorf("states after each event: %s", states)
	}

	// History: the completed checkpoints, newest first, and the timeline.
	var got []uint64
	for _, c := range mon.Checkpoints(0) {
		if c.Status == monitor.StatusCompleted {
			got = append([]uint64{c.ID}, got...)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(s.checkpointsSeen) {
		t.Errorf("completed checkpoints in the history (oldest first) %v, the listener saw %v", got, s.checkpointsSeen)
	}
	var kinds []string
	for _, e := range mon.Timeline(0) {
		kinds = append(kinds, e.Kind)
	}
	if k := strings.Join(kinds, " "); k != "stopped running restoring task-failed running" {
		t.Errorf("timeline, newest first: %s", k)
	}
	if tl := mon.Timeline(0); len(tl) == 5 && (tl[3].Cause != causeLabel(s.failures[0]) || tl[3].Task != "count#0" || tl[3].Error == "") {
		t.Errorf("the failure's timeline entry: %+v", tl[3])
	}
	if tl := mon.Timeline(0); len(tl) == 5 && (tl[2].Epoch != s.restoreEpoch || tl[1].Checkpoint == 0 || tl[1].Checkpoint != tl[2].Checkpoint) {
		t.Errorf("the restore's timeline entries: %+v, %+v", tl[2], tl[1])
	}
}

// checkTaskMetrics compares the records and backpressure metrics with the
// job's counters, read after the job finished.
func checkTaskMetrics(t *testing.T, reg *prometheus.Registry, j *actors.Job) {
	t.Helper()
	tms := j.TaskMetrics()
	in, out := map[string]float64{}, map[string]float64{}
	var moved bool
	for _, tm := range tms {
		in[tm.Operator] += float64(tm.RecordsIn)
		out[tm.Operator] += float64(tm.RecordsOut)
		moved = moved || tm.RecordsIn > 0 || tm.RecordsOut > 0
	}
	mfs := gather(t, reg)
	for _, c := range []struct {
		name string
		want map[string]float64
	}{{"snapflow_operator_records_in_total", in}, {"snapflow_operator_records_out_total", out}} {
		got := map[string]float64{}
		for _, m := range mfs[c.name].GetMetric() {
			got[label(m, "operator")] = m.GetCounter().GetValue()
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %v, Job.TaskMetrics says %v", c.name, got, c.want)
		}
	}
	for _, name := range []string{"snapflow_task_backpressure_seconds_total", "snapflow_task_queued_batches"} {
		if n := len(mfs[name].GetMetric()); n != len(tms) {
			t.Errorf("%s: %d series, want one per task (%d)", name, n, len(tms))
		}
	}
	t.Logf("records in %v, out %v", in, out)
	if !moved {
		t.Log("awaiting the runtime: Job.TaskMetrics reads zeros, the records are not checked")
		return
	}
	// Checkpoints completed after records flowed through every operator.
	if out["gen"] == 0 || in["count"] == 0 || out["count"] == 0 || in["sink"] == 0 {
		t.Errorf("records: gen out %v, count in %v out %v, sink in %v; want some each", out["gen"], in["count"], out["count"], in["sink"])
	}
	if in["gen"] != 0 || out["sink"] != 0 {
		t.Errorf("records: gen in %v, sink out %v; want 0", in["gen"], out["sink"])
	}
}

func gather(t *testing.T, g prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func gatherHistograms(t *testing.T, g prometheus.Gatherer) map[string]*dto.Histogram {
	t.Helper()
	out := map[string]*dto.Histogram{}
	for name, mf := range gather(t, g) {
		if mf.GetType() == dto.MetricType_HISTOGRAM && len(mf.GetMetric()) == 1 {
			out[name] = mf.GetMetric()[0].GetHistogram()
		}
	}
	return out
}

func gaugeValue(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mf := gather(t, g)[name]
	if len(mf.GetMetric()) != 1 {
		t.Fatalf("%s: %d series, want 1", name, len(mf.GetMetric()))
	}
	return mf.GetMetric()[0].GetGauge().GetValue()
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func TestMetricNamesFollowConventions(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, _, _ = runJob(t, reg, "linted"); t.Failed() {
		return
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	want := []string{
		"snapflow_checkpoint_alignment_seconds", "snapflow_checkpoint_async_seconds", "snapflow_checkpoint_duration_seconds",
		"snapflow_checkpoint_in_flight_bytes", "snapflow_checkpoint_size_bytes", "snapflow_checkpoint_sync_seconds", "snapflow_checkpoints_total",
		"snapflow_last_checkpoint_age_seconds", "snapflow_last_checkpoint_id", "snapflow_node_refused_calls_total", "snapflow_operator_records_in_total",
		"snapflow_operator_records_out_total", "snapflow_restores_total", "snapflow_task_backpressure_seconds_total",
		"snapflow_task_failures_total", "snapflow_task_queued_batches",
	}
	var got []string
	for name := range gather(t, reg) {
		got = append(got, name)
	}
	if fmt.Sprint(sorted(got)) != fmt.Sprint(want) {
		t.Errorf("metrics %v, want %v", sorted(got), want)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestNewTwiceOnOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := monitor.New(monitor.Options{Registry: reg}); err != nil {
		t.Fatal(err)
	}
	_, err := monitor.New(monitor.Options{Registry: reg})
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) || !strings.HasPrefix(err.Error(), "monitor: ") {
		t.Fatalf("the second New on one registry returned %v, want a monitor: error wrapping prometheus.AlreadyRegisteredError", err)
	}
}

func TestNewRefusesNegativeSizes(t *testing.T) {
	for _, o := range []monitor.Options{{History: -1}, {Timeline: -1}} {
		if _, err := monitor.New(o); !errors.Is(err, monitor.ErrOption) {
			t.Errorf("New(%+v) returned %v, want ErrOption", o, err)
		}
	}
}

// Without a registry nothing is registered anywhere, the global registry
// included.
func TestNoRegistryNoMetrics(t *testing.T) {
	before := len(gather(t, prometheus.DefaultGatherer))
	if _, err := monitor.New(monitor.Options{}); err != nil {
		t.Fatal(err)
	}
	for name := range gather(t, prometheus.DefaultGatherer) {
		if strings.HasPrefix(name, "snapflow_") {
			t.Errorf("%s is on the global registry", name)
		}
	}
	if after := len(gather(t, prometheus.DefaultGatherer)); after != before {
		t.Errorf("the global registry went from %d to %d families", before, after)
	}
}

// TestJobStartedAgain: a program that stops its job and starts another
// (a restart, a rescale) with a new Listener sees the new job's state, not
// the stopped one's; the stopped job's late events move nothing.
func TestJobStartedAgain(t *testing.T) {
	m, err := monitor.New(monitor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := func() (*actors.Job, func(actors.Event)) {
		l := m.Listener()
		running := make(chan struct{})
		var once sync.Once
		j, err := actors.Start(context.Background(), testGraph("again", 1<<62), actors.WithStore(snapshots.NewMem()),
			actors.WithListener(l), actors.WithListener(func(e actors.Event) {
				if e.Kind == actors.EventRunning {
					once.Do(func() { close(running) })
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		<-running
		m.Attach(j)
		return j, l
	}
	j1, l1 := start()
	if s := m.Job().State; s != monitor.StateRunning {
		t.Fatalf("first job: state %q", s)
	}
	j1.Stop()
	if s := m.Job().State; s != monitor.StateStopped {
		t.Fatalf("first job stopped: state %q", s)
	}
	j2, _ := start()
	defer j2.Stop()
	if s := m.Job().State; s != monitor.StateRunning {
		t.Fatalf("second job: state %q, want running", s)
	}
	l1(actors.Event{Kind: actors.EventFailed, Err: errors.New("late")})
	if s := m.Job().State; s != monitor.StateRunning {
		t.Fatalf("a late event of the stopped job moved the state to %q", s)
	}
	j2.Stop()
	if s := m.Job().State; s != monitor.StateStopped {
		t.Fatalf("second job stopped: state %q", s)
	}
}

// TestUnusedListenerChangesNothing: a Listener taken and never given to a
// job does not take the state away from the job that runs.
func TestUnusedListenerChangesNothing(t *testing.T) {
	m, err := monitor.New(monitor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j, err := actors.Start(context.Background(), testGraph("unused", 1000), actors.WithStore(snapshots.NewMem()),
		actors.WithListener(m.Listener()))
	if err != nil {
		t.Fatal(err)
	}
	m.Attach(j)
	_ = m.Listener()
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	if s := m.Job().State; s != monitor.StateFinished {
		t.Fatalf("state %q after the job finished, want finished", s)
	}
}

// TestCountersGrowAcrossJobs: a monitor attached to one job after another
// (a program's restart, a rescale to fewer tasks) keeps its counters
// growing: the records metrics and the status add what the earlier jobs
// counted.
func TestCountersGrowAcrossJobs(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := monitor.New(monitor.Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	run := func(g *topology.Graph) {
		t.Helper()
		j, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithListener(m.Listener()))
		if err != nil {
			t.Fatal(err)
		}
		m.Attach(j)
		if err := j.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	out := func() map[string]float64 {
		got := map[string]float64{}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "snapflow_operator_records_out_total" {
				continue
			}
			for _, mt := range mf.GetMetric() {
				for _, l := range mt.GetLabel() {
					if l.GetName() == "operator" {
						got[l.GetValue()] = mt.GetCounter().GetValue()
					}
				}
			}
		}
		return got
	}
	run(testGraphP("grow", 1000, 2))
	if got := out(); got["gen"] != 1000 || got["count"] != 1000 {
		t.Fatalf("after the first job: records out %v, want gen and count 1000", got)
	}
	run(testGraphP("grow", 500, 1)) // the keyed count has one task now
	if got := out(); got["gen"] != 1500 || got["count"] != 1500 {
		t.Fatalf("after the second job: records out %v, want gen and count 1500", got)
	}
	st := m.Job()
	for _, op := range st.Operators {
		if op.Name == "gen" && op.RecordsOut != 1500 {
			t.Errorf("status: gen's records out %d, want 1500", op.RecordsOut)
		}
	}
	if st.State != monitor.StateFinished || st.Error != "" {
		t.Errorf("status: %s %q, want finished without error", st.State, st.Error)
	}
}
