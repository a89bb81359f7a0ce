package monitor_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/monitor"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func newMonitor(t *testing.T, opts monitor.Options) (*monitor.Monitor, func(actors.Event)) {
	t.Helper()
	m, err := monitor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m, m.Listener()
}

func ids(cs []monitor.Checkpoint) string {
	var b []string
	for _, c := range cs {
		b = append(b, fmt.Sprintf("%d:%s", c.ID, c.Status))
	}
	return strings.Join(b, " ")
}

func TestHistoryKeepsTheNewest(t *testing.T) {
	m, feed := newMonitor(t, monitor.Options{History: 3})
	for id := uint64(1); id <= 5; id++ {
		ms := int(id) * 100
		feed(actors.Event{Kind: actors.EventCheckpointTriggered, Time: at(ms), Epoch: 1, Checkpoint: id})
		feed(actors.Event{Kind: actors.EventCheckpointCompleted, Time: at(ms + 40), Epoch: 1, Checkpoint: id,
			Duration: 40 * time.Millisecond, Bytes: id * 1000})
	}
	feed(actors.Event{Kind: actors.EventCheckpointTriggered, Time: at(600), Epoch: 1, Checkpoint: 6})
	if got := ids(m.Checkpoints(0)); got != "6:in_progress 5:completed 4:completed" {
		t.Errorf("Checkpoints(0): %s", got)
	}
	if got := ids(m.Checkpoints(2)); got != "6:in_progress 5:completed" {
		t.Errorf("Checkpoints(2): %s", got)
	}
	if got := ids(m.Checkpoints(10)); got != "6:in_progress 5:completed 4:completed" {
		t.Errorf("Checkpoints(10): %s", got)
	}
	if _, ok := m.Checkpoint(3); ok {
		t.Error("checkpoint 3 is still kept in a history of 3")
	}
	c, ok := m.Checkpoint(4)
	if !ok || c.Bytes != 4000 || !c.Triggered.Equal(at(400)) || !c.Ended.Equal(at(440)) || c.DurationSeconds != 0.04 {
		t.Errorf("Checkpoint(4) = %+v, %v", c, ok)
	}
	if c, ok := m.Checkpoint(6); !ok || c.Status != monitor.StatusInProgress || !c.Ended.IsZero() {
		t.Errorf("Checkpoint(6) = %+v, %v", c, ok)
	}
	st := m.Job()
	if st.Counts.Completed != 5 || st.LastCheckpoint == nil || st.LastCheckpoint.ID != 5 || !st.LastCheckpoint.Time.Equal(at(540)) {
		t.Errorf("status: counts %+v, last %+v", st.Counts, st.LastCheckpoint)
	}
}

func TestHistoryStatuses(t *testing.T) {
	m, feed := newMonitor(t, monitor.Options{})
	feed(actors.Event{Kind: actors.EventCheckpointTriggered, Time: at(0), Epoch: 1, Checkpoint: 1})
	feed(actors.Event{Kind: actors.EventCheckpointAborted, Time: at(30), Epoch: 1, Checkpoint: 1,
		Err: errors.New("checkpoint 1 aborted: timeout")})
	feed(actors.Event{Kind: actors.EventCheckpointTriggered, Time: at(100), Epoch: 1, Checkpoint: 2, Savepoint: "sp"})
	feed(actors.Event{Kind: actors.EventCheckpointAborted, Time: at(150), Epoch: 1, Checkpoint: 2, Savepoint: "sp",
		Declined: true, Task: "count#1", Err: errors.New("count#1 cannot snapshot")})
	// A completion whose trigger was not seen: the trigger is inferred.
	feed(actors.Event{Kind: actors.EventCheckpointCompleted, Time: at(300), Epoch: 1, Checkpoint: 3, Final: true,
		Duration: 50 * time.Millisecond, Bytes: 10, Alignment: time.Millisecond, Upload: 2 * time.Millisecond,
		Tasks: []actors.TaskCheckpoint{{Task: "a#0", Bytes: 4, Alignment: time.Millisecond, Sync: 3 * time.Millisecond, Async: 2 * time.Millisecond}, {Task: "b#0", Bytes: 6}}})
	// An abort whose trigger was not seen.
	feed(actors.Event{Kind: actors.EventCheckpointAborted, Time: at(400), Epoch: 2, Checkpoint: 4, Err: errors.New("failover")})

	cs := m.Checkpoints(0)
	if got := ids(cs); got != "4:aborted 3:completed 2:declined 1:aborted" {
		t.Fatalf("history: %s", got)
	}
	if c := cs[3]; c.Error != "checkpoint 1 aborted: timeout" || c.DurationSeconds != 0.03 || c.Task != "" {
		t.Errorf("aborted: %+v", c)
	}
	if c := cs[2]; c.Savepoint != "sp" || c.Task != "count#1" || c.Error != "count#1 cannot snapshot" {
		t.Errorf("declined: %+v", c)
	}
	c := cs[1]
	if !c.Final || !c.Triggered.Equal(at(250)) || c.AlignmentSeconds != 0.001 || c.UploadSeconds != 0.002 || len(c.Tasks) != 2 ||
		c.Tasks[0] != (monitor.TaskCheckpoint{Task: "a#0", Bytes: 4, AlignmentSeconds: 0.001, SyncSeconds: 0.003, AsyncSeconds: 0.002}) {
		t.Errorf("completed: %+v", c)
	}
	if c := cs[0]; !c.Triggered.IsZero() || c.DurationSeconds != 0 || c.Epoch != 2 {
		t.Errorf("aborted without a trigger: %+v", c)
	}
	if got := m.Job().Counts; got != (monitor.Counts{Completed: 1, Aborted: 2, Declined: 1}) {
		t.Errorf("counts %+v", got)
	}

	// What the caller gets is a copy.
	cs[1].Tasks[0].Bytes = 999
	if c, _ := m.Checkpoint(3); c.Tasks[0].Bytes != 4 {
		t.Error("changing a returned checkpoint changed the history")
	}
}

// A checkpoint still in progress when the job ends is aborted: its outcome
// will never be reported. It is not counted.
func TestInProgressAbortedAtTheEnd(t *testing.T) {
	m, feed := newMonitor(t, monitor.Options{})
	feed(actors.Event{Kind: actors.EventCheckpointTriggered, Time: at(0), Epoch: 1, Checkpoint: 7})
	feed(actors.Event{Kind: actors.EventFailed, Time: at(20), Epoch: 1, Err: errors.New("job failed")})
	c, _ := m.Checkpoint(7)
	if c.Status != monitor.StatusAborted || c.Error == "" || !c.Ended.Equal(at(20)) {
		t.Errorf("checkpoint 7 after the job failed: %+v", c)
	}
	if st := m.Job(); st.Counts.Aborted != 0 || st.State != monitor.StateFailed || st.Error != "job failed" {
		t.Errorf("status: %+v", st)
	}
}

// A checkpoint id used again (a checkpoint aborted by a failover, whose id
// the next incarnation reuses) gets a new entry; Checkpoint finds the newest.
func TestCheckpointIDReused(t *testing.T) {
	m, feed := newMonitor(t, monitor.Options{})
	feed(actors.Event{Kind: actors.EventCheckpointTriggered, Time: at(0), Epoch: 1, Checkpoint: 2})
	feed(actors.Event{Kind: actors.EventCheckpointAborted, Time: at(10), Epoch: 1, Checkpoint: 2, Err: errors.New("failover")})
	feed(actors.Event{Kind: actors.EventCheckpointTriggered, Time: at(100), Epoch: 2, Checkpoint: 2})
	feed(actors.Event{Kind: actors.EventCheckpointCompleted, Time: at(120), Epoch: 2, Checkpoint: 2, Duration: 20 * time.Millisecond})
	if got := ids(m.Checkpoints(0)); got != "2:completed 2:aborted" {
		t.Errorf("history: %s", got)
	}
	if c, _ := m.Checkpoint(2); c.Status != monitor.StatusCompleted || c.Epoch != 2 {
		t.Errorf("Checkpoint(2) = %+v", c)
	}
}

func TestTimelineAndStates(t *testing.T) {
	m, feed := newMonitor(t, monitor.Options{Timeline: 4})
	state := func() string { return m.Job().State }
	if s := state(); s != monitor.StateStarting {
		t.Fatalf("state before any event: %s", s)
	}
	steps := []struct {
		e     actors.Event
		state string
	}{
		{actors.Event{Kind: actors.EventNodeJoined, Node: "w1@127.0.0.1:4001"}, monitor.StateStarting},
		{actors.Event{Kind: actors.EventRunning, Epoch: 1}, monitor.StateRunning},
		{actors.Event{Kind: actors.EventTaskFailed, Epoch: 1, Task: "count#0", Cause: actors.CausePanic, Err: errors.New("boom")}, monitor.StateRestoring},
		{actors.Event{Kind: actors.EventRestoring, Epoch: 2, Checkpoint: 3}, monitor.StateRestoring},
		{actors.Event{Kind: actors.EventRunning, Epoch: 2, Checkpoint: 3}, monitor.StateRunning},
		{actors.Event{Kind: actors.EventNodeLost, Epoch: 2, Node: "w1@127.0.0.1:4001", Err: errors.New("heartbeat")}, monitor.StateRunning},
		{actors.Event{Kind: actors.EventTaskFailed, Epoch: 2, Task: "a#0,b#1", Node: "w1@127.0.0.1:4001", Err: errors.New("lost")}, monitor.StateRestoring},
		{actors.Event{Kind: actors.EventFinished, Epoch: 3}, monitor.StateFinished},
		{actors.Event{Kind: actors.EventRunning, Epoch: 3}, monitor.StateFinished}, // an ended job stays ended
	}
	for i, s := range steps {
		s.e.Time = at(i)
		feed(s.e)
		if got := state(); got != s.state {
			t.Errorf("after %s: state %s, want %s", s.e.Kind, got, s.state)
		}
	}
	tl := m.Timeline(0)
	var kinds []string
	for _, e := range tl {
		kinds = append(kinds, e.Kind)
	}
	if got := strings.Join(kinds, " "); got != "running finished task-failed node-lost" {
		t.Errorf("timeline of 4, newest first: %s", got)
	}
	if e := tl[2]; e.Task != "a#0,b#1" || e.Cause != "other" || e.Node != "w1@127.0.0.1:4001" || e.Error != "lost" || !e.Time.Equal(at(6)) {
		t.Errorf("task-failed entry: %+v", e)
	}
	if got := len(m.Timeline(2)); got != 2 {
		t.Errorf("Timeline(2) has %d entries", got)
	}
	st := m.Job()
	if st.Epoch != 3 || st.Counts.TaskFailures != 2 || st.Counts.Restores != 1 {
		t.Errorf("status: epoch %d, counts %+v", st.Epoch, st.Counts)
	}
	if len(st.Nodes) != 1 || st.Nodes[0] != (monitor.Node{ID: "w1", Address: "127.0.0.1:4001", State: "lost"}) {
		t.Errorf("nodes: %+v", st.Nodes)
	}
}

func TestFailureCausesCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, feed := newMonitor(t, monitor.Options{Registry: reg, Job: "j"})
	for _, c := range []actors.FailureCause{actors.CausePanic, actors.CausePanic, actors.CauseCommit, "", "disk"} {
		feed(actors.Event{Kind: actors.EventTaskFailed, Time: at(0), Epoch: 1, Task: "t#0", Cause: c})
	}
	want := `
# HELP snapflow_task_failures_total Task failures, by cause.
# TYPE snapflow_task_failures_total counter
snapflow_task_failures_total{cause="commit",job_name="j"} 1
snapflow_task_failures_total{cause="disk",job_name="j"} 1
snapflow_task_failures_total{cause="error",job_name="j"} 0
snapflow_task_failures_total{cause="link-lost",job_name="j"} 0
snapflow_task_failures_total{cause="node-lost",job_name="j"} 0
snapflow_task_failures_total{cause="other",job_name="j"} 1
snapflow_task_failures_total{cause="panic",job_name="j"} 2
snapflow_task_failures_total{cause="restore",job_name="j"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "snapflow_task_failures_total"); err != nil {
		t.Error(err)
	}
}

// The histograms' buckets: seconds from 1 ms to minutes, bytes from 1 KiB
// to 16 GiB, and each observation in its bucket.
func TestHistogramBuckets(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, feed := newMonitor(t, monitor.Options{Registry: reg, Job: "j"})
	feed(actors.Event{Kind: actors.EventCheckpointCompleted, Time: at(0), Epoch: 1, Checkpoint: 1,
		Duration: 1500 * time.Millisecond, Bytes: 3 << 20,
		Tasks: []actors.TaskCheckpoint{{Task: "a#0", Alignment: 500 * time.Microsecond}, {Task: "b#0", Alignment: 10 * time.Minute}}})
	hs := gatherHistograms(t, reg)
	check := func(name string, first, last float64, counts map[float64]uint64, n uint64, sum float64) {
		t.Helper()
		h := hs[name]
		b := h.GetBucket()
		if len(b) == 0 || b[0].GetUpperBound() != first || b[len(b)-1].GetUpperBound() != last {
			t.Errorf("%s: buckets %v", name, b)
			return
		}
		for _, x := range b {
			if want, ok := counts[x.GetUpperBound()]; ok && x.GetCumulativeCount() != want {
				t.Errorf("%s: bucket le=%v holds %d, want %d", name, x.GetUpperBound(), x.GetCumulativeCount(), want)
			}
		}
		if h.GetSampleCount() != n || h.GetSampleSum() != sum {
			t.Errorf("%s: %d samples summing %v, want %d and %v", name, h.GetSampleCount(), h.GetSampleSum(), n, sum)
		}
	}
	check("snapflow_checkpoint_duration_seconds", 0.0001, 209.7152, map[float64]uint64{0.8192: 0, 1.6384: 1}, 1, 1.5)
	check("snapflow_checkpoint_size_bytes", 1024, 16<<30, map[float64]uint64{1 << 20: 0, 4 << 20: 1}, 1, 3<<20)
	check("snapflow_checkpoint_alignment_seconds", 0.0001, 209.7152, map[float64]uint64{0.0004: 0, 0.0008: 1, 209.7152: 1}, 2, 600.0005)
	check("snapflow_checkpoint_sync_seconds", 0.0001, 209.7152, map[float64]uint64{0.0001: 2}, 2, 0)
}

// Before Attach the status has empty lists, not nulls, and the JSON has
// the agreed snake_case fields.
func TestJSON(t *testing.T) {
	m, feed := newMonitor(t, monitor.Options{Job: "j"})
	feed(actors.Event{Kind: actors.EventCheckpointTriggered, Time: at(0), Epoch: 1, Checkpoint: 1})
	b, err := json.Marshal(m.Job())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"name":"j"`, `"state":"starting"`, `"operators":[]`, `"tasks":[]`, `"edges":[]`, `"nodes":[]`,
		`"last_checkpoint":null`, `"counts":{"completed":0,"aborted":0,"declined":0,"task_failures":0,"restores":0}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("job JSON %s lacks %s", b, want)
		}
	}
	c, _ := m.Checkpoint(1)
	b, err = json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"id":1,"savepoint":"","status":"in_progress","final":false,"epoch":1,"triggered":"2026-12-01T10:00:00Z","duration_seconds":0,"bytes":0,"uploaded_bytes":0,"in_flight_bytes":0,"alignment_seconds":0,"upload_seconds":0,"tasks":[]}`; got != want {
		t.Errorf("checkpoint JSON\n got %s\nwant %s", got, want)
	}
}
