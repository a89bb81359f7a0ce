package monitor

import (
	"slices"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/internal/engine"
)

// Histogram buckets: seconds from 1 ms doubling to about 4.4 min, bytes
// from 1 KiB quadrupling to 16 GiB.
var (
	secondsBuckets = prometheus.ExponentialBuckets(0.0001, 2, 22) // 100 µs to 210 s
	bytesBuckets   = prometheus.ExponentialBuckets(1024, 4, 13)
)

// The results of snapflow_checkpoints_total, and the causes of
// snapflow_task_failures_total exported even at zero.
var (
	results = []string{StatusCompleted, StatusAborted, StatusDeclined}
	causes  = []actors.FailureCause{actors.CausePanic, actors.CauseError, actors.CauseCommit,
		actors.CauseRestore, actors.CauseNodeLost, actors.CauseLinkLost, actors.CauseOther}
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, append([]string{"job_name"}, labels...), nil)
}

var (
	descDuration   = desc("snapflow_checkpoint_duration_seconds", "Time from the trigger of a checkpoint to its completion.")
	descSize       = desc("snapflow_checkpoint_size_bytes", "State bytes of a completed checkpoint, every task's.")
	descInFlight   = desc("snapflow_checkpoint_in_flight_bytes", "Channel state (records in flight) a completed unaligned checkpoint stored, every task's (0 when aligned).")
	descAlignment  = desc("snapflow_checkpoint_alignment_seconds", "Time a task with several input channels took to align their barriers, per such task per completed checkpoint.")
	descSync       = desc("snapflow_checkpoint_sync_seconds", "Synchronous part of a task's snapshot (records stop), per task per completed checkpoint.")
	descAsync      = desc("snapflow_checkpoint_async_seconds", "Asynchronous upload of a task's snapshot, per task per completed checkpoint.")
	descCount      = desc("snapflow_checkpoints_total", "Checkpoints and savepoints ended, by result (completed, aborted, declined).", "result")
	descLastID     = desc("snapflow_last_checkpoint_id", "Id of the newest completed checkpoint or savepoint (0: none).")
	descLastAge    = desc("snapflow_last_checkpoint_age_seconds", "Seconds since the newest checkpoint or savepoint completed.")
	descRestores   = desc("snapflow_restores_total", "Rollbacks of the job to a checkpoint after a failure.")
	descFailures   = desc("snapflow_task_failures_total", "Task failures, by cause.", "cause")
	descRecordsIn  = desc("snapflow_operator_records_in_total", "Records received by an operator's tasks.", "operator")
	descRecordsOut = desc("snapflow_operator_records_out_total", "Records emitted by an operator's tasks.", "operator")
	descBackpress  = desc("snapflow_task_backpressure_seconds_total", "Time during which an output of the task had no credit while batches waited for it.", "task")
	descQueued     = desc("snapflow_task_queued_batches", "Batches of the task waiting for credit now.", "task")
	descRefused    = desc("snapflow_node_refused_calls_total", "Calls from peers outside the cluster that this process's nodes refused (no token, or another secret's).")
)

// histogram counts observations into fixed buckets; it is guarded by
// Monitor.mu and exported as a const histogram at scrape.
type histogram struct {
	upper  []float64
	counts []uint64 // per bucket, not cumulative
	sum    float64
	n      uint64
}

func newHistogram(upper []float64) histogram {
	return histogram{upper: upper, counts: make([]uint64, len(upper))}
}

func (h *histogram) observe(v float64) {
	if i := sort.SearchFloat64s(h.upper, v); i < len(h.counts) {
		h.counts[i]++
	}
	h.sum += v
	h.n++
}

func (h *histogram) clone() histogram {
	c := *h
	c.counts = slices.Clone(h.counts)
	return c
}

func (h *histogram) metric(d *prometheus.Desc, job string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.upper))
	var cum uint64
	for i, u := range h.upper {
		cum += h.counts[i]
		buckets[u] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.n, h.sum, buckets, job)
}

type histograms struct {
	duration, size, alignment, sync, async, inFlight histogram
}

func newHistograms() histograms {
	return histograms{
		duration: newHistogram(secondsBuckets), size: newHistogram(bytesBuckets),
		alignment: newHistogram(secondsBuckets), sync: newHistogram(secondsBuckets), async: newHistogram(secondsBuckets),
		inFlight: newHistogram(bytesBuckets),
	}
}

// observe adds a completed checkpoint: once for its duration and size,
// once per task for the per-task figures.
// A checkpoint settled after a failover has no duration of its own (it
// includes the failover): only its size is observed. Alignment is observed
// for the tasks that align (aligns reports those with several input
// channels; nil: every task).
func (h *histograms) observe(e actors.Event, aligns func(task string) bool) {
	if !e.Settled {
		h.duration.observe(e.Duration.Seconds())
	}
	h.size.observe(float64(e.Bytes))
	h.inFlight.observe(float64(e.InFlight))
	for _, t := range e.Tasks {
		if aligns == nil || aligns(t.Task) {
			h.alignment.observe(t.Alignment.Seconds())
		}
		h.sync.observe(t.Sync.Seconds())
		h.async.observe(t.Async.Seconds())
	}
}

func (h *histograms) clone() histograms {
	return histograms{h.duration.clone(), h.size.clone(), h.alignment.clone(), h.sync.clone(), h.async.clone(), h.inFlight.clone()}
}

// collector exports a Monitor's metrics as const metrics built at scrape:
// the events only update counters under the monitor's lock, and the tasks'
// counters are read from the job here, never per record.
type collector struct{ m *Monitor }

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDuration, descSize, descInFlight, descAlignment, descSync, descAsync, descCount,
		descLastID, descLastAge, descRestores, descFailures, descRecordsIn, descRecordsOut, descBackpress, descQueued, descRefused} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	job, counts, h := m.name, m.counts, m.hist.clone()
	var last LastCheckpoint
	if m.last != nil {
		last = *m.last
	}
	failures := make(map[string]uint64, len(m.failures)+len(causes))
	for _, k := range causes {
		failures[string(k)] = 0
	}
	for k, v := range m.failures {
		failures[k] = v
	}
	m.mu.Unlock()

	ch <- h.duration.metric(descDuration, job)
	ch <- h.size.metric(descSize, job)
	ch <- h.inFlight.metric(descInFlight, job)
	ch <- h.alignment.metric(descAlignment, job)
	ch <- h.sync.metric(descSync, job)
	ch <- h.async.metric(descAsync, job)
	for _, r := range results {
		v := map[string]uint64{StatusCompleted: counts.Completed, StatusAborted: counts.Aborted, StatusDeclined: counts.Declined}[r]
		ch <- prometheus.MustNewConstMetric(descCount, prometheus.CounterValue, float64(v), job, r)
	}
	ch <- prometheus.MustNewConstMetric(descLastID, prometheus.GaugeValue, float64(last.ID), job)
	if !last.Time.IsZero() {
		ch <- prometheus.MustNewConstMetric(descLastAge, prometheus.GaugeValue, time.Since(last.Time).Seconds(), job)
	}
	ch <- prometheus.MustNewConstMetric(descRestores, prometheus.CounterValue, float64(counts.Restores), job)
	ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(engine.ReadWireStats().Refused), job)
	for k, v := range failures {
		ch <- prometheus.MustNewConstMetric(descFailures, prometheus.CounterValue, float64(v), job, k)
	}
	c.collectTasks(ch, job)
}

// collectTasks exports the attached job's task counters, summed per
// operator for the records.
func (c *collector) collectTasks(ch chan<- prometheus.Metric, job string) {
	tms, t := c.m.taskMetrics()
	if t == nil {
		return
	}
	// By operator name: an earlier job's tasks (carried) count too, so
	// that a rescale to fewer tasks does not make a counter go down.
	type sums struct{ in, out uint64 }
	var names []string
	byName := make(map[string]*sums, len(t.operators))
	for _, op := range t.operators {
		names = append(names, op.Name)
		byName[op.Name] = &sums{}
	}
	for _, tm := range tms {
		s := byName[tm.Operator]
		if s == nil {
			s = &sums{}
			byName[tm.Operator] = s
			names = append(names, tm.Operator)
		}
		s.in += tm.RecordsIn
		s.out += tm.RecordsOut
		ch <- prometheus.MustNewConstMetric(descBackpress, prometheus.CounterValue, tm.Backpressure.Seconds(), job, tm.Task)
		ch <- prometheus.MustNewConstMetric(descQueued, prometheus.GaugeValue, float64(tm.QueuedBatches), job, tm.Task)
	}
	for _, name := range names {
		s := byName[name]
		ch <- prometheus.MustNewConstMetric(descRecordsIn, prometheus.CounterValue, float64(s.in), job, name)
		ch <- prometheus.MustNewConstMetric(descRecordsOut, prometheus.CounterValue, float64(s.out), job, name)
	}
}
