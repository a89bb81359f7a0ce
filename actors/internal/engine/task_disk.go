package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/internal/diskstate"
	"github.com/snapflow/snapflow/internal/parallel"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// diskTransfers bounds the files of one task stored or read at once: each
// is held in memory whole while it moves.
const diskTransfers = 2

// uploadDisk stores the files of the database checkpoint c that reuse
// (stored files by name) does not hold, for checkpoint id, and returns the
// disk checkpoint that lists all of them.
func uploadDisk(ctx context.Context, cps *snapshots.Checkpoints, id, epoch uint64, task string, c *dataflow.DiskFiles, reuse map[string]*messages.StateFile) (*messages.DiskCheckpoint, error) {
	d := &messages.DiskCheckpoint{KeyGroupStart: c.Desc.GetKeyGroupStart(), KeyGroupEnd: c.Desc.GetKeyGroupEnd(), States: c.Desc.GetStates()}
	d.Files = make([]*messages.StateFile, len(c.Files))
	var todo []int
	for i, name := range c.Files {
		if f := reuse[name]; f != nil {
			if fi, err := os.Stat(filepath.Join(c.Dir, name)); err == nil && uint64(fi.Size()) == f.GetSize() {
				d.Files[i] = f
				continue
			}
		}
		todo = append(todo, i)
	}
	err := parallel.For(ctx, len(todo), diskTransfers, func(ctx context.Context, k int) error {
		i := todo[k]
		data, err := os.ReadFile(filepath.Join(c.Dir, c.Files[i]))
		if err != nil {
			return fmt.Errorf("disk state: %w", err)
		}
		f, err := cps.PutStateFile(ctx, id, epoch, task, c.Files[i], data)
		d.Files[i] = f
		return err
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// diskSources returns the disk checkpoints that task t's state is restored
// from: those of the stored states its state comes from (its own, or its
// parts after a rescale).
func (t *task) diskSources(inc *incarnation) []*messages.DiskCheckpoint {
	if inc.disk != nil { // a worker's task: the deployment names them
		return inc.disk[t.plan.ID]
	}
	parts := []string{t.plan.ID}
	if inc.assign != nil {
		parts = inc.assign.Task(t.idx).Parts
	}
	handles := make(map[string]*messages.StateHandle, len(inc.restore.Manifest.GetTasks()))
	for _, e := range inc.restore.Manifest.GetTasks() {
		handles[e.GetTaskId()] = e.GetState()
	}
	var out []*messages.DiskCheckpoint
	for _, id := range parts {
		if d := handles[id].GetDisk(); d != nil {
			out = append(out, d)
		}
	}
	return out
}

// restoreDisk restores, after the rest of the task's state, the on-disk
// states from the database checkpoints they were stored as: the files of
// each one that holds key groups of the task's range are read from the
// store (each checked against its size and checksum) into a directory of
// the task's, and the key groups of its range restored into its database.
// The one that holds most of them goes last: its files may become the
// database, with the others' entries of the task's key groups, written
// into tables first, ingested into it (see
// dataflow.DiskCheckpointer.RestoreFiles).
func (t *task) restoreDisk(inc *incarnation) error {
	sources := t.baseLast(t.diskSources(inc))
	if len(sources) == 0 {
		return nil
	}
	dc, ok := t.inst.(dataflow.DiskCheckpointer)
	if !ok {
		return fmt.Errorf("the checkpoint holds on-disk state for task %s, whose operator keeps no keyed state", t.plan.ID)
	}
	ctx, cancel := context.WithTimeout(inc.ctx, t.sh.timeout())
	defer cancel()
	var (
		local, downloaded atomic.Int64
		skippedAll        int64
		download, rebuild time.Duration
		reps              []dataflow.DiskRestore
	)
	defer func() {
		if len(reps) > 0 {
			t.sh.diskRestores.add(local.Load(), downloaded.Load(), skippedAll, download, rebuild, reps)
		}
	}()
	for i, d := range sources {
		if int(d.GetKeyGroupEnd()) <= t.plan.KeyGroupStart || int(d.GetKeyGroupStart()) >= t.plan.KeyGroupEnd {
			continue
		}
		if !dc.OnDisk() {
			_, err := dc.RestoreFiles("", d, false) // says why not
			return err
		}
		files := d.GetFiles()
		names := make(map[string]bool, len(files))
		for _, f := range files { // a manifest's names become paths here, and its keys reads
			n := f.GetName()
			if n == "" || n == "." || n == ".." || filepath.Base(n) != n || names[n] {
				return fmt.Errorf("the checkpoint lists a database file named %q (empty, a path, or twice): %w", n, snapshots.ErrCorrupt)
			}
			if _, _, ok := snapshots.ParseStateFileKey(t.sh.job, f.GetKey()); !ok {
				return fmt.Errorf("the checkpoint lists database file %q stored as %s, which is not a state file of job %q: %w", n, f.GetKey(), t.sh.job, snapshots.ErrCorrupt)
			}
			names[n] = true
		}
		dir, err := dc.PrepareRestore(strconv.Itoa(i))
		if err != nil {
			return err
		}
		t0 := time.Now()
		var loc, down atomic.Int64
		lc := t.sh.cfg.diskState
		fetch := func(files []*messages.StateFile) error {
			return parallel.For(ctx, len(files), diskTransfers, func(ctx context.Context, k int) error {
				f := files[k]
				if _, task, _ := snapshots.ParseStateFileKey(t.sh.job, f.GetKey()); lc != nil && !lc.NoLocalRecovery {
					found, err := lc.TakeLocal(t.sh.job, task, f.GetName(), int64(f.GetSize()), f.GetCrc32C(), dir)
					if err != nil {
						return err
					}
					if found {
						loc.Add(int64(f.GetSize()))
						return nil
					}
				}
				data, err := t.sh.cps.ReadStateFile(ctx, f)
				if err != nil {
					return err
				}
				down.Add(int64(len(data)))
				return os.WriteFile(filepath.Join(dir, f.GetName()), data, 0o644)
			})
		}
		var skipped int64
		if int(d.GetKeyGroupStart()) >= t.plan.KeyGroupStart && int(d.GetKeyGroupEnd()) <= t.plan.KeyGroupEnd {
			err = fetch(files) // every key is of the task's key groups
		} else {
			// The manifest and the other small files first: they say which
			// tables hold keys of the task's key groups, and only those are
			// read (a flush splits its tables by key range).
			var tables, rest []*messages.StateFile
			for _, f := range files {
				if diskstate.IsTable(f.GetName()) {
					tables = append(tables, f)
				} else {
					rest = append(rest, f)
				}
			}
			err = fetch(rest)
			var want map[string]bool
			if err == nil {
				want, err = diskstate.TablesFor(dir, max(t.plan.KeyGroupStart, int(d.GetKeyGroupStart())), min(t.plan.KeyGroupEnd, int(d.GetKeyGroupEnd())))
			}
			if err == nil {
				needed := tables[:0]
				for _, f := range tables {
					if want[f.GetName()] {
						needed = append(needed, f)
					} else {
						skipped += int64(f.GetSize())
					}
				}
				err = fetch(needed)
			}
		}
		download += time.Since(t0)
		local.Add(loc.Load())
		downloaded.Add(down.Load())
		skippedAll += skipped
		if err == nil {
			t.log.Info("restoring the on-disk state from its database files", "checkpoint", inc.restore.Manifest.GetCheckpointId(),
				"files", len(files), "local_bytes", loc.Load(), "downloaded_bytes", down.Load(), "skipped_bytes", skipped)
		}
		if err == nil {
			t1 := time.Now()
			var rep dataflow.DiskRestore
			rep, err = dc.RestoreFiles(dir, d, i == len(sources)-1)
			rebuild += time.Since(t1)
			if err == nil {
				reps = append(reps, rep)
				if rep.Adopted {
					t.adopted = d // its files are the database's: the next checkpoint may reference them
				}
			}
		}
		if rerr := os.RemoveAll(dir); err == nil && rerr != nil {
			err = fmt.Errorf("disk state: %w", rerr)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// baseLast returns the sources that hold key groups of the task's range,
// the one that holds most of them last (the first such on a tie), the
// others in their order.
func (t *task) baseLast(sources []*messages.DiskCheckpoint) []*messages.DiskCheckpoint {
	overlap := func(d *messages.DiskCheckpoint) int {
		return min(t.plan.KeyGroupEnd, int(d.GetKeyGroupEnd())) - max(t.plan.KeyGroupStart, int(d.GetKeyGroupStart()))
	}
	var out []*messages.DiskCheckpoint
	var base *messages.DiskCheckpoint
	for _, d := range sources {
		switch n := overlap(d); {
		case n <= 0:
		case base == nil:
			base = d
		case n > overlap(base):
			out = append(out, base)
			base = d
		default:
			out = append(out, d)
		}
	}
	if base != nil {
		out = append(out, base)
	}
	return out
}
