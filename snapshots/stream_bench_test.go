package snapshots_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// Shape of the state of BenchmarkRestoreRead: 64 MiB in 256 key groups of
// 64 entries of 4 KiB.
const (
	benchGroups  = 256
	benchEntries = 64
	benchValue   = 4 << 10
)

// benchState stores, on a directory store, the state of BenchmarkRestoreRead
// as one object (incremental false) or as a full checkpoint and an
// incremental one that changed every third key group. It returns the
// checkpoints, the handle to restore, the keys of the objects it lies in,
// and the state's bytes.
func benchState(b *testing.B, incremental bool) (*snapshots.Checkpoints, *messages.StateHandle, []string) {
	b.Helper()
	ctx := context.Background()
	store, err := snapshots.NewDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	c := snapshots.NewCheckpoints(store, "bench", nil)
	rnd := rand.NewChaCha8([32]byte{1})
	group := func(kg uint32) *messages.KeyGroupState {
		ns := &messages.NamedState{Name: "blob"}
		for e := range benchEntries {
			v := make([]byte, benchValue)
			_, _ = rnd.Read(v)
			ns.Entries = append(ns.Entries, &messages.StateEntry{Key: fmt.Appendf(nil, "k%d-%d", kg, e), Value: v})
		}
		return &messages.KeyGroupState{KeyGroup: kg, States: []*messages.NamedState{ns}}
	}
	full := &messages.TaskState{TaskId: "big#0", CheckpointId: 1}
	for kg := range uint32(benchGroups) {
		full.KeyGroups = append(full.KeyGroups, group(kg))
	}
	h, err := c.PutTaskState(ctx, 1, full)
	if err != nil {
		b.Fatal(err)
	}
	keys := []string{h.GetKey()}
	if !incremental {
		return c, h, keys
	}
	prev, _ := snapshots.Sections(h)
	incr := &messages.TaskState{TaskId: "big#0", CheckpointId: 2}
	var refs []*messages.KeyGroupSection
	for kg := range uint32(benchGroups) {
		if kg%3 == 0 {
			incr.KeyGroups = append(incr.KeyGroups, group(kg))
		} else {
			refs = append(refs, prev[kg])
		}
	}
	if h, err = c.PutTaskStateRefs(ctx, 2, incr, refs); err != nil {
		b.Fatal(err)
	}
	return c, h, append(keys, h.GetKey())
}

// BenchmarkRestoreRead reads a 64 MiB state of many key groups from a
// directory store: with ReadTaskStateHead and StreamKeyGroups (the key
// groups fetched in parallel runs, verified, decoded and handed over: a
// streaming restore), with ReadTaskState (what LoadLatest
// does for each task), and as the raw Store.Get of the same objects, in
// MB/s of the bytes each reads. The incremental layout's
// state lies in two objects, of which the raw read reads both whole.
func BenchmarkRestoreRead(b *testing.B) {
	for _, layout := range []string{"full", "incremental"} {
		b.Run(layout, func(b *testing.B) {
			c, h, keys := benchState(b, layout == "incremental")
			b.Run("head+stream", func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(snapshots.StateSize(h)))
				for b.Loop() {
					if _, err := c.ReadTaskStateHead(context.Background(), h); err != nil {
						b.Fatal(err)
					}
					entries := 0
					if _, err := c.StreamKeyGroups(context.Background(), h, 0, benchGroups, func(g *messages.KeyGroupState) error {
						entries += len(g.GetStates()[0].GetEntries())
						return nil
					}); err != nil {
						b.Fatal(err)
					}
					if entries != benchGroups*benchEntries {
						b.Fatalf("%d entries, want %d", entries, benchGroups*benchEntries)
					}
				}
			})
			b.Run("read-task-state", func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(snapshots.StateSize(h)))
				for b.Loop() {
					st, err := c.ReadTaskState(context.Background(), h)
					if err != nil {
						b.Fatal(err)
					}
					if len(st.GetKeyGroups()) != benchGroups {
						b.Fatalf("%d key groups, want %d", len(st.GetKeyGroups()), benchGroups)
					}
				}
			})
			b.Run("raw-get", func(b *testing.B) {
				b.ReportAllocs()
				var size int64
				for _, k := range keys {
					data, err := c.Store().Get(context.Background(), k)
					if err != nil {
						b.Fatal(err)
					}
					size += int64(len(data))
				}
				b.SetBytes(size)
				for b.Loop() {
					for _, k := range keys {
						if _, err := c.Store().Get(context.Background(), k); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		})
	}
}
