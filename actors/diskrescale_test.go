package actors_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// diskRescaleKeys and diskRescaleRecords shape diskRescaleJob: records
// 1..n, key v % keys.
const diskRescaleKeys, diskRescaleRecords = 500, 4000

// firstErr keeps the first error reported to it.
type firstErr struct {
	mu  sync.Mutex
	err error
}

func (f *firstErr) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

func (f *firstErr) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// diskRescaleJob: records 1..n of a gated source, keyed by v % keys, into
// operator "state" at parallelism par, which keeps per key the sum of its
// records (sum), a map of v % 5 to the number of its records with that
// rest (seen), its last record (last, with a time-to-live of an hour) and
// 200 bytes written once (pad). On every 41st record it ranges over the
// key's map: the counts must add up to the number of the key's records so
// far, over Len entries; a mismatch is reported to bad.
func diskRescaleJob(par int, gate *testsrc.Gate, bad *firstErr) *topology.Graph {
	g := topology.New("diskrescale", topology.MaxParallelism(64))
	src := topology.FromSource(g, "source", func(int, int) topology.Source[int64] {
		return &testsrc.Gated{N: diskRescaleRecords, Gate: gate}
	})
	keyed := topology.KeyBy(src, func(v int64) int64 { return v % diskRescaleKeys })
	out := topology.Process(keyed, "state", func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
		sum := topology.Value[int64](ks, "sum")
		seen := topology.MapOf[int64, int64](ks, "seen")
		last := topology.Value[int64](ks, "last").WithTTL(time.Hour)
		pad := topology.Value[string](ks, "pad")
		return func(ctx *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
			x, _ := sum.Get()
			sum.Set(x + v)
			c, _ := seen.Get(v % 5)
			seen.Put(v%5, c+1)
			last.Set(v)
			if x == 0 {
				pad.Set(fmt.Sprintf("%-200d", ctx.Key()))
			}
			if v%41 != 0 { // a range per record costs a scan on disk: one record in 41, of every key in turn
				out.Emit(v)
				return nil
			}
			var total int64
			n := 0
			for _, c := range seen.All {
				total += c
				n++
			}
			if want := keyRecords(v); total != want || n != seen.Len() {
				bad.set(fmt.Errorf("key %d at record %d: the map's %d entries (Len %d) count %d records, want %d", ctx.Key(), v, n, seen.Len(), total, want))
			}
			out.Emit(v)
			return nil
		}
	}, topology.Parallelism(par))
	topology.Sink(out, "sink", func(int64) error { return nil })
	return g
}

// keyRecords is the number of records 1..v of v's key.
func keyRecords(v int64) int64 {
	r := v % diskRescaleKeys
	if r == 0 {
		return v / diskRescaleKeys
	}
	return (v-r)/diskRescaleKeys + 1
}

// diskRescaleState is what diskRescaleJob's tasks hold, by key.
type diskRescaleState struct {
	sum, last map[int64]int64
	seen      map[int64]map[int64]int64
	pad       map[int64]string
}

// wantDiskRescale is the state after records 1..limit.
func wantDiskRescale(limit int64) diskRescaleState {
	s := diskRescaleState{sum: map[int64]int64{}, last: map[int64]int64{}, seen: map[int64]map[int64]int64{}, pad: map[int64]string{}}
	for v := int64(1); v <= limit; v++ {
		k := v % diskRescaleKeys
		s.sum[k] += v
		s.last[k] = v
		if s.seen[k] == nil {
			s.seen[k] = map[int64]int64{}
			s.pad[k] = fmt.Sprintf("%-200d", k)
		}
		s.seen[k][v%5]++
	}
	return s
}

func (s diskRescaleState) equal(o diskRescaleState) bool {
	return maps.Equal(s.sum, o.sum) && maps.Equal(s.last, o.last) && maps.Equal(s.pad, o.pad) &&
		maps.EqualFunc(s.seen, o.seen, maps.Equal[map[int64]int64])
}

// readDiskRescale reads checkpoint id's state of operator "state" by task,
// expanding the on-disk states, and checks that every task holds only the
// key groups of its range.
func readDiskRescale(t *testing.T, cps *snapshots.Checkpoints, id uint64) (diskRescaleState, map[string]diskRescaleState) {
	t.Helper()
	ctx := context.Background()
	m, err := cps.ReadManifest(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	rp := &snapshots.Restorable{Manifest: m, States: map[string]*messages.TaskState{}}
	for _, e := range m.GetTasks() {
		if rp.States[e.GetTaskId()], err = cps.ReadTaskState(ctx, e.GetState()); err != nil {
			t.Fatal(err)
		}
	}
	if err := topology.ExpandDiskState(ctx, cps, rp, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	all := diskRescaleState{sum: map[int64]int64{}, last: map[int64]int64{}, seen: map[int64]map[int64]int64{}, pad: map[int64]string{}}
	byTask := map[string]diskRescaleState{}
	for _, e := range m.GetTasks() {
		if e.GetOperator() != "state" {
			continue
		}
		st := rp.States[e.GetTaskId()]
		for _, g := range st.GetKeyGroups() {
			if g.GetKeyGroup() < e.GetKeyGroupStart() || g.GetKeyGroup() >= e.GetKeyGroupEnd() {
				t.Errorf("checkpoint %d: task %s (key groups [%d, %d)) holds key group %d", id, e.GetTaskId(), e.GetKeyGroupStart(), e.GetKeyGroupEnd(), g.GetKeyGroup())
			}
		}
		var s diskRescaleState
		if s.sum, err = topology.DecodeValueState[int64, int64](st, "sum"); err == nil {
			if s.last, err = topology.DecodeValueState[int64, int64](st, "last"); err == nil {
				if s.pad, err = topology.DecodeValueState[int64, string](st, "pad"); err == nil {
					s.seen, err = topology.DecodeMapState[int64, int64, int64](st, "seen")
				}
			}
		}
		if err != nil {
			t.Fatalf("checkpoint %d: task %s: %v", id, e.GetTaskId(), err)
		}
		byTask[e.GetTaskId()] = s
		for k := range s.sum {
			if _, dup := all.sum[k]; dup {
				t.Errorf("checkpoint %d: key %d held by two tasks", id, k)
			}
		}
		maps.Copy(all.sum, s.sum)
		maps.Copy(all.last, s.last)
		maps.Copy(all.seen, s.seen)
		maps.Copy(all.pad, s.pad)
	}
	return all, byTask
}

// TestDiskRescaleByIngest: a job whose state is on disk, checkpointed
// incrementally at one parallelism, restores from its checkpoint files at
// another (2→3, 3→2, 1→4, 4→1): each task adopts the stored database that
// holds most of its key groups, with the others excised, and ingests its
// key groups of the others; no entry is written one by one. The state
// restored equals, key by key and task by task, what the heap backend
// restores from a savepoint of the same state at the same parallelism,
// and every task holds its key groups only (a range over a key's map
// counts exactly its records, and the checkpoint's databases hold no other
// key group). Writes, an incremental checkpoint that references the
// restored files, and a second restore at the first parallelism follow,
// and the job ends with a failure-free run's state. The local copies of
// the first checkpoint after the restore, hard links to the databases'
// files, are removed on the way: the databases do not depend on them.
func TestDiskRescaleByIngest(t *testing.T) {
	for _, c := range []struct{ from, to int }{{2, 3}, {3, 2}, {1, 4}, {4, 1}} {
		t.Run(fmt.Sprintf("%dto%d", c.from, c.to), func(t *testing.T) {
			ctx := context.Background()
			// l3 - l2 records after the restore write to that many keys:
			// few, so that the next checkpoint shares most tables.
			const l1, l2, l3 = diskRescaleRecords / 4, diskRescaleRecords / 2, diskRescaleRecords/2 + 100
			store := snapshots.NewMem()
			dir := t.TempDir()
			var bad firstErr
			start := func(par int, gate *testsrc.Gate, ev *events, opts ...actors.Option) *actors.Job {
				t.Helper()
				opts = append([]actors.Option{actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithCheckpointInterval(0),
					actors.WithIncrementalCheckpoints(1000), actors.WithInlineStateLimit(0), actors.WithListener(ev.listen)}, opts...)
				j, err := actors.Start(ctx, diskRescaleJob(par, gate, &bad), opts...)
				if err != nil {
					t.Fatalf("start at parallelism %d: %v", par, err)
				}
				return j
			}
			disk := actors.WithDiskState(actors.DiskState{Dir: dir, MemTableBytes: 1 << 20})
			checkpoint := func(j *actors.Job) uint64 {
				t.Helper()
				id, err := j.Checkpoint(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return id
			}

			// At c.from: two incremental checkpoints, then a savepoint of
			// the state of the second.
			gate := testsrc.NewGate(l1)
			j := start(c.from, gate, &events{}, disk)
			gate.WaitReached(t, l1)
			checkpoint(j)
			gate.SetLimit(l2)
			gate.WaitReached(t, l2)
			c2 := checkpoint(j)
			stopWithSavepoint(t, j, "same")

			// At c.to, from checkpoint c2's files.
			ev := &events{}
			running := ev.subscribe()
			gate = testsrc.NewGate(l2)
			j = start(c.to, gate, ev, disk, actors.WithCheckpoint(c2))
			defer j.Stop()
			waitFor(t, running, "the rescaled job running", func(e actors.Event) bool { return e.Kind == actors.EventRunning })
			st := j.DiskRestoreStats()
			if st.Tasks != c.to || st.Adopted != c.to || st.Rebuilt != 0 || (st.IngestedBytes > 0) != (c.from > 1) || (st.Excised > 0) != (c.to > c.from) {
				t.Errorf("restore %d→%d: %+v; want each of the %d tasks to adopt a database, key groups excised only for more tasks, entries ingested where a task spans several stored ones, none rebuilt",
					c.from, c.to, st, c.to)
			}
			c3 := checkpoint(j)
			got, gotTasks := readDiskRescale(t, j.Checkpoints(), c3)
			if want := wantDiskRescale(l2); !got.equal(want) {
				t.Fatalf("restored %d→%d: %d sums, want the %d of records 1..%d", c.from, c.to, len(got.sum), len(want.sum), l2)
			}
			// The local copies of c3 are hard links to the databases'
			// files: removed, the databases go on.
			if err := os.RemoveAll(filepath.Join(dir, "local")); err != nil {
				t.Fatal(err)
			}

			// Writes on the restored databases, and an incremental
			// checkpoint that references c3's files.
			gate.SetLimit(l3)
			gate.WaitReached(t, l3)
			c4 := checkpoint(j)
			// Each table c4 shares with c3 (same name and size: the
			// restored database's files that no compaction rewrote since)
			// is referenced, not stored again.
			m3, err := j.Checkpoints().ReadManifest(ctx, c3)
			if err != nil {
				t.Fatal(err)
			}
			m4, err := j.Checkpoints().ReadManifest(ctx, c4)
			if err != nil {
				t.Fatal(err)
			}
			inC3 := map[string]*messages.StateFile{}
			for _, e := range m3.GetTasks() {
				for _, f := range e.GetState().GetDisk().GetFiles() {
					inC3[e.GetTaskId()+"/"+f.GetName()] = f
				}
			}
			shared := 0
			for _, e := range m4.GetTasks() {
				for _, f := range e.GetState().GetDisk().GetFiles() {
					if p := inC3[e.GetTaskId()+"/"+f.GetName()]; p != nil && strings.HasSuffix(f.GetName(), ".sst") && p.GetSize() == f.GetSize() {
						shared++
						if f.GetKey() != p.GetKey() {
							t.Errorf("checkpoint %d stores table %s of task %s again (%s), which checkpoint %d stored as %s", c4, f.GetName(), e.GetTaskId(), f.GetKey(), c3, p.GetKey())
						}
					}
				}
			}
			t.Logf("checkpoint %d references %d tables of checkpoint %d", c4, shared, c3)
			if got, _ := readDiskRescale(t, j.Checkpoints(), c4); !got.equal(wantDiskRescale(l3)) {
				t.Fatalf("checkpoint %d after the rescale: %d sums, want the %d of records 1..%d", c4, len(got.sum), len(wantDiskRescale(l3).sum), l3)
			}
			if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
				t.Fatalf("Stop: %v", err)
			}

			// A second restore, back at c.from, to the end.
			gate = testsrc.NewGate(diskRescaleRecords)
			ev = &events{}
			j = start(c.from, gate, ev, disk, actors.WithCheckpoint(c4))
			if err := waitJob(t, j); err != nil {
				t.Fatal(err)
			}
			if st := j.DiskRestoreStats(); st.Adopted != c.from || st.Rebuilt != 0 {
				t.Errorf("restore %d→%d: %+v, want %d databases adopted and none rebuilt", c.to, c.from, st, c.from)
			}
			r, err := j.Checkpoints().LoadLatest(ctx)
			if err != nil || !r.Manifest.GetFinal() {
				t.Fatalf("the final checkpoint: %v, %v", r, err)
			}
			if got, _ := readDiskRescale(t, j.Checkpoints(), r.Manifest.GetCheckpointId()); !got.equal(wantDiskRescale(diskRescaleRecords)) {
				t.Fatal("the final state differs from a failure-free run's")
			}

			// The heap backend, from the savepoint of c2's state, at c.to:
			// the same state, key by key and task by task.
			gate = testsrc.NewGate(l2)
			j = start(c.to, gate, &events{}, actors.WithSavepoint("same"))
			hc := checkpoint(j)
			heap, heapTasks := readDiskRescale(t, j.Checkpoints(), hc)
			if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
				t.Fatalf("Stop: %v", err)
			}
			if !heap.equal(got) {
				t.Errorf("the heap backend restored %d sums from the savepoint, the disk backend %d from checkpoint %d", len(heap.sum), len(got.sum), c2)
			}
			for id, s := range heapTasks {
				if !gotTasks[id].equal(s) {
					t.Errorf("task %s: the disk backend restored %d keys, the heap backend %d", id, len(gotTasks[id].sum), len(s.sum))
				}
			}
			if err := bad.get(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
