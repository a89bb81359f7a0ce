package dataflow

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/snapflow/snapflow/internal/diskstate"
	"github.com/snapflow/snapflow/messages"
)

// restoreBenchKeys and restoreBenchValue shape BenchmarkDiskRestore's
// state: that many keys with a value of that many random bytes.
const restoreBenchKeys, restoreBenchValue = 200_000, 256

// restoreBenchGraph keeps a value state "v" of restoreBenchValue random
// bytes per key on disk, and an empty one "w", declared after it (before
// it when reordered, which swaps their ids).
func restoreBenchGraph(reordered bool) *Graph {
	g := New("restore", MaxParallelism(128))
	src := FromSlice(g, "src", []event{})
	byUser := KeyBy(src, func(e event) string { return e.User })
	out := Process(byUser, "p", func(s *KeyedSetup[string]) ProcessFunc[string, event, event] {
		var v *ValueState[string, string]
		if reordered {
			Value[int64](s, "w")
			v = Value[string](s, "v")
		} else {
			v = Value[string](s, "v")
			Value[int64](s, "w")
		}
		buf := make([]byte, restoreBenchValue)
		return func(ctx *Context[string], e event, out *Collector[event]) error {
			rng := rand.New(rand.NewPCG(uint64(e.N), 1))
			for i := range buf {
				buf[i] = byte(rng.Uint32())
			}
			v.Set(string(buf))
			return nil
		}
	}, Parallelism(1))
	Sink(out, "sink", discard[event])
	return g
}

// BenchmarkDiskRestore restores one stored task's database of 200,000
// values of 256 random bytes into a new task, each of three ways: adopt
// (the files become the database: a restore at the same parallelism, and
// a rescale's base database), ingest (the entries of the task's key groups
// written into tables in key order and ingested: a rescale's other stored
// databases) and rebuild (the entries written one by one through batches:
// a rescale before ingest, and now one where the states' ids changed). The
// files are in place before the timer starts: this is the rebuild part of
// a restore alone, without its download. Bytes are those of the stored
// files.
func BenchmarkDiskRestore(b *testing.B) {
	testDisk = &diskstate.Config{Dir: b.TempDir()}
	defer func() { testDisk = nil }()
	p := mustPlan(b, restoreBenchGraph(false))
	inst := mustInstance(b, p, "p#0", 256, noopSender{})
	es := make([]event, 0, 4096)
	for i := range restoreBenchKeys {
		es = append(es, event{User: fmt.Sprintf("key-%d", i), N: int64(i)})
		if len(es) == cap(es) || i == restoreBenchKeys-1 {
			if err := inst.ProcessBatch(0, es, nil); err != nil {
				b.Fatal(err)
			}
			es = es[:0]
		}
	}
	st := &messages.TaskState{}
	files, err := inst.(DiskCheckpointer).SnapshotFiles(st, nil, true, "1")
	if err == nil {
		err = files.Take()
	}
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for _, f := range files.Files {
		if fi, err := os.Stat(filepath.Join(files.Dir, f)); err == nil {
			size += fi.Size()
		}
	}
	for _, way := range []string{"adopt", "ingest", "rebuild"} {
		b.Run(way, func(b *testing.B) {
			b.SetBytes(size)
			p2 := mustPlan(b, restoreBenchGraph(way == "rebuild"))
			for b.Loop() {
				b.StopTimer()
				in2, err := p2.NewInstance(mustTask(b, p2, "p#0").Index, InstanceContext{BatchSize: 256, Sender: noopSender{}, DiskState: testDisk})
				if err != nil {
					b.Fatal(err)
				}
				if err := in2.Restore(proto.Clone(st).(*messages.TaskState)); err != nil {
					b.Fatal(err)
				}
				dir := copyFiles(b, in2, files, "bench")
				b.StartTimer()
				rep, err := in2.(DiskCheckpointer).RestoreFiles(dir, files.Desc, way == "adopt")
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if got := rep.IngestedEntries + rep.Rebuilt; (way == "adopt") != rep.Adopted || (way != "adopt" && got != restoreBenchKeys) {
					b.Fatalf("%s: restored %+v, want %d entries", way, rep, restoreBenchKeys)
				}
				if err := in2.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
