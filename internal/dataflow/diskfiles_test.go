package dataflow

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/snapflow/snapflow/messages"
)

// copyFiles puts the files of checkpoint c where inst restores them from,
// as the runtime's download does.
func copyFiles(t testing.TB, inst Instance, c *DiskFiles, name string) string {
	t.Helper()
	dir, err := inst.(DiskCheckpointer).PrepareRestore(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range c.Files {
		data, err := os.ReadFile(filepath.Join(c.Dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestDiskFilesRestore: a task's on-disk state checkpointed as database
// files restores exactly, at the same parallelism and across a rescale
// (each task adopts the files and keeps its key groups only), holds nothing written after the
// checkpoint, and is refused by an operator that keeps its state on the
// heap.
func TestDiskFilesRestore(t *testing.T) {
	onDisk(t)
	reg := map[string]*aggStates{}
	p := mustPlan(t, aggGraph(1, reg))
	inst := mustInstance(t, p, "agg#0", 8, noopSender{})
	es := userEvents(3000)
	if err := inst.ProcessBatch(0, es[:2000], nil); err != nil {
		t.Fatal(err)
	}
	wantSum := maps.Clone(valuesOf(reg["agg#0"].sum))
	wantParity := mapsOf(reg["agg#0"].parity)
	var st messages.TaskState
	c, err := inst.(DiskCheckpointer).SnapshotFiles(&st, nil, true, "1")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.GetKeyGroups()) != 0 || len(st.GetStateDescriptors()) != 3 || len(c.Desc.GetStates()) != 3 {
		t.Fatalf("the snapshot holds %d key groups, %d descriptors and %d states on disk; want 0, 3 and 3",
			len(st.GetKeyGroups()), len(st.GetStateDescriptors()), len(c.Desc.GetStates()))
	}
	if err := inst.ProcessBatch(0, es[2000:], nil); err != nil { // after the checkpoint began
		t.Fatal(err)
	}
	if err := c.Take(); err != nil { // the database as it was at SnapshotFiles
		t.Fatal(err)
	}
	for _, n := range []int{1, 2, 3} {
		reg2 := map[string]*aggStates{}
		p2 := mustPlan(t, aggGraph(n, reg2))
		gotSum, gotParity := map[string]int64{}, map[string]map[string]int64{}
		var insts1 Instance
		for _, task := range p2.Tasks {
			if task.Operator != "agg" {
				continue
			}
			in2 := mustInstance(t, p2, task.ID, 8, noopSender{})
			if n == 1 {
				insts1 = in2
			}
			if err := in2.Restore(wireRoundTrip(t, &st)); err != nil {
				t.Fatal(err)
			}
			dir := copyFiles(t, in2, c, "agg#0")
			rep, err := in2.(DiskCheckpointer).RestoreFiles(dir, c.Desc, true)
			if err != nil {
				t.Fatalf("parallelism %d: %s: RestoreFiles: %v", n, task.ID, err)
			}
			// The only stored database becomes each task's, without the
			// key groups outside the task's range (excised) once rescaled.
			if !rep.Adopted || (rep.Excised > 0) != (n > 1) || rep.Rebuilt != 0 || rep.IngestedTables != 0 {
				t.Errorf("parallelism %d: %s: restore %+v, want the files adopted, key groups excised only when rescaled, nothing rebuilt or ingested", n, task.ID, rep)
			}
			for k, v := range valuesOf(reg2[task.ID].sum) {
				if kg := int(HashString(k) % aggMaxP); kg < task.KeyGroupStart || kg >= task.KeyGroupEnd {
					t.Errorf("parallelism %d: %s (key groups [%d,%d)) holds key %q of key group %d", n, task.ID, task.KeyGroupStart, task.KeyGroupEnd, k, kg)
				}
				gotSum[k] = v
			}
			maps.Copy(gotParity, mapsOf(reg2[task.ID].parity))
		}
		if n == 1 { // the adopted database goes on: a write, then a read
			if err := insts1.ProcessBatch(0, []event{{User: "user-5", N: 1000}}, nil); err != nil {
				t.Fatal(err)
			}
			gotSum["user-5"] = valuesOf(reg2["agg#0"].sum)["user-5"] - 1000
		}
		if !maps.Equal(gotSum, wantSum) {
			t.Errorf("parallelism %d: restored %d sums, want the %d of the checkpoint: %v, want %v", n, len(gotSum), len(wantSum), gotSum, wantSum)
		}
		if !maps.EqualFunc(gotParity, wantParity, maps.Equal) {
			t.Errorf("parallelism %d: restored parities differ from the checkpoint's", n)
		}
	}
	testDisk = nil // an operator on the heap
	p3 := mustPlan(t, aggGraph(1, map[string]*aggStates{}))
	in3 := mustInstance(t, p3, "agg#0", 8, noopSender{})
	if err := in3.Restore(wireRoundTrip(t, &st)); err != nil {
		t.Fatal(err)
	}
	if _, err := in3.(DiskCheckpointer).RestoreFiles(c.Dir, c.Desc, true); !errors.Is(err, ErrIncompatibleState) {
		t.Errorf("RestoreFiles on the heap = %v, want ErrIncompatibleState", err)
	}
}

// aggGraphReordered is aggGraph with the map state declared before the
// sum: their ids on disk swap.
func aggGraphReordered(parallelism int, reg map[string]*aggStates) *Graph {
	g := New("agg", MaxParallelism(aggMaxP))
	src := FromSlice(g, "src", []event{})
	byUser := KeyBy(src, func(e event) string { return e.User })
	out := Process(byUser, "agg", func(s *KeyedSetup[string]) ProcessFunc[string, event, event] {
		st := &aggStates{parity: MapOf[string, int64](s, "parity")}
		st.sum = Value[int64](s, "sum")
		st.profile = Value[profile](s, "profile", JSONCodec[profile]{})
		reg[s.TaskID()] = st
		return func(ctx *Context[string], e event, out *Collector[event]) error { return nil }
	}, Parallelism(parallelism))
	Sink(out, "sink", discard[event])
	return g
}

// TestDiskFilesRestoreAcrossTasks: the on-disk state of two tasks restores
// into one task and into three, each new task given last the stored
// database that holds most of its key groups: it writes its key groups of
// the other into tables, and adopts that one (its key groups outside the
// task's excised) with the tables ingested, writing no entry one by one; where the states' ids changed (the
// operator declares them in another order), every entry is written one by
// one under its new id instead. Either way each task holds exactly the
// entries of its key groups.
func TestDiskFilesRestoreAcrossTasks(t *testing.T) {
	onDisk(t)
	reg := map[string]*aggStates{}
	p := mustPlan(t, aggGraph(2, reg))
	insts := map[string]Instance{}
	for _, id := range []string{"agg#0", "agg#1"} {
		insts[id] = mustInstance(t, p, id, 8, noopSender{})
	}
	routeEvents(t, p, insts, userEvents(3000))
	wantSum, wantParity := map[string]int64{}, map[string]map[string]int64{}
	type stored struct {
		st    *messages.TaskState
		files *DiskFiles
	}
	var parts []stored
	for _, id := range []string{"agg#0", "agg#1"} {
		maps.Copy(wantSum, valuesOf(reg[id].sum))
		maps.Copy(wantParity, mapsOf(reg[id].parity))
		s := stored{st: &messages.TaskState{}}
		c, err := insts[id].(DiskCheckpointer).SnapshotFiles(s.st, nil, true, "1")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Take(); err != nil {
			t.Fatal(err)
		}
		s.files = c
		parts = append(parts, s)
	}
	for _, reordered := range []bool{false, true} {
		for _, n := range []int{1, 3} {
			reg2 := map[string]*aggStates{}
			build := aggGraph
			if reordered {
				build = aggGraphReordered
			}
			p2 := mustPlan(t, build(n, reg2))
			gotSum, gotParity := map[string]int64{}, map[string]map[string]int64{}
			for _, task := range p2.Tasks {
				if task.Operator != "agg" {
					continue
				}
				in2 := mustInstance(t, p2, task.ID, 8, noopSender{})
				if err := in2.Restore(wireRoundTrip(t, parts[0].st)); err != nil {
					t.Fatal(err)
				}
				overlap := func(d *messages.DiskCheckpoint) int {
					return min(task.KeyGroupEnd, int(d.GetKeyGroupEnd())) - max(task.KeyGroupStart, int(d.GetKeyGroupStart()))
				}
				var sources []stored
				for _, s := range parts {
					if overlap(s.files.Desc) > 0 {
						sources = append(sources, s)
					}
				}
				// The one that holds most of the task's key groups last.
				b := 0
				for i, s := range sources {
					if overlap(s.files.Desc) > overlap(sources[b].files.Desc) {
						b = i
					}
				}
				sources = append(slices.Delete(slices.Clone(sources), b, b+1), sources[b])
				var total DiskRestore
				for i, s := range sources {
					dir := copyFiles(t, in2, s.files, fmt.Sprint(i))
					rep, err := in2.(DiskCheckpointer).RestoreFiles(dir, s.files.Desc, i == len(sources)-1)
					if err != nil {
						t.Fatalf("%d tasks, reordered %t: %s: RestoreFiles: %v", n, reordered, task.ID, err)
					}
					if rep.Adopted {
						total.Adopted = true
					}
					total.Excised += rep.Excised
					total.IngestedTables += rep.IngestedTables
					total.IngestedEntries += rep.IngestedEntries
					total.Rebuilt += rep.Rebuilt
				}
				switch {
				case reordered && (total.Adopted || total.IngestedTables > 0 || total.Rebuilt == 0):
					t.Errorf("%d tasks, the ids changed: %s restored %+v, want every entry rebuilt", n, task.ID, total)
				case !reordered && (!total.Adopted || total.Rebuilt > 0 || (total.IngestedEntries > 0) != (len(sources) > 1)):
					t.Errorf("%d tasks: %s (from %d stored) restored %+v, want one database adopted, the other's entries ingested, none rebuilt", n, task.ID, len(sources), total)
				}
				for k, v := range valuesOf(reg2[task.ID].sum) {
					if kg := int(HashString(k) % aggMaxP); kg < task.KeyGroupStart || kg >= task.KeyGroupEnd {
						t.Errorf("%d tasks: %s (key groups [%d,%d)) holds key %q of key group %d", n, task.ID, task.KeyGroupStart, task.KeyGroupEnd, k, kg)
					}
					gotSum[k] = v
				}
				maps.Copy(gotParity, mapsOf(reg2[task.ID].parity))
			}
			if !maps.Equal(gotSum, wantSum) || !maps.EqualFunc(gotParity, wantParity, maps.Equal) {
				t.Errorf("%d tasks, reordered %t: restored %d sums and %d parities, want %d and %d", n, reordered, len(gotSum), len(gotParity), len(wantSum), len(wantParity))
			}
		}
	}
}
