package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/benchwork"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// The rescale sweep with -backend disk measures, in the shape of Flink's
// RocksIncrementalCheckpointReScaleBenchmark, how long a job whose keyed
// state is on disk takes to restore an incremental checkpoint at another
// parallelism, against the restore of the same checkpoint at its own
// parallelism. For each state size one child process fills the state at
// parallelism 2 and at 3 (one value of diskRescaleValueBytes random bytes
// per key, incremental checkpoints every diskRescaleCheckpointEvery while
// it fills, a last one once every key is written), stops each job, and
// then restores those checkpoints -repeat times in rounds of 2→2, 2→3,
// 3→3 and 3→2. Each restore's time is split into the download of the
// database files (from the store into the tasks' directories), the
// rebuild of the tasks' databases from them, and the rest of the restart
// (planning, deploying, the other state): the first two are those of the
// task whose download and rebuild together took longest, as the tasks
// restore side by side (actors.Job.DiskRestoreStats).

// diskRescalePairs are the rows of each state size, in the order each
// round runs them: each rescaling restore after its baseline.
var diskRescalePairs = []rescalePair{{2, 2}, {2, 3}, {3, 3}, {3, 2}}

// diskRescaleValueBytes is the bytes of each key's value: the state size
// over them is the number of keys, unless -keys is given.
const diskRescaleValueBytes = 256

// diskRescaleCheckpointEvery is the pause between the incremental
// checkpoints taken while the state fills.
const diskRescaleCheckpointEvery = 2 * time.Second

// defaultDiskRescaleSizes are the state sizes of -sweep rescale -backend disk.
const defaultDiskRescaleSizes = "256MiB,1GiB"

// diskRescaleGraph is the disk rescale sweep's job: one source task that
// emits one record per key (keys 0..keys-1) and then idles, a keyed
// operator at parallelism par that sets each key's value, on disk, to
// valueBytes random bytes of its own (incompressible, so that the files
// hold the state's size), and a sink that calls filled once every key's
// record has reached it.
func diskRescaleGraph(job string, par int, keys uint64, valueBytes int, filled func()) *topology.Graph {
	g := topology.New(job, topology.MaxParallelism(rescaleMaxParallelism))
	gen := benchwork.NewGenerator(keys, 16)
	src := topology.FromSource(g, "source", func(int, int) topology.Source[benchwork.Record] {
		return &fillSource{gen: gen}
	}, topology.Parallelism(1))
	vals := topology.Process(topology.KeyBy(src, recordKey), "value", func(ks *topology.KeyedSetup[uint64]) topology.ProcessFunc[uint64, benchwork.Record, uint64] {
		v := topology.Value[string](ks, "v")
		buf := make([]byte, valueBytes)
		return func(ctx *topology.Context[uint64], r benchwork.Record, out *topology.Collector[uint64]) error {
			rng := rand.New(rand.NewPCG(r.Key, 0x5eed))
			for i := 0; i < len(buf); i += 8 {
				x := rng.Uint64()
				for j := i; j < min(i+8, len(buf)); j++ {
					buf[j] = byte(x)
					x >>= 8
				}
			}
			v.Set(string(buf))
			out.Emit(r.Key)
			return nil
		}
	}, topology.Parallelism(par))
	var seen atomic.Uint64
	var once sync.Once
	topology.Sink(vals, "sink", func(uint64) error {
		if seen.Add(1) == keys && filled != nil {
			once.Do(filled)
		}
		return nil
	})
	return g
}

// diskRescaleRun is one restore: its time, split, and what it did.
type diskRescaleRun struct {
	rescaleRun
	stats actors.DiskRestoreStats
}

// runDiskRescale measures the rows of spec (Backend "disk") in this
// process, reporting progress. The checkpoints and everything the
// restores write are removed from the store at the end, and the tasks'
// databases from the local disk.
func runDiskRescale(ctx context.Context, spec rescaleSpec, progress io.Writer) ([]RescaleRow, error) {
	if spec.Keys == 0 || spec.blob() < 1 || spec.Repeat < 1 {
		return nil, fmt.Errorf("bench: rescale on disk: %d bytes of state over %d keys, %d runs: want at least a byte per key and a run", spec.StateBytes, spec.Keys, spec.Repeat)
	}
	store, err := snapshots.Open(ctx, spec.Store)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	dir, err := os.MkdirTemp("", "bench-rescale-disk-")
	if err != nil {
		return nil, fmt.Errorf("bench: rescale on disk: %w", err)
	}
	defer os.RemoveAll(dir)
	disk := actors.DiskState{Dir: dir}
	counted := newCountingStore(store)
	stamp := time.Now().UnixNano()
	type built struct {
		job    string
		id     uint64
		stored int64
	}
	jobs := map[int]built{}
	for _, p := range diskRescalePairs {
		if _, ok := jobs[p.From]; ok {
			continue
		}
		job := fmt.Sprintf("bench-rescale-disk-p%d-%d", p.From, stamp)
		defer removeJob(store, job)
		t0 := time.Now()
		id, n, err := buildDiskCheckpoint(ctx, store, job, p.From, spec, disk)
		if err != nil {
			return nil, err
		}
		stored, err := diskCheckpointBytes(ctx, store, job, id)
		if err != nil {
			return nil, err
		}
		jobs[p.From] = built{job, id, stored}
		fmt.Fprintf(progress, "bench: rescale on disk %s: state built at p=%d in %.1fs, %d incremental checkpoints, the last (%d) of %s of database files\n",
			mib(spec.StateBytes), p.From, time.Since(t0).Seconds(), n, id, mib(stored))
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // as runRescale: no collection during a restore
	runs := map[rescalePair][]diskRescaleRun{}
	total := spec.Repeat * len(diskRescalePairs)
	for k := -1; k < spec.Repeat; k++ { // round -1 warms up: its runs are not kept
		for i, p := range diskRescalePairs {
			if k < 0 {
				fmt.Fprintf(progress, "[warm-up] rescale on disk %s %s ...", mib(spec.StateBytes), p)
			} else {
				fmt.Fprintf(progress, "[%d/%d] rescale on disk %s %s ...", k*len(diskRescalePairs)+i+1, total, mib(spec.StateBytes), p)
			}
			profile := ""
			if spec.Profiles != "" && k >= 0 {
				profile = filepath.Join(spec.Profiles, fmt.Sprintf("rescale-disk-%s-%dto%d-run%d.pprof", sizeLabel(spec.StateBytes), p.From, p.To, k+1))
			}
			b := jobs[p.From]
			g := diskRescaleGraph(b.job, p.To, spec.Keys, spec.blob(), nil)
			run, err := restoreDiskOnce(ctx, counted, g, b.id, disk, profile)
			if err != nil {
				fmt.Fprintln(progress, " failed")
				return nil, fmt.Errorf("bench: rescale on disk %s %s: %w", mib(spec.StateBytes), p, err)
			}
			s := run.stats
			fmt.Fprintf(progress, " %s ms (download %s, rebuild %s ms), downloaded %s, skipped %s, adopted %d, ingested %s, rebuilt %s entries\n",
				thousands(float64(run.d.Microseconds())/1000, 1), msOf(s.SlowestDownload).cell(1), msOf(s.SlowestRebuild).cell(1),
				mib(s.DownloadedBytes), mib(s.SkippedBytes), s.Adopted, mib(s.IngestedBytes), count(s.Rebuilt))
			if k >= 0 {
				runs[p] = append(runs[p], run)
			}
		}
	}
	rows := make([]RescaleRow, 0, len(diskRescalePairs))
	for _, p := range diskRescalePairs {
		rows = append(rows, summariseDiskRescale(spec, p, runs[p], jobs[p.From].stored))
	}
	rescaleRatios(rows)
	return rows, nil
}

// buildDiskCheckpoint runs job at parallelism par, its state on disk,
// until every key has its value, with an incremental checkpoint every
// diskRescaleCheckpointEvery meanwhile and one once it is full; then it
// stops the job. It returns the last checkpoint's id and the number taken.
func buildDiskCheckpoint(ctx context.Context, store snapshots.Store, job string, par int, spec rescaleSpec, disk actors.DiskState) (uint64, int, error) {
	filled := make(chan struct{})
	g := diskRescaleGraph(job, par, spec.Keys, spec.blob(), func() { close(filled) })
	j, err := actors.Start(ctx, g, actors.WithStore(store), actors.WithCheckpointInterval(0),
		actors.WithCheckpointTimeout(rescaleBuildTimeout), actors.WithIncrementalCheckpoints(0), actors.WithDiskState(disk))
	if err != nil {
		return 0, 0, fmt.Errorf("bench: rescale on disk: build the state at p=%d: %w", par, err)
	}
	defer func() { _ = j.Stop() }()
	deadline := time.NewTimer(rescaleBuildTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(diskRescaleCheckpointEvery)
	defer tick.Stop()
	n := 0
	for full := false; !full; {
		select {
		case <-filled:
			full = true
		case <-tick.C:
			if _, err := j.Checkpoint(ctx); err != nil {
				return 0, 0, fmt.Errorf("bench: rescale on disk: a checkpoint while the state fills at p=%d: %w", par, err)
			}
			n++
		case <-j.Done():
			return 0, 0, fmt.Errorf("bench: rescale on disk: the job building the state at p=%d ended: %w", par, j.Wait())
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-deadline.C:
			return 0, 0, fmt.Errorf("bench: rescale on disk: the state of %d keys was not built at p=%d within %v", spec.Keys, par, rescaleBuildTimeout)
		}
	}
	id, err := j.Checkpoint(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("bench: rescale on disk: the last checkpoint at p=%d: %w", par, err)
	}
	if err := j.Stop(); !isStopped(err) {
		return 0, 0, fmt.Errorf("bench: rescale on disk: stop the job at p=%d: %v, want it stopped", par, err)
	}
	return id, n + 1, nil
}

// diskCheckpointBytes is the size of the database files of the keyed
// operator's tasks in checkpoint id of job.
func diskCheckpointBytes(ctx context.Context, store snapshots.Store, job string, id uint64) (int64, error) {
	m, err := snapshots.NewCheckpoints(store, job, nil).ReadManifest(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("bench: rescale on disk: checkpoint %d of %s: %w", id, job, err)
	}
	var n int64
	for _, t := range m.GetTasks() {
		for _, f := range t.GetState().GetDisk().GetFiles() {
			n += int64(f.GetSize())
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("bench: rescale on disk: checkpoint %d of %s holds no database file", id, job)
	}
	return n, nil
}

// restoreDiskOnce starts g from checkpoint id with its state on disk, and
// returns the time from Start to EventRunning, what the job read from
// store meanwhile and what its tasks did with their database files; then
// it stops the job. With a profile path, the restore is profiled.
func restoreDiskOnce(ctx context.Context, store *countingStore, g *topology.Graph, id uint64, disk actors.DiskState, profile string) (diskRescaleRun, error) {
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
		return diskRescaleRun{}, err
	}
	store.reset()
	cpu0, cpuOK := processCPU()
	t0 := time.Now()
	j, err := actors.Start(ctx, g, actors.WithStore(store.store()), actors.WithCheckpoint(id), actors.WithCheckpointInterval(0),
		actors.WithIncrementalCheckpoints(0), actors.WithDiskState(disk), actors.WithListener(listen))
	if err != nil {
		stopProfile()
		return diskRescaleRun{}, err
	}
	timeout := time.NewTimer(rescaleRestoreTimeout)
	defer timeout.Stop()
	var run diskRescaleRun
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
	run.stats = j.DiskRestoreStats()
	if stopErr := j.Stop(); stopErr != nil && !isStopped(stopErr) && err == nil {
		err = stopErr
	}
	if err == nil && run.d <= 0 {
		err = errors.New("EventRunning came before Start returned")
	}
	if err == nil && run.stats.Tasks == 0 {
		err = errors.New("no task restored database files")
	}
	return run, err
}

// summariseDiskRescale is the row of the runs of pair p: the median run,
// the fastest and the slowest, the medians of its parts, and what the
// tasks did with their files (the last run's).
func summariseDiskRescale(spec rescaleSpec, p rescalePair, runs []diskRescaleRun, stored int64) RescaleRow {
	plain := make([]rescaleRun, len(runs))
	var download, rebuild, restart []float64
	for i, r := range runs {
		plain[i] = r.rescaleRun
		d, b := r.stats.SlowestDownload, r.stats.SlowestRebuild
		download = append(download, msOf(d).or(0))
		rebuild = append(rebuild, msOf(b).or(0))
		restart = append(restart, msOf(r.d-d-b).or(0))
	}
	row := summariseRescale(spec, p, plain, taskStats{})
	row.Backend, row.ValueBytes, row.StoredBytes = "disk", spec.blob(), stored
	if len(runs) > 0 {
		row.DownloadP50Ms = measured(lowerMedian(download))
		row.RebuildP50Ms = measured(lowerMedian(rebuild))
		row.RestartP50Ms = measured(lowerMedian(restart))
		s := runs[len(runs)-1].stats
		row.Adopted, row.Excised, row.IngestedBytes, row.IngestedEntries, row.RebuiltEntries = s.Adopted, s.Excised, s.IngestedBytes, s.IngestedEntries, s.Rebuilt
		row.DownloadedBytes, row.SkippedBytes = s.DownloadedBytes, s.SkippedBytes
	}
	return row
}

// diskRescaleCols are the columns of the rescale table of rows on disk.
var diskRescaleCols = []rescaleColumn{
	{"state MiB", func(r RescaleRow) string { return mibCell(measured(float64(r.StateBytes))) }},
	{"files MiB", func(r RescaleRow) string { return mibCell(measured(float64(r.StoredBytes))) }},
	{"p", func(r RescaleRow) string { return r.pair().String() }},
	{"runs", func(r RescaleRow) string { return count(int64(r.Runs)) }},
	{"restore p50 ms", func(r RescaleRow) string { return r.RestoreP50Ms.cell(1) }},
	{"min / max ms", func(r RescaleRow) string { return r.RestoreMinMs.cell(1) + " / " + r.RestoreMaxMs.cell(1) }},
	{"download ms", func(r RescaleRow) string { return r.DownloadP50Ms.cell(1) }},
	{"rebuild ms", func(r RescaleRow) string { return r.RebuildP50Ms.cell(1) }},
	{"restart ms", func(r RescaleRow) string { return r.RestartP50Ms.cell(1) }},
	{"CPU p50 ms", func(r RescaleRow) string { return r.CPUP50Ms.cell(1) }},
	{"× same p", func(r RescaleRow) string { return ratioCell(r.RatioToSameP) }},
	{"paired", func(r RescaleRow) string { return ratioCell(r.PairedRatio) }},
	{"downloaded MiB", func(r RescaleRow) string { return mibCell(measured(float64(r.DownloadedBytes))) }},
	{"skipped MiB", func(r RescaleRow) string { return mibCell(measured(float64(r.SkippedBytes))) }},
	{"adopted", func(r RescaleRow) string { return count(int64(r.Adopted)) }},
	{"excised", func(r RescaleRow) string { return count(int64(r.Excised)) }},
	{"ingested MiB", func(r RescaleRow) string { return mibCell(measured(float64(r.IngestedBytes))) }},
	{"rebuilt entries", func(r RescaleRow) string { return count(r.RebuiltEntries) }},
}

// diskRescaleNote explains the rescale table of rows on disk.
const diskRescaleNote = `restore: from actors.Start with WithCheckpoint to EventRunning (every task has restored its state), the state on disk
  (WithDiskState) restored from an incremental checkpoint's database files; the median run, and the fastest and slowest;
  the rows of a state size run interleaved (2→2, 2→3, 3→3, 3→2, again) in one process.
p: the checkpoint's parallelism → the restored job's, of the keyed operator (max parallelism %d, keys: %s, one value each).
files: the database files of the checkpoint restored (the keyed tasks').
download, rebuild: of the task whose download and rebuild together took longest (tasks restore side by side), the median
  run: download puts its checkpoint files in its directories (from the store), rebuild makes its database of them;
  restart: the rest of the restore (planning, deploying, the other state).
× same p: restore p50 against the same-parallelism restore of the same checkpoint (2→3 against 2→2, 3→2 against 3→3);
  paired: the median of each run against the baseline's run of its round, just before it. Target: at most 1.5×.
downloaded: the database files all tasks read from the store; skipped: the tables they left, holding none of their keys.
adopted: stored databases that became a task's database without a copy; excised: key-group ranges removed from them;
  ingested: tables written from the other stored databases' entries, in key order, and ingested; rebuilt: entries
  written one by one (all of the last run's tasks).
`
