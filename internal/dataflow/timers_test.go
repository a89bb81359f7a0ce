package dataflow

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/snapflow/snapflow/messages"
	"google.golang.org/protobuf/proto"
)

// firedTimer is a timer an instance of timerTestJob fired.
type firedTimer struct {
	Key    string
	Time   int64
	Domain TimeDomain
}

// timerTestJob is a keyed operator at parallelism p whose records
// "key@t" register an event-time timer of key at t (and "key@-t" a
// processing-time one); fired collects what fires, in order.
func timerTestJob(p int, fired *[]firedTimer) *Plan {
	g := New("timers")
	keyed := KeyBy(FromSlice(g, "src", []timerOp{}), func(o timerOp) string { return o.Key })
	out := Process(keyed, "p", func(s *KeyedSetup[string]) ProcessFunc[string, timerOp, string] {
		OnTimer(s, func(ctx *Context[string], tm Timer, _ *Collector[string]) error {
			*fired = append(*fired, firedTimer{ctx.Key(), tm.Time.UnixNano(), tm.Domain})
			return nil
		})
		return func(ctx *Context[string], o timerOp, _ *Collector[string]) error {
			switch {
			case o.Delete:
				ctx.DeleteEventTimer(time.Unix(0, o.At))
			case o.Proc:
				ctx.RegisterProcessingTimer(time.Unix(0, o.At))
			default:
				ctx.RegisterEventTimer(time.Unix(0, o.At))
			}
			return nil
		}
	}, Parallelism(p))
	Sink(out, "sink", discard[string])
	plan, err := NewPlan(g)
	if err != nil {
		panic(err)
	}
	return plan
}

type timerOp struct {
	Key          string
	At           int64
	Proc, Delete bool
}

// Timers are snapshotted by key group, restored at another parallelism
// into the tasks that own their keys, and fire there in (time, key)
// order, each once.
func TestTimersSnapshotRestoreByKeyGroup(t *testing.T) {
	var fired []firedTimer
	p1 := timerTestJob(1, &fired)
	inst := mustInstance(t, p1, "p#0", 16, noopSender{})
	var ops []timerOp
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for i, k := range keys {
		ops = append(ops, timerOp{Key: k, At: int64(100 - i)}, timerOp{Key: k, At: 200}, timerOp{Key: k, At: 200}, // a duplicate
			timerOp{Key: k, At: 300 + int64(i)}, timerOp{Key: k, At: 1_000 + int64(i), Proc: true})
	}
	ops = append(ops, timerOp{Key: "a", At: 300, Delete: true})
	if err := inst.ProcessBatch(0, ops, nil); err != nil {
		t.Fatal(err)
	}
	st := &messages.TaskState{}
	if err := inst.Snapshot(st); err != nil {
		t.Fatal(err)
	}
	ev, proc, err := PendingTimers(st)
	if err != nil || ev != 8*3-1 || proc != 8 {
		t.Fatalf("PendingTimers = %d event, %d processing, %v; want 23 and 8", ev, proc, err)
	}

	// Restore at parallelism 3: each task takes the timers of its keys.
	var fired3 []firedTimer
	p3 := timerTestJob(3, &fired3)
	var all []firedTimer
	for s, task := range []string{"p#0", "p#1", "p#2"} {
		fired3 = fired3[:0]
		tp := mustTask(t, p3, task)
		inst := mustInstance(t, p3, task, 16, noopSender{})
		if err := inst.Restore(st); err != nil {
			t.Fatal(err)
		}
		if err := inst.(WatermarkListener).OnWatermark(250); err != nil {
			t.Fatal(err)
		}
		first := len(fired3)
		if err := inst.(WatermarkListener).OnWatermark(1 << 40); err != nil {
			t.Fatal(err)
		}
		if err := inst.(ProcessingTimers).FireProcessingTimers(1 << 40); err != nil {
			t.Fatal(err)
		}
		for i, f := range fired3 {
			kg := int(HashString(f.Key) % uint64(p3.MaxParallelism))
			if kg < tp.KeyGroupStart || kg >= tp.KeyGroupEnd {
				t.Fatalf("task %d fired a timer of key %q, key group %d outside [%d,%d)", s, f.Key, kg, tp.KeyGroupStart, tp.KeyGroupEnd)
			}
			if i > 0 && i != first && f.Domain == fired3[i-1].Domain &&
				(f.Time < fired3[i-1].Time || f.Time == fired3[i-1].Time && f.Key < fired3[i-1].Key) {
				t.Fatalf("task %d fired %v after %v: not in (time, key) order", s, f, fired3[i-1])
			}
			if f.Domain == EventTime && i < first && f.Time > 250 {
				t.Fatalf("task %d fired %v at watermark 250", s, f)
			}
		}
		all = append(all, fired3...)
	}
	var want []firedTimer
	for i, k := range keys {
		want = append(want, firedTimer{k, int64(100 - i), EventTime}, firedTimer{k, 200, EventTime}, firedTimer{k, 1_000 + int64(i), ProcessingTime})
		if k != "a" {
			want = append(want, firedTimer{k, 300 + int64(i), EventTime})
		}
	}
	cmp := func(a, b firedTimer) int {
		if a.Key != b.Key {
			return map[bool]int{true: -1, false: 1}[a.Key < b.Key]
		}
		if a.Domain != b.Domain {
			return int(a.Domain) - int(b.Domain)
		}
		return int(a.Time - b.Time)
	}
	slices.SortFunc(all, cmp)
	slices.SortFunc(want, cmp)
	if !slices.Equal(all, want) {
		t.Fatalf("fired after the rescale:\n%v\nwant\n%v", all, want)
	}
}

func TestTimersRestoreRefusesCorruptEntries(t *testing.T) {
	var fired []firedTimer
	p := timerTestJob(1, &fired)
	inst := mustInstance(t, p, "p#0", 16, noopSender{})
	if err := inst.ProcessBatch(0, []timerOp{{Key: "k", At: 5}}, nil); err != nil {
		t.Fatal(err)
	}
	st := &messages.TaskState{}
	if err := inst.Snapshot(st); err != nil {
		t.Fatal(err)
	}
	for name, corrupt := range map[string]func(v []byte) []byte{
		"short":      func(v []byte) []byte { return v[:5] },
		"domain":     func(v []byte) []byte { v[0] = 7; return v },
		"key length": func(v []byte) []byte { v[timerHeadSize] = 99; return v },
	} {
		c := cloneState(st)
		e := c.KeyGroups[0].States[0].Entries[0]
		e.Value = corrupt(slices.Clone(e.Value))
		if err := mustInstance(t, p, "p#0", 16, noopSender{}).Restore(c); err == nil {
			t.Errorf("%s: a corrupt timer was restored", name)
		}
	}
	// A checkpoint with timers does not restore into an operator without
	// OnTimer.
	g := New("timers")
	keyed := KeyBy(FromSlice(g, "src", []timerOp{}), func(o timerOp) string { return o.Key })
	Sink(Process(keyed, "p", func(s *KeyedSetup[string]) ProcessFunc[string, timerOp, string] {
		return func(*Context[string], timerOp, *Collector[string]) error { return nil }
	}), "sink", discard[string])
	err := mustInstance(t, mustPlan(t, g), "p#0", 16, noopSender{}).Restore(st)
	if !errors.Is(err, ErrIncompatibleState) {
		t.Fatalf("restore of timers into an operator without OnTimer = %v, want ErrIncompatibleState", err)
	}
}

func cloneState(st *messages.TaskState) *messages.TaskState {
	return proto.Clone(st).(*messages.TaskState)
}

// A task's watermark is in its snapshot and comes back with it, also when
// rescaled (the highest of the parts): a timer at or before it that a
// record registers after the restore fires at once, as it would have
// before the failure, not when the watermark reaches it again.
func TestWatermarkSnapshotRestore(t *testing.T) {
	var fired []firedTimer
	p1 := timerTestJob(1, &fired)
	inst := mustInstance(t, p1, "p#0", 16, noopSender{})
	st := &messages.TaskState{}
	if err := inst.Snapshot(st); err != nil || st.Watermark != nil {
		t.Fatalf("a snapshot before any watermark holds %v, %v; want none", st.Watermark, err)
	}
	if err := inst.(WatermarkListener).OnWatermark(500); err != nil {
		t.Fatal(err)
	}
	st = &messages.TaskState{}
	if err := inst.Snapshot(st); err != nil || st.GetWatermark() != 500 {
		t.Fatalf("snapshot watermark %v, %v; want 500", st.Watermark, err)
	}
	restored := mustInstance(t, p1, "p#0", 16, noopSender{})
	if err := restored.Restore(st); err != nil {
		t.Fatal(err)
	}
	if err := restored.ProcessBatch(0, []timerOp{{Key: "a", At: 400}, {Key: "b", At: 600}}, nil); err != nil {
		t.Fatal(err)
	}
	if want := []firedTimer{{"a", 400, EventTime}}; !slices.Equal(fired, want) {
		t.Fatalf("fired %v after the restore at watermark 500, want %v", fired, want)
	}

	low := proto.Clone(st).(*messages.TaskState)
	low.Watermark = proto.Int64(300)
	p2 := timerTestJob(2, &fired)
	merged := MergeState(mustTask(t, p2, "p#1"), TaskRestore{Rescaled: true}, []*messages.TaskState{low, st, {}})
	if merged.GetWatermark() != 500 {
		t.Fatalf("merged watermark %v, want the highest, 500", merged.Watermark)
	}
}
