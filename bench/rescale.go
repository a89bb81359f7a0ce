package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
	"google.golang.org/protobuf/proto"
)

// The rescale sweep (-sweep rescale) measures how long a job takes to
// restore a savepoint, against the state's size, at the parallelism the
// savepoint was taken at and at another one. For each state size one child
// process builds the state twice, at parallelism 2 and at 4, stops each job
// with a savepoint, and then restores those savepoints -repeat times in
// rounds of 2→2, 2→3, 4→4 and 4→2, so that each rescaling restore is
// measured side by side with its same-parallelism baseline.

// rescalePair is the restore of a savepoint taken at parallelism From into
// the same job at parallelism To.
type rescalePair struct{ From, To int }

func (p rescalePair) String() string { return fmt.Sprintf("%d→%d", p.From, p.To) }

// rescalePairs are the rows of each state size, in the order each round
// runs them: each rescaling restore after its baseline.
var rescalePairs = []rescalePair{{2, 2}, {2, 3}, {4, 4}, {4, 2}}

// rescaleSavepoint names the savepoint each state-building job stops with.
const rescaleSavepoint = "bench"

// Bounds of the waits of the rescale sweep: building the state and taking
// its savepoint, and one restore.
const (
	rescaleBuildTimeout   = 10 * time.Minute
	rescaleRestoreTimeout = 5 * time.Minute
)

// rescaleSpec is what a rescale child measures: the rows of one state size.
type rescaleSpec struct {
	StateBytes int64  `json:"state_bytes"` // keyed state: Keys × its bytes per key
	Keys       uint64 `json:"keys"`
	Store      string `json:"store"`
	Repeat     int    `json:"repeat"`
	// Profiles is a directory to write a CPU profile of every restore into
	// ("": none).
	Profiles string `json:"cpuprofile,omitempty"`
	// Backend "disk" keeps the keyed state on disk and restores
	// incremental checkpoints (rescale_disk.go); "" restores savepoints
	// of state on the heap.
	Backend string `json:"backend,omitempty"`
}

// blob is the bytes of state per key.
func (s rescaleSpec) blob() int { return int(s.StateBytes / int64(s.Keys)) }

// RescaleRow is a row of the rescale sweep: the restores of one savepoint
// at one parallelism. A metric not measured is null in JSON and "–" in the
// table.
type RescaleRow struct {
	StateBytes int64  `json:"state_bytes"` // keys × bytes per key
	Keys       uint64 `json:"keys"`
	Store      string `json:"store"`
	From       int    `json:"from_parallelism"`
	To         int    `json:"to_parallelism"`
	Runs       int    `json:"runs"`
	// SavepointBytes is the size of the keyed operator's task states in
	// the savepoint.
	SavepointBytes int64 `json:"savepoint_bytes"`
	// Restore time, from actors.Start to EventRunning: the median run, the
	// fastest and the slowest, and every run in the order they ran.
	RestoreP50Ms metric    `json:"restore_p50_ms"`
	RestoreMinMs metric    `json:"restore_min_ms"`
	RestoreMaxMs metric    `json:"restore_max_ms"`
	RestoresMs   []float64 `json:"restores_ms"`
	// CPUP50Ms is the median of the CPU time (user and system) the process
	// used during each restore, and CPUMs every run's (null where it
	// cannot be read).
	CPUP50Ms metric   `json:"cpu_p50_ms"`
	CPUMs    []metric `json:"cpu_ms"`
	// RatioToSameP is RestoreP50Ms against that of the same-parallelism
	// restore of the same savepoint (From→From); PairedRatio the median
	// over the rounds of each run against the baseline's run of its round,
	// which ran just before it.
	RatioToSameP metric `json:"ratio_to_same_parallelism"`
	PairedRatio  metric `json:"paired_ratio_to_same_parallelism"`
	// ReadBytes and ReadGets are what one restore read from the store
	// (the most of any run).
	ReadBytes int64 `json:"read_bytes"`
	ReadGets  int   `json:"read_gets"`
	// Per task of the keyed operator: TaskRead is the size of the stored
	// task states its state is built from, TaskShare the size of the key
	// groups it restores; the largest and the mean over the tasks, and the
	// largest ratio of a task's read to its share.
	TaskReadMaxBytes   metric `json:"task_read_max_bytes"`
	TaskReadMeanBytes  metric `json:"task_read_mean_bytes"`
	TaskShareMaxBytes  metric `json:"task_share_max_bytes"`
	TaskShareMeanBytes metric `json:"task_share_mean_bytes"`
	TaskReadOverShare  metric `json:"task_read_over_share_max"`
	// The rows of -backend disk (rescale_disk.go): Backend is "disk",
	// ValueBytes each key's value, StoredBytes the database files of the
	// checkpoint restored. DownloadP50Ms, RebuildP50Ms and RestartP50Ms
	// split the restore: the download and rebuild of the task whose two
	// together took longest, and the rest. Adopted, Excised, Ingested...
	// and RebuiltEntries are what the last run's tasks did with the files
	// (actors.DiskRestoreStats), DownloadedBytes what they read and
	// SkippedBytes the tables they did not, holding none of their keys.
	Backend         string `json:"backend,omitempty"`
	ValueBytes      int    `json:"value_bytes,omitempty"`
	StoredBytes     int64  `json:"stored_bytes,omitempty"`
	DownloadP50Ms   metric `json:"download_p50_ms"`
	RebuildP50Ms    metric `json:"rebuild_p50_ms"`
	RestartP50Ms    metric `json:"restart_p50_ms"`
	DownloadedBytes int64  `json:"downloaded_bytes,omitempty"`
	SkippedBytes    int64  `json:"skipped_bytes,omitempty"`
	Adopted         int    `json:"adopted,omitempty"`
	Excised         int    `json:"excised,omitempty"`
	IngestedBytes   int64  `json:"ingested_bytes,omitempty"`
	IngestedEntries int64  `json:"ingested_entries,omitempty"`
	RebuiltEntries  int64  `json:"rebuilt_entries,omitempty"`
}

func (r RescaleRow) pair() rescalePair { return rescalePair{r.From, r.To} }

// taskStats is what the tasks of the keyed operator of a restore read and
// restore, by the restore's plan.
type taskStats struct {
	savepoint                      int64
	readMax, readMean              float64
	shareMax, shareMean, overShare float64
	tasks                          int
}

// rescaleRun is one restore: how long it took and what it read.
type rescaleRun struct {
	d     time.Duration
	cpu   metric // ms
	reads readStats
}

// runRescale measures the rows of spec in this process, reporting
// progress. The savepoints and everything the restores write are removed
// from the store at the end.
func runRescale(ctx context.Context, spec rescaleSpec, progress io.Writer) ([]RescaleRow, error) {
	if spec.Keys == 0 || spec.blob() < 1 || spec.Repeat < 1 {
		return nil, fmt.Errorf("bench: rescale: %d bytes of state over %d keys, %d runs: want at least a byte per key and a run", spec.StateBytes, spec.Keys, spec.Repeat)
	}
	store, err := snapshots.Open(ctx, spec.Store)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	counted := newCountingStore(store)
	stamp := time.Now().UnixNano()
	jobs := map[int]string{} // by the savepoint's parallelism
	stats := map[rescalePair]taskStats{}
	for _, p := range rescalePairs {
		if _, ok := jobs[p.From]; ok {
			continue
		}
		job := fmt.Sprintf("bench-rescale-p%d-%d", p.From, stamp)
		jobs[p.From] = job
		defer removeJob(store, job)
		t0 := time.Now()
		if err := buildSavepoint(ctx, store, job, p.From, spec); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "bench: rescale %s: state built at p=%d and savepoint taken in %.1fs\n",
			mib(spec.StateBytes), p.From, time.Since(t0).Seconds())
		if err := addTaskStats(ctx, store, job, p.From, spec, stats); err != nil {
			return nil, err
		}
	}
	// The collector runs between restores, never during one: the heap
	// holds both savepoints (the memory store), which a restoring process
	// would not mark, and a collection during a restore lets the runtime
	// return pages to the OS that whichever restore comes next faults in
	// again (on this kind of VM that made single restores 2× slower).
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runs := map[rescalePair][]rescaleRun{}
	total := spec.Repeat * len(rescalePairs)
	for k := -1; k < spec.Repeat; k++ { // round -1 warms up: its runs are not kept
		for i, p := range rescalePairs {
			if k < 0 {
				fmt.Fprintf(progress, "[warm-up] rescale %s %s ...", mib(spec.StateBytes), p)
			} else {
				fmt.Fprintf(progress, "[%d/%d] rescale %s %s ...", k*len(rescalePairs)+i+1, total, mib(spec.StateBytes), p)
			}
			profile := ""
			if spec.Profiles != "" && k >= 0 {
				profile = filepath.Join(spec.Profiles, fmt.Sprintf("rescale-%s-%dto%d-run%d.pprof", sizeLabel(spec.StateBytes), p.From, p.To, k+1))
			}
			g := rescaleGraph(jobs[p.From], p.To, spec.Keys, spec.blob(), nil)
			run, err := restoreOnce(ctx, counted, g, profile)
			if err != nil {
				fmt.Fprintln(progress, " failed")
				return nil, fmt.Errorf("bench: rescale %s %s: %w", mib(spec.StateBytes), p, err)
			}
			fmt.Fprintf(progress, " %s ms (CPU %s ms), read %s in %d objects\n", thousands(float64(run.d.Microseconds())/1000, 1),
				run.cpu.cell(1), mib(run.reads.bytes), run.reads.gets)
			if k >= 0 {
				runs[p] = append(runs[p], run)
			}
		}
	}
	rows := make([]RescaleRow, 0, len(rescalePairs))
	for _, p := range rescalePairs {
		rows = append(rows, summariseRescale(spec, p, runs[p], stats[p]))
	}
	rescaleRatios(rows)
	return rows, nil
}

// buildSavepoint runs job at parallelism par until every key has its state,
// and stops it with savepoint rescaleSavepoint.
func buildSavepoint(ctx context.Context, store snapshots.Store, job string, par int, spec rescaleSpec) error {
	filled := make(chan struct{})
	g := rescaleGraph(job, par, spec.Keys, spec.blob(), func() { close(filled) })
	j, err := actors.Start(ctx, g, actors.WithStore(store), actors.WithCheckpointInterval(0),
		actors.WithCheckpointTimeout(rescaleBuildTimeout))
	if err != nil {
		return fmt.Errorf("bench: rescale: build the state at p=%d: %w", par, err)
	}
	defer func() { _ = j.Stop() }()
	timeout := time.NewTimer(rescaleBuildTimeout)
	defer timeout.Stop()
	select {
	case <-filled:
	case <-j.Done():
		return fmt.Errorf("bench: rescale: the job building the state at p=%d ended: %w", par, j.Wait())
	case <-ctx.Done():
		return ctx.Err()
	case <-timeout.C:
		return fmt.Errorf("bench: rescale: the state of %d keys was not built at p=%d within %v", spec.Keys, par, rescaleBuildTimeout)
	}
	if _, err := j.StopWithSavepoint(ctx, rescaleSavepoint); err != nil {
		return fmt.Errorf("bench: rescale: stop the job at p=%d with savepoint %q: %w", par, rescaleSavepoint, err)
	}
	if err := j.Wait(); !isStopped(err) {
		return fmt.Errorf("bench: rescale: the job at p=%d after its savepoint: %v, want it stopped", par, err)
	}
	return nil
}

// addTaskStats works out, for every pair restoring job's savepoint (taken
// at parallelism from), what each task of the keyed operator reads and
// restores: it plans the restore as actors.Start does (dataflow.PlanRestore)
// and sizes the parts of each task and the key groups it keeps.
func addTaskStats(ctx context.Context, store snapshots.Store, job string, from int, spec rescaleSpec, out map[rescalePair]taskStats) error {
	rp, err := snapshots.NewCheckpoints(store, job, nil).LoadSavepoint(ctx, rescaleSavepoint)
	if err != nil {
		return err
	}
	for _, p := range rescalePairs {
		if p.From != from {
			continue
		}
		plan, err := dataflow.NewPlan(rescaleGraph(job, p.To, spec.Keys, spec.blob(), nil))
		if err != nil {
			return err
		}
		declared, err := plan.DeclaredStates()
		if err != nil {
			return err
		}
		r, err := dataflow.PlanRestore(plan, declared, rp.Manifest, rp.States, dataflow.RestoreOptions{Rescale: true})
		if err != nil {
			return fmt.Errorf("bench: rescale %s: plan the restore: %w", p, err)
		}
		out[p] = keyedTaskStats(plan, r, rp)
	}
	return nil
}

// keyedTaskStats sizes what each task of the keyed operator "sum" reads
// on its own, as a worker of a cluster does, and restores (the key groups
// of its state). A task restored at its own parallelism reads its stored
// state whole; a rescaled one reads, from each stored state r lists, the
// bytes of the key groups of its range, through the handle's key-group
// index (snapshots.Checkpoints.ReadKeyGroups).
func keyedTaskStats(plan *dataflow.Plan, r *dataflow.Restore, rp *snapshots.Restorable) taskStats {
	stored := map[string]int64{}
	handles := map[string]*messages.StateHandle{}
	var s taskStats
	for _, t := range rp.Manifest.GetTasks() {
		stored[t.GetTaskId()] = int64(t.GetState().GetSize())
		handles[t.GetTaskId()] = t.GetState()
		if st := rp.States[t.GetTaskId()]; st.GetOperator() == "sum" {
			s.savepoint += int64(t.GetState().GetSize())
		}
	}
	for i, t := range plan.Tasks {
		if t.Operator != "sum" {
			continue
		}
		var read, share int64
		tr := r.Task(i)
		for _, id := range tr.Parts {
			if tr.Rescaled && handles[id].GetIndexed() {
				read += indexedSpan(handles[id], t.KeyGroupStart, t.KeyGroupEnd)
			} else {
				read += stored[id]
			}
		}
		for _, g := range r.State(plan, i, rp.States).GetKeyGroups() {
			share += int64(proto.Size(g))
		}
		s.tasks++
		s.readMax, s.readMean = max(s.readMax, float64(read)), s.readMean+float64(read)
		s.shareMax, s.shareMean = max(s.shareMax, float64(share)), s.shareMean+float64(share)
		if share > 0 {
			s.overShare = max(s.overShare, float64(read)/float64(share))
		}
	}
	if s.tasks > 0 {
		s.readMean /= float64(s.tasks)
		s.shareMean /= float64(s.tasks)
	}
	return s
}

// indexedSpan is the bytes ReadKeyGroups reads from the state h for the
// key groups [start, end): from the first one's offset to the last one's
// end.
func indexedSpan(h *messages.StateHandle, start, end int) int64 {
	var from, to uint64
	found := false
	for _, s := range h.GetKeyGroups() {
		if int(s.GetKeyGroup()) < start || int(s.GetKeyGroup()) >= end {
			continue
		}
		if !found {
			from, found = s.GetOffset(), true
		}
		to = s.GetOffset() + s.GetLength()
	}
	return int64(to - from)
}

// restoreOnce starts g from savepoint rescaleSavepoint and returns the time
// from Start to EventRunning and what the job read from store meanwhile;
// then it stops the job. With a profile path, the restore is profiled.
func restoreOnce(ctx context.Context, store *countingStore, g *topology.Graph, profile string) (rescaleRun, error) {
	runtime.GC() // the last restore's garbage is no part of this one (see runRescale)
	running := make(chan time.Time, 1)
	failed := make(chan error, 1)
	listen := func(e actors.Event) {
		switch e.Kind {
		case actors.EventRunning:
			select {
			case running <- e.Time:
			default:
			}
		case actors.EventTaskFailed, actors.EventFailed:
			select {
			case failed <- fmt.Errorf("%s %s: %w", e.Kind, e.Task, e.Err):
			default:
			}
		}
	}
	stopProfile, err := startProfile(profile)
	if err != nil {
		return rescaleRun{}, err
	}
	store.reset()
	cpu0, cpuOK := processCPU()
	t0 := time.Now()
	j, err := actors.Start(ctx, g, actors.WithStore(store.store()), actors.WithSavepoint(rescaleSavepoint),
		actors.WithCheckpointInterval(0), actors.WithListener(listen))
	if err != nil {
		stopProfile()
		return rescaleRun{}, err
	}
	timeout := time.NewTimer(rescaleRestoreTimeout)
	defer timeout.Stop()
	var run rescaleRun
	select {
	case at := <-running:
		run.d = at.Sub(t0)
	case err = <-failed:
	case <-j.Done():
		err = fmt.Errorf("the job ended before it ran: %w", j.Wait())
	case <-ctx.Done():
		err = ctx.Err()
	case <-timeout.C:
		err = fmt.Errorf("not running within %v of Start", rescaleRestoreTimeout)
	}
	if cpu1, ok := processCPU(); ok && cpuOK {
		run.cpu = msOf(cpu1 - cpu0)
	}
	stopProfile()
	run.reads = store.reset()
	if stopErr := j.Stop(); stopErr != nil && !isStopped(stopErr) && err == nil {
		err = stopErr
	}
	if err == nil && run.d <= 0 {
		err = errors.New("EventRunning came before Start returned")
	}
	return run, err
}

// summariseRescale is the row of the runs of pair p: the median run (the
// lower middle when even, as for the other sweeps), the fastest and the
// slowest, the most bytes read, and the tasks' reads.
func summariseRescale(spec rescaleSpec, p rescalePair, runs []rescaleRun, ts taskStats) RescaleRow {
	row := RescaleRow{StateBytes: spec.StateBytes, Keys: spec.Keys, Store: spec.Store, From: p.From, To: p.To,
		Runs: len(runs), SavepointBytes: ts.savepoint}
	ds := make([]time.Duration, len(runs))
	var cpu []float64
	for i, r := range runs {
		ds[i] = r.d
		row.RestoresMs = append(row.RestoresMs, float64(r.d.Microseconds())/1000)
		row.CPUMs = append(row.CPUMs, r.cpu)
		if v, ok := r.cpu.value(); ok {
			cpu = append(cpu, v)
		}
		if r.reads.bytes > row.ReadBytes {
			row.ReadBytes, row.ReadGets = r.reads.bytes, r.reads.gets
		}
	}
	if len(ds) > 0 {
		slices.Sort(ds)
		row.RestoreP50Ms, row.RestoreMinMs, row.RestoreMaxMs = msOf(ds[(len(ds)-1)/2]), msOf(ds[0]), msOf(ds[len(ds)-1])
	}
	if len(cpu) > 0 {
		row.CPUP50Ms = measured(lowerMedian(cpu))
	}
	if ts.tasks > 0 {
		row.TaskReadMaxBytes, row.TaskReadMeanBytes = measured(ts.readMax), measured(ts.readMean)
		row.TaskShareMaxBytes, row.TaskShareMeanBytes = measured(ts.shareMax), measured(ts.shareMean)
		if ts.overShare > 0 {
			row.TaskReadOverShare = measured(ts.overShare)
		}
	}
	return row
}

// rescaleRatios sets each row's restore time against that of the
// same-parallelism restore of the same savepoint and state size: the
// ratio of the medians, and the median of the ratios of the runs of one
// round (run k against the baseline's run k).
func rescaleRatios(rows []RescaleRow) {
	for i := range rows {
		r := &rows[i]
		r.RatioToSameP, r.PairedRatio = metric{}, metric{}
		for _, b := range rows {
			if b.StateBytes != r.StateBytes || b.Keys != r.Keys || b.Backend != r.Backend || b.From != r.From || b.To != r.From {
				continue
			}
			if v, ok := r.RestoreP50Ms.value(); ok {
				r.RatioToSameP = per(v, b.RestoreP50Ms.or(0))
			}
			var paired []float64
			for k := range min(len(r.RestoresMs), len(b.RestoresMs)) {
				if b.RestoresMs[k] > 0 {
					paired = append(paired, r.RestoresMs[k]/b.RestoresMs[k])
				}
			}
			if len(paired) > 0 {
				r.PairedRatio = measured(lowerMedian(paired))
			}
		}
	}
}

// lowerMedian is the median of vs, the lower middle when their number is
// even (as the other sweeps' rows); vs is sorted in place.
func lowerMedian(vs []float64) float64 {
	slices.Sort(vs)
	return vs[(len(vs)-1)/2]
}

// sizeLabel names a byte count in a file name: 256MiB, 64KiB or 100B.
func sizeLabel(b int64) string {
	switch {
	case b%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", b>>20)
	case b%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", b>>10)
	}
	return fmt.Sprintf("%dB", b)
}

// mib formats a byte count in MiB with one decimal.
func mib(b int64) string { return thousands(float64(b)/(1<<20), 1) + " MiB" }
