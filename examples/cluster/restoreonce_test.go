//go:build unix

package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/snapshots"
)

// logFields parses the key=value fields of a log line.
func logFields(line string) map[string]string {
	out := map[string]string{}
	for _, m := range logFieldRE.FindAllStringSubmatch(line, -1) {
		out[m[1]] = strings.Trim(m[2], `"`)
	}
	return out
}

var logFieldRE = regexp.MustCompile(`(\w+)=("[^"]*"|\S+)`)

// TestRestoreReadsOnceAndFallsBack: both workers are killed while the job
// runs with every state in an object of its own; while the coordinator
// waits for workers, one state object of the newest checkpoint is
// corrupted; two new workers join. The coordinator reads only the
// manifest and the heads of the states, so the damage shows on the worker
// that reads the object: it reports it, and the coordinator falls back to
// the checkpoint before, as one process would, and the job ends exactly
// once. The restore that succeeds reads each task's state once: the
// workers read the bytes of the handles they were given, the coordinator
// no state whole (before, it read and decoded every state, and the workers
// read them again).
func TestRestoreReadsOnceAndFallsBack(t *testing.T) {
	c := newTestCluster(t)
	c.job = []string{"-records", "60000", "-keys", "30000", "-rate", "30000"} // every record before the hold has a key of its own
	r := startRunning(c, 2, "-inline-limit", "0", "-retain", "5")
	// Two checkpoints of the same size: the sources hold halfway, and the
	// one to fall back to holds the state of every record before the hold.
	for at, last := r.at, uint64(0); ; {
		i, e := c.awaitEvent(r.coord, at+1, "checkpoint-completed", nil)
		if e.uint("bytes") == last {
			break
		}
		at, last = i, e.uint("bytes")
	}
	from := len(r.coord.linesFrom(0))
	for _, w := range r.workers {
		if err := w.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	c.await(r.coord, from, "the wait for workers", func(l string) bool { return strings.Contains(l, "waiting for a worker to join") })
	store, err := snapshots.Open(t.Context(), c.store)
	if err != nil {
		t.Fatal(err)
	}
	cps := snapshots.NewCheckpoints(store, jobName, nil)
	newest, err := cps.LoadLatest(t.Context())
	if err != nil || newest == nil {
		t.Fatalf("the newest checkpoint: %v, %v", newest, err)
	}
	bad := newest.Manifest.GetCheckpointId()
	var key string
	for _, e := range newest.Manifest.GetTasks() {
		if strings.HasPrefix(e.GetTaskId(), "sum#") && len(e.GetState().GetInline()) == 0 {
			key = e.GetState().GetKey()
			break
		}
	}
	if key == "" {
		t.Fatalf("checkpoint %d has no state object of a sum task: %v", bad, newest.Manifest.GetTasks())
	}
	data, err := store.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := store.Put(t.Context(), key, data); err != nil {
		t.Fatal(err)
	}
	w1, _ := c.startWorker("worker 3", r.addr)
	w2, _ := c.startWorker("worker 4", r.addr)
	c.await(r.coord, from, "the fallback", func(l string) bool {
		return strings.Contains(l, "the checkpoint being restored is unusable") && strings.Contains(l, "checkpoint="+strconv.FormatUint(bad, 10))
	})
	_, restoring := c.awaitEvent(r.coord, from, "restoring", func(e eventLine) bool {
		return e.uint("checkpoint") > 0 && e.uint("checkpoint") < bad
	})
	c.release()
	c.expectExact(r.coord, w1, w2)

	// The bytes the successful restore read.
	good := restoring.get("checkpoint")
	var heads, read, handles int64
	for _, l := range r.coord.linesFrom(from) {
		if f := logFields(l); strings.Contains(l, "read the checkpoint's manifest and the heads") && f["checkpoint"] == good {
			heads, _ = strconv.ParseInt(f["read_bytes"], 10, 64)
		}
	}
	for _, w := range []*child{w1, w2} {
		for _, l := range w.linesFrom(0) {
			if f := logFields(l); strings.Contains(l, "loaded the state of the tasks placed here") && f["checkpoint"] == good {
				n, _ := strconv.ParseInt(f["read_bytes"], 10, 64)
				h, _ := strconv.ParseInt(f["handles_bytes"], 10, 64)
				read, handles = read+n, handles+h
			}
		}
	}
	if handles == 0 || heads == 0 {
		t.Fatalf("no restore figures for checkpoint %s: coordinator read %d, workers read %d of handles of %d bytes", good, heads, read, handles)
	}
	t.Logf("restore of checkpoint %s: the coordinator read %d bytes (manifest and heads), the workers %d, the states are %d bytes: %.2fx",
		good, heads, read, handles, float64(heads+read)/float64(handles))
	if read != handles {
		t.Errorf("the workers read %d bytes of states of %d: want each state read once", read, handles)
	}
}
