package dataflow

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/snapflow/snapflow/messages"
)

// copyFiles puts the files of checkpoint c where inst restores them from,
// as the runtime's download does.
func copyFiles(t *testing.T, inst Instance, c *DiskFiles, name string) string {
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
// (each task copies its key groups only), holds nothing written after the
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
			if rep.Adopted != (n == 1) { // the same key groups: the files become the database
				t.Errorf("parallelism %d: %s: adopted the files: %t", n, task.ID, rep.Adopted)
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
