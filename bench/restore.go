package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// restoreTimeout bounds one restore of measureRestore.
const restoreTimeout = 5 * time.Minute

// restoreFigures is one restore of a row's newest checkpoint, and the raw
// reads of the checkpoint's bytes from the same store.
type restoreFigures struct {
	took       time.Duration // actors.Start to EventRunning
	checkpoint uint64        // the checkpoint restored
	reads      readStats     // what the restore read
	ckptBytes  int64         // the checkpoint's bytes (checkpointReads)
	raw        time.Duration // reading them, as many at once as the restore had
}

// fill sets row's restore figures.
func (f restoreFigures) fill(row *Row) {
	row.RestoreMs = msOf(f.took)
	row.RestoreReadBytes = measured(float64(f.reads.bytes))
	row.RestoreReads, row.RestoreReadParallelism = f.reads.gets, f.reads.peak
	row.RestoredCkptBytes = measured(float64(f.ckptBytes))
	row.RawReadMs = msOf(f.raw)
	row.RestoreToRawRead = per(f.raw.Seconds(), f.took.Seconds())
}

// measureRestore starts the job name of rc again, on store, where the row's
// job has stopped: it restores the newest complete checkpoint. It returns
// the time from actors.Start to EventRunning and what the restore read
// meanwhile, then stops the job (which takes no checkpoint) and reads the
// bytes of the checkpoint restored (checkpointReads) from the store store
// wraps, with as many reads at once as the restore had at most
// (replayReads). The collector runs before each of the two, so that
// neither pays for the garbage of what ran before it.
func measureRestore(ctx context.Context, store *countingStore, name string, rc rowConfig) (restoreFigures, error) {
	var f restoreFigures
	g, err := buildJob(name, rc, &probe{})
	if err != nil {
		return f, err
	}
	running := make(chan actors.Event, 1)
	failed := make(chan error, 1)
	opts := []actors.Option{actors.WithStore(store.store()), actors.WithCheckpointInterval(0),
		actors.WithListener(func(e actors.Event) {
			switch e.Kind {
			case actors.EventRunning:
				select {
				case running <- e:
				default:
				}
			case actors.EventTaskFailed, actors.EventFailed:
				select {
				case failed <- fmt.Errorf("%s %s: %w", e.Kind, e.Task, e.Err):
				default:
				}
			}
		})}
	if rc.Checkpointing == "incremental" {
		opts = append(opts, actors.WithIncrementalCheckpoints(rc.RewriteEvery))
	}
	opts = append(opts, backendOptions(rc)...)
	runtime.GC()
	store.reset()
	t0 := time.Now()
	j, err := actors.Start(ctx, g, opts...)
	if err != nil {
		return f, fmt.Errorf("bench: restore job %s: %w", name, err)
	}
	timeout := time.NewTimer(restoreTimeout)
	defer timeout.Stop()
	select {
	case e := <-running:
		f.took, f.checkpoint = e.Time.Sub(t0), e.Checkpoint
	case err = <-failed:
	case <-j.Done():
		err = fmt.Errorf("the job ended before it ran: %w", j.Wait())
	case <-ctx.Done():
		err = ctx.Err()
	case <-timeout.C:
		err = fmt.Errorf("not running within %v of Start", restoreTimeout)
	}
	f.reads = store.reset()
	if stopErr := j.Stop(); stopErr != nil && !isStopped(stopErr) && err == nil {
		err = stopErr
	}
	if err == nil && f.took <= 0 {
		err = errors.New("EventRunning came before Start returned")
	}
	if err != nil {
		return f, fmt.Errorf("bench: restore job %s: %w", name, err)
	}
	if f.checkpoint == 0 {
		return f, fmt.Errorf("bench: restore job %s: it restored no checkpoint", name)
	}
	ops, want, err := checkpointReads(ctx, store.Store, name, f.checkpoint)
	if err != nil {
		return f, err
	}
	runtime.GC()
	raw, n, err := replayReads(ctx, store.Store, ops, f.reads.peak)
	if err != nil {
		return f, fmt.Errorf("bench: restore job %s: raw reads of checkpoint %d: %w", name, f.checkpoint, err)
	}
	if n != want {
		return f, fmt.Errorf("bench: restore job %s: the raw reads of checkpoint %d returned %d bytes, want %d", name, f.checkpoint, n, want)
	}
	f.ckptBytes, f.raw = n, raw
	return f, nil
}

// checkpointReads lists the reads of the bytes checkpoint id of job holds
// in s, and their total: its manifest (with the states inline in it), each
// task's own state object whole (none when inline), and, of an object of
// an earlier checkpoint that an incremental state references, the sections
// it references, adjacent ones merged into one range.
func checkpointReads(ctx context.Context, s snapshots.Store, job string, id uint64) ([]readOp, int64, error) {
	m, err := snapshots.NewCheckpoints(s, job, nil).ReadManifest(ctx, id)
	if err != nil {
		return nil, 0, fmt.Errorf("bench: checkpoint %d of job %s: %w", id, job, err)
	}
	key := snapshots.ManifestKey(job, id)
	manifest, err := s.Get(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("bench: checkpoint %d of job %s: %w", id, job, err)
	}
	ops := []readOp{{key: key, length: -1}}
	total := int64(len(manifest))
	own := map[string]bool{}
	var secs []*messages.KeyGroupSection
	for _, t := range m.GetTasks() {
		h := t.GetState()
		if len(h.GetInline()) == 0 && h.GetKey() != "" && !own[h.GetKey()] { // an inline state is in the manifest
			own[h.GetKey()] = true
			ops = append(ops, readOp{key: h.GetKey(), length: -1})
			total += int64(h.GetSize())
		}
		for _, sec := range h.GetKeyGroups() {
			if k := sec.GetKey(); k != "" && k != h.GetKey() {
				secs = append(secs, sec)
			}
		}
		for _, f := range h.GetDisk().GetFiles() { // the on-disk backend's database files
			ops = append(ops, readOp{key: f.GetKey(), length: -1})
			total += int64(f.GetSize())
		}
	}
	slices.SortFunc(secs, func(a, b *messages.KeyGroupSection) int {
		return cmp.Or(cmp.Compare(a.GetKey(), b.GetKey()), cmp.Compare(a.GetOffset(), b.GetOffset()))
	})
	for i := 0; i < len(secs); {
		k, off, end := secs[i].GetKey(), secs[i].GetOffset(), secs[i].GetOffset()+secs[i].GetLength()
		for i++; i < len(secs) && secs[i].GetKey() == k && secs[i].GetOffset() <= end; i++ {
			end = max(end, secs[i].GetOffset()+secs[i].GetLength())
		}
		if own[k] {
			continue // read whole already
		}
		ops = append(ops, readOp{key: k, offset: int64(off), length: int64(end - off)})
		total += int64(end - off)
	}
	return ops, total, nil
}

// replayReads performs ops on s, with at most workers (at least 1) at
// once, and returns how long they took and the bytes they returned. A read
// of the whole object is a Get, a read of a range a GetRange (s must then
// be a snapshots.RangeReader).
func replayReads(ctx context.Context, s snapshots.Store, ops []readOp, workers int) (time.Duration, int64, error) {
	rr, _ := s.(snapshots.RangeReader)
	for _, op := range ops {
		if op.length >= 0 && rr == nil {
			return 0, 0, fmt.Errorf("bench: replay a range read of %s: the store %s cannot read ranges", op.key, s)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		bytes atomic.Int64
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	t0 := time.Now()
	for range min(max(workers, 1), max(len(ops), 1)) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(ops)); i = next.Add(1) - 1 {
				op := ops[i]
				var b []byte
				var err error
				if op.length < 0 {
					b, err = s.Get(ctx, op.key)
				} else {
					b, err = rr.GetRange(ctx, op.key, op.offset, op.length)
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					cancel()
					return
				}
				bytes.Add(int64(len(b)))
			}
		})
	}
	wg.Wait()
	took := time.Since(t0)
	if first != nil {
		return 0, 0, first
	}
	return took, bytes.Load(), nil
}
