package dataflow

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/messages"

	"github.com/snapflow/snapflow/internal/diskstate"
)

// testDisk, when set (onDisk), makes mustInstance keep keyed state on
// disk: the state tests that call it run on both backends.
var testDisk *diskstate.Config

// onDisk makes the rest of t create its instances on the on-disk backend,
// with a small cache and memtable so that state reaches files.
func onDisk(t *testing.T) {
	t.Helper()
	testDisk = &diskstate.Config{Dir: t.TempDir(), CacheBytes: 1 << 20, MemTableBytes: 1 << 20}
	t.Cleanup(func() { testDisk = nil })
}

// valuesOf is what a value state holds, on either backend.
func valuesOf[K Key, V any](v *ValueState[K, V]) map[K]V {
	if v.d == nil {
		return maps.Collect(v.m.all())
	}
	s := v.setup
	if err := s.flushState(); err != nil {
		panic(err)
	}
	out := map[K]V{}
	err := s.disk.db.Scan(nil, nil, func(key, value []byte) error {
		_, sid, rest, _ := diskstate.Split(key)
		if sid != v.d.sid {
			return nil
		}
		k, err := s.codec.decode(rest)
		if err != nil {
			return err
		}
		_, value, live, err := liveValue(value, v.ttl, s.now)
		if err != nil || !live {
			return err
		}
		x, err := v.codec.Decode(append([]byte(nil), value...))
		if err != nil {
			return err
		}
		out[k] = x
		return nil
	})
	if err != nil {
		panic(err)
	}
	return out
}

// mapsOf is what a map state holds, on either backend.
func mapsOf[K Key, UK comparable, V any](ms *MapState[K, UK, V]) map[K]map[UK]V {
	if ms.d == nil {
		return ms.m
	}
	s := ms.setup
	if err := s.flushState(); err != nil {
		panic(err)
	}
	out := map[K]map[UK]V{}
	err := s.disk.db.Scan(nil, nil, func(key, value []byte) error {
		_, sid, rest, _ := diskstate.Split(key)
		if sid != ms.d.sid {
			return nil
		}
		kb, ukb, _ := diskstate.SplitMap(rest)
		k, err := s.codec.decode(kb)
		if err != nil {
			return err
		}
		uk, err := ms.keyCodec.Decode(append([]byte(nil), ukb...))
		if err != nil {
			return err
		}
		_, value, live, err := liveValue(value, ms.ttl, s.now)
		if err != nil || !live {
			return err
		}
		x, err := ms.codec.Decode(append([]byte(nil), value...))
		if err != nil {
			return err
		}
		if out[k] == nil {
			out[k] = map[UK]V{}
		}
		out[k][uk] = x
		return nil
	})
	if err != nil {
		panic(err)
	}
	return out
}

// TestStateConformanceOnDisk runs the keyed-state tests again with the
// state on disk: every state kind, codecs, descriptors, timers, snapshots
// in full and by key group, restore per key group and rescaling. The
// heap backend runs them as themselves.
func TestStateConformanceOnDisk(t *testing.T) {
	tests := []struct {
		name string
		fn   func(*testing.T)
	}{
		{"KeyedStateSnapshotRestore", TestKeyedStateSnapshotRestore},
		{"KeyedStateRescale", TestKeyedStateRescale},
		{"KeyedStateIntKeys", TestKeyedStateIntKeys},
		{"KeyedStateRestoreUndeclared", TestKeyedStateRestoreUndeclared},
		{"KeyedStateRestoreCorrupt", TestKeyedStateRestoreCorrupt},
		{"ValueAndMapStateOperations", TestValueAndMapStateOperations},
		{"SnapshotWritesStateDescriptors", TestSnapshotWritesStateDescriptors},
		{"RestoreRefusesChangedValueType", TestRestoreRefusesChangedValueType},
		{"RestoreRefusesChangedDeclarations", TestRestoreRefusesChangedDeclarations},
		{"RestoreRefusesUndeclaredEntries", TestRestoreRefusesUndeclaredEntries},
		{"RestoreAcceptsNewStateAndOldSnapshots", TestRestoreAcceptsNewStateAndOldSnapshots},
		{"MapOfCodecsSnapshotRestore", TestMapOfCodecsSnapshotRestore},
		{"IncrementalSnapshotsRebuildFullState", TestIncrementalSnapshotsRebuildFullState},
		// Not IncrementalPropertyCatchesMissedReads: it turns the marking
		// of reads off to see the incremental snapshot miss an in-place
		// change, but on disk an unmarked change is not written back at
		// all, so full and incremental snapshots agree.
		{"InPlaceChangeAfterGetIsDirty", TestInPlaceChangeAfterGetIsDirty},
		{"TakeDirtyKeyGroups", TestTakeDirtyKeyGroups},
		{"SnapshotKeyGroupsSelection", TestSnapshotKeyGroupsSelection},
		{"SnapshotKeyGroupsOutsideRange", TestSnapshotKeyGroupsOutsideRange},
		{"RestoreKeyGroupsByStream", TestRestoreKeyGroupsByStream},
		{"RestoreKeyGroupErrors", TestRestoreKeyGroupErrors},
		{"DirtyKeyGroupsFollowTheKeyHash", TestDirtyKeyGroupsFollowTheKeyHash},
		{"TimersSnapshotRestoreByKeyGroup", TestTimersSnapshotRestoreByKeyGroup},
		{"TimersRestoreRefusesCorruptEntries", TestTimersRestoreRefusesCorruptEntries},
		{"WatermarkSnapshotRestore", TestWatermarkSnapshotRestore},
		{"RescaleKeyedState", TestRescaleKeyedState},
		{"DefaultCodecPropertyRoundTrip", TestDefaultCodecPropertyRoundTrip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			onDisk(t)
			tt.fn(t)
		})
	}
}

// TestDiskAsyncSnapshotIsolation: the state a snapshot captures is the
// state at its synchronous part; what the task writes before finish runs
// is not in it, and is in the next one.
func TestDiskAsyncSnapshotIsolation(t *testing.T) {
	onDisk(t)
	reg := map[string]*aggStates{}
	p := mustPlan(t, aggGraph(1, reg))
	inst := mustInstance(t, p, "agg#0", 8, noopSender{})
	es := userEvents(2000)
	if err := inst.ProcessBatch(0, es[:1000], nil); err != nil {
		t.Fatal(err)
	}
	want := maps.Clone(valuesOf(reg["agg#0"].sum))
	var st messages.TaskState
	finish, err := inst.(AsyncSnapshotter).SnapshotAsync(&st, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := inst.ProcessBatch(0, es[1000:], nil); err != nil { // the task goes on
		t.Fatal(err)
	}
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeValueState[string, int64](wireRoundTrip(t, &st), "sum")
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("the snapshot holds %d sums, not the %d of its moment", len(got), len(want))
	}
	after, err := DecodeValueState[string, int64](snapshot(t, inst), "sum")
	if err != nil {
		t.Fatal(err)
	}
	if maps.Equal(after, want) || !maps.Equal(after, valuesOf(reg["agg#0"].sum)) {
		t.Fatal("the next snapshot does not hold what was written after the first")
	}
}

// TestDiskStateBeyondMemtable writes more state than the memtable and the
// cache hold, so that it lives in files, and checks every value through
// reads, a snapshot and a restore.
func TestDiskStateBeyondMemtable(t *testing.T) {
	onDisk(t)
	var sums []*ValueState[string, string]
	g := New("job")
	k := KeyBy(FromSlice(g, "src", []string{"a"}), func(s string) string { return s[:6] })
	Sink(Process(k, "p", func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
		v := Value[string](s, "blob")
		sums = append(sums, v)
		return func(ctx *Context[string], in string, _ *Collector[string]) error {
			old, _ := v.Get()
			if len(old) > 0 && old[:len(ctx.Key())] != ctx.Key() {
				return fmt.Errorf("key %q read %q", ctx.Key(), old[:20])
			}
			v.Set(ctx.Key() + strings.Repeat(in, 200))
			return nil
		}
	}), "sink", discard[string])
	p := mustPlan(t, g)
	inst := mustInstance(t, p, "p#0", 64, noopSender{})
	const keys = 20000 // about 4 MiB of values against a 1 MiB memtable
	batch := make([]string, 0, 500)
	for round := range 2 {
		for i := range keys {
			batch = append(batch, fmt.Sprintf("k%05d:%d", i, round))
			if len(batch) == cap(batch) {
				if err := inst.ProcessBatch(0, batch, nil); err != nil {
					t.Fatal(err)
				}
				batch = batch[:0]
			}
		}
	}
	if n := sums[len(sums)-1].Len(); n != keys {
		t.Fatalf("Len = %d, want %d", n, keys)
	}
	st := snapshot(t, inst)
	restored := mustInstance(t, p, "p#0", 64, noopSender{})
	if err := restored.Restore(st); err != nil {
		t.Fatal(err)
	}
	got := valuesOf(sums[len(sums)-1])
	if len(got) != keys {
		t.Fatalf("restored %d keys, want %d", len(got), keys)
	}
	for k, v := range got {
		if want := k + strings.Repeat(k+":1", 200); v != want {
			t.Fatalf("key %q restored with %d bytes, want the second round's %d", k, len(v), len(want))
		}
	}
}
