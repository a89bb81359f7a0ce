package dataflow

import (
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/snapflow/snapflow/internal/diskstate"
	"github.com/snapflow/snapflow/messages"
)

// The model test of the state backends, after pebble's metamorphic tests:
// a seeded random sequence of operations (model_gen_test.go) runs twice,
// on two sides that start on different backends (one on the heap, one on
// disk) and switch together, so that at every moment one is on the heap
// and the other on disk. Each side records a history: every read's
// result, every record emitted, Len results, iterations in a canonical
// order, timers fired, and the entries of every savepoint. The two
// histories must be the same; when they are not, the sequence is shrunk
// and printed with its seed.
//
// The sides drive the instances through the runtime's interfaces only
// (Instance, KeyGroupSnapshotter, AsyncSnapshotter, DiskCheckpointer,
// KeyGroupRestorer, WatermarkListener, ProcessingTimers, PlanRestore), as
// actors/internal/engine does: checkpoints full and incremental on each
// backend, savepoints, restores at other parallelisms.

// mValue is a value state as the model uses it: values made from a
// number, shown as text.
type mValue interface {
	get() (string, bool)
	set(n int64)
	clear()
	len() int
	mutate(n int64) string
}

type mVal[V any] struct {
	st   *ValueState[string, V]
	mk   func(int64) V
	show func(V) string
	// bump changes a value in place by n (nil: the type cannot be), and
	// reports whether it did.
	bump func(V, int64) bool
}

func (a *mVal[V]) get() (string, bool) {
	x, ok := a.st.Get()
	if !ok {
		return "", false
	}
	return a.show(x), true
}

func (a *mVal[V]) set(n int64) { a.st.Set(a.mk(n)) }
func (a *mVal[V]) clear()      { a.st.Clear() }
func (a *mVal[V]) len() int    { return a.st.Len() }

// mutate changes the value Get hands out in place, without Set: the
// state keeps the change (see Value).
func (a *mVal[V]) mutate(n int64) string {
	x, ok := a.st.Get()
	switch {
	case !ok:
		return "absent"
	case a.bump == nil || !a.bump(x, n):
		return "unchanged"
	}
	return "changed"
}

// mMap is a map state as the model uses it.
type mMap interface {
	get(uk string) (string, bool)
	put(uk string, n int64)
	del(uk string)
	len() int
	all(yield func(uk, x string) bool)
	allMutate(n int64) int
}

type mMapOf[V any] struct {
	st   *MapState[string, string, V]
	mk   func(int64) V
	show func(V) string
	bump func(V, int64) bool
}

func (a *mMapOf[V]) get(uk string) (string, bool) {
	x, ok := a.st.Get(uk)
	if !ok {
		return "", false
	}
	return a.show(x), true
}

func (a *mMapOf[V]) put(uk string, n int64) { a.st.Put(uk, a.mk(n)) }
func (a *mMapOf[V]) del(uk string)          { a.st.Delete(uk) }
func (a *mMapOf[V]) len() int               { return a.st.Len() }

func (a *mMapOf[V]) all(yield func(uk, x string) bool) {
	a.st.All(func(uk string, x V) bool { return yield(uk, a.show(x)) })
}

// allMutate changes every value All hands out in place.
func (a *mMapOf[V]) allMutate(n int64) int {
	changed := 0
	a.st.All(func(_ string, x V) bool {
		if a.bump != nil && a.bump(x, n) {
			changed++
		}
		return true
	})
	return changed
}

// mStates are the states of one instance: v, vt (with a time-to-live
// unless ttl is 0) and vl (a slice, changed in place), and maps m, mt and
// ml alike.
type mStates struct {
	vals [3]mValue
	maps [3]mMap
	v    *ValueState[string, int64]
	m    *MapState[string, string, int64]
}

func newMStates(ks *KeyedSetup[string], ttl time.Duration, pad int) *mStates {
	num := func(n int64) int64 { return n }
	str := func(n int64) string { return "s" + strconv.FormatInt(n, 10) + strings.Repeat(".", pad) }
	list := func(n int64) []int64 { return []int64{n, -n} }
	showNum := func(n int64) string { return strconv.FormatInt(n, 10) }
	showStr := func(s string) string { return shortText(s) }
	showList := func(l []int64) string { return fmt.Sprint(l) }
	bump := func(l []int64, n int64) bool {
		if len(l) == 0 {
			return false
		}
		l[0] += n
		return true
	}
	st := &mStates{v: Value[int64](ks, "v"), m: MapOf[string, int64](ks, "m")}
	vt, mt := Value[string](ks, "vt"), MapOf[string, string](ks, "mt")
	if ttl > 0 {
		vt, mt = vt.WithTTL(ttl), mt.WithTTL(ttl)
	}
	st.vals = [3]mValue{
		&mVal[int64]{st: st.v, mk: num, show: showNum},
		&mVal[string]{st: vt, mk: str, show: showStr},
		&mVal[[]int64]{st: Value[[]int64](ks, "vl"), mk: list, show: showList, bump: bump},
	}
	st.maps = [3]mMap{
		&mMapOf[int64]{st: st.m, mk: num, show: showNum},
		&mMapOf[string]{st: mt, mk: str, show: showStr},
		&mMapOf[[]int64]{st: MapOf[string, []int64](ks, "ml"), mk: list, show: showList, bump: bump},
	}
	return st
}

// apply does what o says with the current key's state and returns what
// a read saw ("" for a write).
func (st *mStates) apply(ctx *Context[string], o mStOp) string {
	v, m := st.vals[o.S%3], st.maps[o.S%3]
	switch o.Kind {
	case sVGet:
		return found(v.get())
	case sVSet:
		v.set(o.N)
	case sVClear:
		v.clear()
	case sVLen:
		return strconv.Itoa(v.len())
	case sVMutate:
		return v.mutate(o.N)
	case sMGet:
		return found(m.get(o.UK))
	case sMHas:
		_, ok := m.get(o.UK)
		return strconv.FormatBool(ok)
	case sMPut:
		m.put(o.UK, o.N)
	case sMDel:
		m.del(o.UK)
	case sMLen:
		return strconv.Itoa(m.len())
	case sMAll:
		return fmt.Sprint(sortedAll(m))
	case sMAllStop:
		// The heap iterates a Go map (random order), the disk in the order
		// of the user keys' bytes: which entries come before the stop
		// differs. Both must stop after as many, and each one seen must be
		// the map's, once.
		var seen []string
		valid := true
		m.all(func(uk, x string) bool {
			seen = append(seen, uk)
			if y, ok := m.get(uk); !ok || y != x {
				valid = false
			}
			return int64(len(seen)) < o.N
		})
		slices.Sort(seen)
		return fmt.Sprintf("saw %d, valid %v", len(seen), valid && len(slices.Compact(seen)) == len(seen))
	case sMAllMutate:
		return fmt.Sprintf("changed %d", m.allMutate(o.N))
	case sMAllDelete:
		var deleted []string
		m.all(func(uk, _ string) bool {
			if uk <= o.UK {
				m.del(uk)
				deleted = append(deleted, uk)
			}
			return true
		})
		slices.Sort(deleted) // in the order of neither backend
		return fmt.Sprint("deleted ", deleted)
	case sRegEvent:
		ctx.RegisterEventTimer(time.Unix(o.N, 0))
	case sDelEvent:
		ctx.DeleteEventTimer(time.Unix(o.N, 0))
	case sRegProc:
		ctx.RegisterProcessingTimer(time.Unix(o.N, 0))
	case sDelProc:
		ctx.DeleteProcessingTimer(time.Unix(o.N, 0))
	}
	return ""
}

// shortText is s, or its start, length and checksum when it is long.
func shortText(s string) string {
	if len(s) <= 40 {
		return s
	}
	return fmt.Sprintf("%.12q... (%d bytes, crc %08x)", s, len(s), crc32.ChecksumIEEE([]byte(s)))
}

func found(x string, ok bool) string {
	if !ok {
		return "absent"
	}
	return x
}

// sortedAll is a map's entries as "uk=x", sorted: the heap iterates a Go
// map in random order, the disk in the order of the user keys' bytes.
func sortedAll(m mMap) []string {
	var out []string
	m.all(func(uk, x string) bool {
		out = append(out, uk+"="+x)
		return true
	})
	slices.Sort(out)
	return out
}

// mSide runs a sequence on one set of instances and records its history.
type mSide struct {
	seq   *mSeq
	dir   string // the databases and the stored checkpoints' files
	disk  bool   // the backend now
	par   int
	ttl   int64 // the time-to-live of vt and mt now, in seconds (0: none)
	plan  *Plan
	now   int64              // the processing time, in ns
	plans map[[2]int64]*Plan // by parallelism and time-to-live
	tasks []*mTask
	// points are the checkpoints and savepoints taken, oldest first.
	points []*mPoint
	// later completes the snapshots of a deferred checkpoint.
	later []func() error
	ids   uint64
	op    int // the operation being run
	hist  []string
	// fault, when not nil, is asked before each thing a record does, with
	// the side's backend: true skips it. The test of the model itself
	// injects faults with it.
	fault func(disk bool, o mStOp) bool
	// stats counts what the run exercised (nil: nothing is counted).
	stats *mStats
}

// mStats counts what runs exercised, to show that the sequences reach
// the paths they are meant to.
type mStats struct {
	runs, ops        int
	incremental      int // incremental checkpoints of a task, on disk and on the heap
	deferred         int // snapshots completed after the task went on
	rescales         int // restores at another parallelism than the point's
	fileMerges       int // tasks restored from the files of more than one database
	adopted          int // tasks that took a stored database's files as theirs
	byGroup          int // tasks restored key group by key group
	switches         int // restores into the other backend than the point's
	eventFired       int // event-time timers fired
	processingFired  int // processing-time timers fired
	expiredReads     int // reads of vt or mt that found nothing (expired, or never set)
	iterations       int // All over a map, to the end or stopped
	savepointEntries int // entries read back from savepoints
}

func (st *mStats) String() string {
	return fmt.Sprintf("%d runs of %d operations: %d incremental checkpoints of a task, %d deferred snapshots, %d rescales, "+
		"%d tasks restored from several databases, %d adopted databases, %d tasks restored by key group, %d backend switches, "+
		"%d event-time and %d processing-time timers fired, %d reads of vt and mt that found nothing, %d iterations, %d savepoint entries",
		st.runs, st.ops, st.incremental, st.deferred, st.rescales, st.fileMerges, st.adopted, st.byGroup, st.switches,
		st.eventFired, st.processingFired, st.expiredReads, st.iterations, st.savepointEntries)
}

// count adds one to the counter fn picks, when counting.
func (s *mSide) count(fn func(*mStats) *int) {
	if s.stats != nil {
		*fn(s.stats)++
	}
}

// mTask is one task of a side: its instance, and what incremental
// checkpoints build on.
type mTask struct {
	plan *TaskPlan
	inst Instance
	out  *fakeSender
	// base holds the key groups the task's last checkpoint stored, as
	// the runtime's incremental tracker refers back to them; nil: the
	// next checkpoint is full. acc holds the key groups written since.
	base map[uint32]*messages.KeyGroupState
	acc  groupSet
}

// mPoint is a checkpoint or savepoint as a store holds it.
type mPoint struct {
	savepoint, disk bool
	plan            *Plan
	par             int
	tasks           []*mStored
}

// mStored is one task's part of a point: its state without key groups,
// its key groups (those of the last full checkpoint, overwritten by the
// incremental ones since), and on disk the database's files.
type mStored struct {
	id     string
	head   *messages.TaskState
	groups map[uint32]*messages.KeyGroupState
	desc   *messages.DiskCheckpoint
	dir    string
	files  []string
}

// log adds a line to the history, numbered by the operation ("end"
// after the last).
func (s *mSide) log(format string, args ...any) {
	at := "end "
	if s.op < len(s.seq.Ops) {
		at = fmt.Sprintf("#%d ", s.op)
	}
	s.hist = append(s.hist, at+fmt.Sprintf(format, args...))
}

// runModelSide runs seq on a side that starts on disk or on the heap,
// with its files under dir, and returns its history; an error ends it.
func runModelSide(seq mSeq, dir string, disk bool, fault func(bool, mStOp) bool, stats *mStats) (hist []string, err error) {
	s := &mSide{seq: &seq, dir: dir, disk: disk, now: mStartClock * int64(time.Second), plans: map[[2]int64]*Plan{}, ttl: seq.Cfg.TTL, fault: fault, stats: stats}
	if stats != nil {
		stats.runs++
		stats.ops += len(seq.Ops)
	}
	defer func() {
		if cerr := s.closeAll(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			s.log("ERROR")
		}
		hist = s.hist
	}()
	if err := s.start(seq.Cfg.Par); err != nil {
		return nil, err
	}
	for i, o := range seq.Ops {
		s.op = i
		if err := s.step(o); err != nil {
			return nil, fmt.Errorf("#%d %s: %w", i, o, err)
		}
	}
	s.op = len(seq.Ops)
	if err := s.complete(); err != nil {
		return nil, err
	}
	// What the tasks hold at the end, entry by entry: a last savepoint.
	return nil, s.checkpoint(false, false, true)
}

// step runs one operation; a panic (a failed read on disk) is an error.
func (s *mSide) step(o mOp) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	switch o.Kind {
	case mBatch:
		return s.batch(o.Recs)
	case mClock:
		s.now = max(s.now, o.T*int64(time.Second))
	case mWatermark:
		for _, t := range s.tasks {
			if err := t.inst.(WatermarkListener).OnWatermark(o.T * int64(time.Second)); err != nil {
				return err
			}
		}
		s.collect()
	case mFire:
		for _, t := range s.tasks {
			pt := t.inst.(ProcessingTimers)
			if next, ok := pt.NextProcessingTimer(); ok {
				s.log("%s next processing-time timer %ds", t.plan.ID, time.Unix(0, next).Unix())
			}
			if err := pt.FireProcessingTimers(s.now); err != nil {
				return err
			}
		}
		s.collect()
	case mCheckpoint:
		return s.checkpoint(o.Incr, o.Defer, false)
	case mSavepoint:
		return s.checkpoint(false, o.Defer, true)
	case mRestore:
		if len(s.points) == 0 {
			s.log("nothing to restore")
			return nil
		}
		n := len(s.points) - 1 - o.Back%len(s.points)
		pt := s.points[n]
		disk := pt.disk
		if pt.savepoint && o.Switch {
			disk = !disk
		}
		s.log("restore point %d at parallelism %d", n, o.Par)
		return s.restore(pt, o.Par, o.TTL, disk, o.ByGroup)
	case mSwitch:
		if err := s.checkpoint(false, false, true); err != nil {
			return err
		}
		pt := s.points[len(s.points)-1]
		return s.restore(pt, o.Par, o.TTL, !pt.disk, o.ByGroup)
	default:
		return fmt.Errorf("unknown operation %d", o.Kind)
	}
	return nil
}

// planOf returns the plan of the model's job at parallelism par, whose
// states vt and mt have a time-to-live of ttl seconds (0: none).
func (s *mSide) planOf(par int, ttl int64) (*Plan, error) {
	if p := s.plans[[2]int64{int64(par), ttl}]; p != nil {
		return p, nil
	}
	g := New("model", MaxParallelism(s.seq.Cfg.MaxP))
	k := KeyBy(FromSlice(g, "src", []mRec{}), func(r mRec) string { return r.Key })
	setup := func(ks *KeyedSetup[string]) ProcessFunc[string, mRec, string] { return s.setup(ks, ttl) }
	Sink(Process(k, "p", setup, Parallelism(par)), "sink", discard[string])
	p, err := NewPlan(g)
	if err != nil {
		return nil, err
	}
	s.plans[[2]int64{int64(par), ttl}] = p
	return p, nil
}

// setup declares the model's states and returns its process function:
// each record does what its operations say and emits what its reads saw;
// a timer emits what it fired with and what the key holds, then writes.
func (s *mSide) setup(ks *KeyedSetup[string], ttl int64) ProcessFunc[string, mRec, string] {
	ks.clock = func() int64 { return s.now }
	st := newMStates(ks, time.Duration(ttl)*time.Second, s.seq.Cfg.Pad)
	OnTimer(ks, func(ctx *Context[string], tm Timer, out *Collector[string]) error {
		v, ok := st.v.Get()
		out.Emit(fmt.Sprintf("%s %s fired %s %ds: v %d %v, m %v, mt.len %d",
			ctx.TaskID(), ctx.Key(), tm.Domain, tm.Time.Unix(), v, ok, sortedAll(st.maps[0]), st.maps[1].len()))
		if tm.Domain == EventTime {
			s.count(func(c *mStats) *int { return &c.eventFired })
		} else {
			s.count(func(c *mStats) *int { return &c.processingFired })
		}
		st.v.Set(v + 1)
		st.m.Put("fired", tm.Time.Unix())
		return nil
	})
	return func(ctx *Context[string], r mRec, out *Collector[string]) error {
		for _, o := range r.Ops {
			if s.fault != nil && s.fault(s.disk, o) {
				continue
			}
			seen := st.apply(ctx, o)
			switch {
			case seen == "absent" && o.S == 1 && (o.Kind == sVGet || o.Kind == sMGet):
				s.count(func(c *mStats) *int { return &c.expiredReads })
			case o.Kind == sMAll || o.Kind == sMAllStop || o.Kind == sMAllDelete || o.Kind == sMAllMutate:
				s.count(func(c *mStats) *int { return &c.iterations })
			}
			if seen != "" {
				out.Emit(fmt.Sprintf("%s %s %s -> %s", ctx.TaskID(), ctx.Key(), o, seen))
			}
		}
		return nil
	}
}

// start creates par tasks with no state.
func (s *mSide) start(par int) error {
	p, err := s.planOf(par, s.ttl)
	if err != nil {
		return err
	}
	s.par, s.plan = par, p
	for sub := range par {
		if _, err := s.newTask(sub); err != nil {
			return err
		}
	}
	return nil
}

// newTask creates the instance of subtask sub on the side's backend.
func (s *mSide) newTask(sub int) (*mTask, error) {
	task := s.plan.Task(fmt.Sprint("p#", sub))
	out := &fakeSender{}
	ic := InstanceContext{Job: "model", BatchSize: s.seq.Cfg.Batch, Sender: out, SkipDirtyKeyGroups: s.seq.Cfg.Untracked}
	if s.disk {
		ic.DiskState = &diskstate.Config{Dir: filepath.Join(s.dir, "db"), CacheBytes: 1 << 20, MemTableBytes: 1 << 20}
	}
	inst, err := s.plan.NewInstance(task.Index, ic)
	if err != nil {
		return nil, err
	}
	t := &mTask{plan: task, inst: inst, out: out, acc: make(groupSet, KeyGroupWords(s.seq.Cfg.MaxP))}
	s.tasks = append(s.tasks, t)
	return t, nil
}

// closeAll closes every task's instance.
func (s *mSide) closeAll() error {
	var errs []error
	for _, t := range s.tasks {
		errs = append(errs, t.inst.Close())
	}
	s.tasks = nil
	return errors.Join(errs...)
}

// batch gives each task the records whose key group it owns, in order.
func (s *mSide) batch(recs []mRec) error {
	maxP := s.seq.Cfg.MaxP
	byTask := make([][]mRec, s.par)
	for _, r := range recs {
		sub := TaskForKeyGroup(maxP, s.par, int(HashString(r.Key)%uint64(maxP)))
		byTask[sub] = append(byTask[sub], r)
	}
	for sub, b := range byTask {
		if len(b) == 0 {
			continue
		}
		if err := s.tasks[sub].inst.ProcessBatch(0, b, nil); err != nil { // b is the instance's now
			return err
		}
	}
	s.collect()
	return nil
}

// collect flushes every task and adds what each emitted to the history,
// task by task.
func (s *mSide) collect() {
	for _, t := range s.tasks {
		t.inst.Flush()
		for _, b := range t.out.sends {
			for _, line := range b.batch.([]string) {
				s.log("%s", line)
			}
		}
		t.out.reset()
	}
}

// complete completes the deferred snapshots.
func (s *mSide) complete() error {
	later := s.later
	s.later = nil
	for _, fn := range later {
		if err := fn(); err != nil {
			return err
		}
	}
	return nil
}

// checkpoint takes a checkpoint (incremental when incr and the task has
// a base) or a savepoint of every task, as the runtime's takeSnapshot
// does on the side's backend, and stores it as a point; with deferred,
// the asynchronous part runs later (see mCheckpoint). A savepoint's
// entries are added to the history.
func (s *mSide) checkpoint(incr, deferred, savepoint bool) error {
	if err := s.complete(); err != nil {
		return err
	}
	s.ids++
	id := s.ids
	pt := &mPoint{savepoint: savepoint, disk: s.disk, plan: s.plan, par: s.par, tasks: make([]*mStored, len(s.tasks))}
	s.points = append(s.points, pt)
	for i, t := range s.tasks {
		dirty := make(groupSet, KeyGroupWords(s.seq.Cfg.MaxP))
		t.inst.(KeyGroupSnapshotter).TakeDirtyKeyGroups(dirty)
		for w := range dirty {
			t.acc[w] |= dirty[w]
		}
		full := savepoint || !incr || t.base == nil
		var groups groupSet // nil: every key group
		if !full {
			groups = slices.Clone(t.acc)
			s.count(func(c *mStats) *int { return &c.incremental })
		}
		stored := &mStored{id: t.plan.ID}
		pt.tasks[i] = stored
		st := &messages.TaskState{}
		var finish func() error
		if s.disk && !savepoint {
			files, err := t.inst.(DiskCheckpointer).SnapshotFiles(st, groups, full, strconv.FormatUint(id, 10))
			if err != nil {
				return err
			}
			finish = func() error { return s.storeFiles(files, stored, id) }
		} else {
			var err error
			if finish, err = t.inst.(AsyncSnapshotter).SnapshotAsync(st, groups, full); err != nil {
				return err
			}
		}
		base := t.base
		if !savepoint { // the runtime's tracker: dirty since the last checkpoint, savepoints aside
			t.acc = make(groupSet, len(t.acc))
		}
		done := func() error {
			if err := finish(); err != nil {
				return err
			}
			back, err := protoRoundTrip(st)
			if err != nil {
				return err
			}
			kgs := map[uint32]*messages.KeyGroupState{}
			if !full {
				maps.Copy(kgs, base)
				for kg := range uint32(s.seq.Cfg.MaxP) { // a selected key group absent from st is empty
					if groups.has(int(kg)) {
						delete(kgs, kg)
					}
				}
			}
			for _, g := range back.GetKeyGroups() {
				kgs[g.GetKeyGroup()] = g
			}
			back.KeyGroups = nil
			stored.head, stored.groups = back, kgs
			if savepoint && s.stats != nil {
				for _, g := range kgs {
					for _, ns := range g.GetStates() {
						s.stats.savepointEntries += len(ns.GetEntries())
					}
				}
			}
			if savepoint {
				s.logEntries(fmt.Sprintf("savepoint %d %s", id, t.plan.ID), back, kgs)
			} else {
				t.base = kgs
			}
			return nil
		}
		if deferred {
			s.count(func(c *mStats) *int { return &c.deferred })
			s.later = append(s.later, done)
		} else if err := done(); err != nil {
			return err
		}
	}
	return nil
}

// storeFiles takes a database checkpoint and copies its files to the
// side's store, as the runtime's upload does.
func (s *mSide) storeFiles(files *DiskFiles, stored *mStored, id uint64) (err error) {
	defer files.Release()
	if err := files.Take(); err != nil {
		return err
	}
	defer func() {
		if rerr := files.Checkpoint.Remove(); err == nil {
			err = rerr
		}
	}()
	dir := filepath.Join(s.dir, "store", fmt.Sprintf("%d-%s", id, stored.id))
	if err := mCopy(files.Dir, files.Files, dir); err != nil {
		return err
	}
	stored.desc, stored.dir, stored.files = files.Desc, dir, files.Files
	return nil
}

// mCopy copies files from one directory to another, which it creates;
// it links the tables, which pebble never changes.
func mCopy(from string, files []string, to string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if diskstate.IsTable(f) && os.Link(filepath.Join(from, f), filepath.Join(to, f)) == nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(from, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, f), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func protoRoundTrip(st *messages.TaskState) (*messages.TaskState, error) {
	b, err := proto.Marshal(st)
	if err != nil {
		return nil, err
	}
	back := &messages.TaskState{}
	return back, proto.Unmarshal(b, back)
}

// logEntries adds a savepoint's entries to the history, sorted (the
// backends store them in different orders), with its timers counted and
// its watermark.
func (s *mSide) logEntries(what string, head *messages.TaskState, kgs map[uint32]*messages.KeyGroupState) {
	st := proto.Clone(head).(*messages.TaskState)
	var lines []string
	for _, kg := range slices.Sorted(maps.Keys(kgs)) {
		g := kgs[kg]
		st.KeyGroups = append(st.KeyGroups, g)
		for _, ns := range g.GetStates() {
			if ns.GetName() == timerStateName {
				continue
			}
			for _, e := range ns.GetEntries() {
				lines = append(lines, fmt.Sprintf("key group %d %s key %q user key %q value %s written %d",
					kg, ns.GetName(), e.GetKey(), e.GetMapKey(), shortText(fmt.Sprintf("%q", e.GetValue())), e.GetWrittenAt()))
			}
		}
	}
	slices.Sort(lines)
	for _, l := range lines {
		s.log("%s: %s", what, l)
	}
	event, proc, err := PendingTimers(st)
	wm := "none"
	if st.Watermark != nil {
		wm = strconv.FormatInt(st.GetWatermark(), 10)
	}
	s.log("%s: timers: %d event time, %d processing time (%v); watermark %s", what, event, proc, err, wm)
}

// restore restores point pt into par new tasks on the disk or heap
// backend, as the runtime does: PlanRestore says which stored tasks each
// new one reads, it restores their key groups in its range (whole, or
// key group by key group), then the files of their databases.
func (s *mSide) restore(pt *mPoint, par int, ttl int64, disk, byGroup bool) error {
	if err := s.complete(); err != nil {
		return err
	}
	if err := s.closeAll(); err != nil {
		return err
	}
	p, err := s.planOf(par, ttl)
	if err != nil {
		return err
	}
	states := map[string]*messages.TaskState{}
	byID := map[string]*mStored{}
	for _, stored := range pt.tasks {
		st := proto.Clone(stored.head).(*messages.TaskState)
		for _, kg := range slices.Sorted(maps.Keys(stored.groups)) {
			st.KeyGroups = append(st.KeyGroups, stored.groups[kg])
		}
		states[stored.id], byID[stored.id] = st, stored
	}
	decl, err := p.DeclaredStates()
	if err != nil {
		return err
	}
	r, err := PlanRestore(p, decl, checkpointFrom(pt.plan, states), states, RestoreOptions{Rescale: true})
	if err != nil {
		return err
	}
	if par != pt.par {
		s.count(func(c *mStats) *int { return &c.rescales })
	}
	if disk != pt.disk {
		s.count(func(c *mStats) *int { return &c.switches })
	}
	s.par, s.plan, s.disk, s.ttl = par, p, disk, ttl
	for sub := range par {
		t, err := s.newTask(sub)
		if err != nil {
			return err
		}
		if err := s.restoreTask(t, r, states, byID, byGroup); err != nil {
			return fmt.Errorf("%s: %w", t.plan.ID, err)
		}
		if !pt.savepoint && par == pt.par { // the runtime's tracker builds on a task's own checkpoint
			t.base = pt.tasks[sub].groups
		}
	}
	return nil
}

func (s *mSide) restoreTask(t *mTask, r *Restore, states map[string]*messages.TaskState, byID map[string]*mStored, byGroup bool) error {
	if st := r.State(s.plan, t.plan.Index, states); st != nil {
		if byGroup {
			s.count(func(c *mStats) *int { return &c.byGroup })
			head := proto.Clone(st).(*messages.TaskState)
			head.KeyGroups = nil
			if err := t.inst.Restore(head); err != nil {
				return err
			}
			for _, g := range st.GetKeyGroups() {
				if err := t.inst.(KeyGroupRestorer).RestoreKeyGroup(g); err != nil {
					return err
				}
			}
		} else if err := t.inst.Restore(st); err != nil {
			return err
		}
	}
	var sources []*mStored
	for _, id := range r.Task(t.plan.Index).Parts {
		if src := byID[id]; src != nil && src.desc != nil &&
			int(src.desc.GetKeyGroupEnd()) > t.plan.KeyGroupStart && int(src.desc.GetKeyGroupStart()) < t.plan.KeyGroupEnd {
			sources = append(sources, src)
		}
	}
	if len(sources) > 1 {
		s.count(func(c *mStats) *int { return &c.fileMerges })
	}
	// As the runtime does: the source that holds most of the task's key
	// groups (the first such on a tie) last, as the base.
	overlap := func(src *mStored) int {
		return min(t.plan.KeyGroupEnd, int(src.desc.GetKeyGroupEnd())) - max(t.plan.KeyGroupStart, int(src.desc.GetKeyGroupStart()))
	}
	if len(sources) > 1 {
		b := 0
		for i, src := range sources {
			if overlap(src) > overlap(sources[b]) {
				b = i
			}
		}
		base := sources[b]
		sources = append(slices.Delete(sources, b, b+1), base)
	}
	for i, src := range sources {
		dc := t.inst.(DiskCheckpointer)
		dir, err := dc.PrepareRestore(strconv.Itoa(i))
		if err != nil {
			return err
		}
		if err := mCopy(src.dir, src.files, dir); err != nil {
			return err
		}
		rep, err := dc.RestoreFiles(dir, src.desc, i == len(sources)-1)
		if rep.Adopted {
			s.count(func(c *mStats) *int { return &c.adopted })
		}
		if rerr := os.RemoveAll(dir); err == nil {
			err = rerr
		}
		if err != nil {
			return err
		}
	}
	if st, ok := t.inst.(Starter); ok {
		return st.Start()
	}
	return nil
}

// mFailure is how the two sides' runs of a sequence differ.
type mFailure struct {
	line       int // the first line that differs
	heap, disk string
	before     []string // the lines before it, up to 5
	heapErr    error    // the side that started on the heap
	diskErr    error    // the side that started on disk
}

func (f *mFailure) String() string {
	var b strings.Builder
	if len(f.before) > 0 {
		fmt.Fprintf(&b, "history lines %d to %d, the same on both sides:\n", f.line-len(f.before), f.line-1)
		for _, l := range f.before {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	fmt.Fprintf(&b, "history line %d differs:\n  started on the heap: %s\n  started on disk:     %s\n", f.line, f.heap, f.disk)
	if f.heapErr != nil {
		fmt.Fprintf(&b, "  the side that started on the heap failed: %v\n", f.heapErr)
	}
	if f.diskErr != nil {
		fmt.Fprintf(&b, "  the side that started on disk failed: %v\n", f.diskErr)
	}
	return b.String()
}

// checkModel runs seq on both sides, under a new directory of root, and
// returns how they differ, or nil. A run that fails on both sides alike
// is a failure too.
func checkModel(seq mSeq, root string, fault func(bool, mStOp) bool, stats *mStats) *mFailure {
	dir, err := os.MkdirTemp(root, "run-")
	if err != nil {
		return &mFailure{heapErr: err, diskErr: err}
	}
	defer os.RemoveAll(dir)
	a, aerr := runModelSide(seq, filepath.Join(dir, "a"), false, fault, stats)
	b, berr := runModelSide(seq, filepath.Join(dir, "b"), true, fault, stats)
	for i := range max(len(a), len(b)) {
		la, lb := "(end)", "(end)"
		if i < len(a) {
			la = a[i]
		}
		if i < len(b) {
			lb = b[i]
		}
		if la != lb {
			return &mFailure{line: i, heap: la, disk: lb, before: a[max(0, i-5):i], heapErr: aerr, diskErr: berr}
		}
	}
	if aerr != nil || berr != nil {
		return &mFailure{line: len(a), heap: "(the same)", disk: "(the same)", heapErr: aerr, diskErr: berr}
	}
	return nil
}

// shrinkReport shrinks the failing seq and describes the shrunk one.
func shrinkReport(seq mSeq, root string, fault func(bool, mStOp) bool, f *mFailure) (mSeq, string) {
	small := shrinkModel(seq, func(c mSeq) bool { return checkModel(c, root, fault, nil) != nil }, 3000)
	if g := checkModel(small, root, fault, nil); g != nil {
		f = g
	}
	return small, fmt.Sprintf("the heap and disk backends differ on seed %d (%d operations, shrunk to %d):\n%s%s",
		seq.Seed, len(seq.Ops), len(small.Ops), small, f)
}

// modelRuns is how many sequences of how many operations the test runs,
// from which seed: SNAPFLOW_MODEL_SEEDS and SNAPFLOW_MODEL_OPS, more of
// both with SNAPFLOW_SOAK=full (make soak); SNAPFLOW_SEED replays one
// seed.
func modelRuns(t *testing.T) (seeds, ops int, first uint64) {
	seeds, ops = 30, 40 // about 8 s of CPU under -race
	if os.Getenv("SNAPFLOW_SOAK") == "full" {
		seeds, ops = 400, 150
	}
	for _, v := range []struct {
		name string
		n    *int
	}{{"SNAPFLOW_MODEL_SEEDS", &seeds}, {"SNAPFLOW_MODEL_OPS", &ops}} {
		if s := os.Getenv(v.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive integer", v.name, s)
			}
			*v.n = n
		}
	}
	first = uint64(time.Now().UnixNano())
	if s := os.Getenv("SNAPFLOW_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SNAPFLOW_SEED=%q: want an unsigned integer: %v", s, err)
		}
		first, seeds = n, 1
	}
	return seeds, ops, first
}

// TestModelBackends runs random sequences of state operations,
// checkpoints, savepoints, restores at other parallelisms and backend
// switches on the heap and on disk (see mSide): their histories must be
// the same. A failing sequence is shrunk and printed one operation a
// line, with its seed and the first line of the histories that differs.
func TestModelBackends(t *testing.T) {
	seeds, ops, first := modelRuns(t)
	t.Logf("%d sequences of %d operations from seed %d (replay one with SNAPFLOW_SEED=<seed> SNAPFLOW_MODEL_OPS=%d)", seeds, ops, first, ops)
	root := t.TempDir()
	stats := &mStats{}
	for i := range seeds {
		seq := genModelSeq(first+uint64(i), ops)
		if f := checkModel(seq, root, nil, stats); f != nil {
			_, report := shrinkReport(seq, root, nil, f)
			t.Fatal(report)
		}
	}
	t.Log(stats)
}

// TestModelCatchesAndShrinks checks the model test itself: with a fault
// injected into whichever side is on disk (a Clear of value state v does
// nothing there), a sequence fails, and it is shrunk to at most 3
// operations, printed with its seed and a v.clear.
func TestModelCatchesAndShrinks(t *testing.T) {
	fault := func(disk bool, o mStOp) bool { return disk && o.Kind == sVClear && o.S == 0 }
	root := t.TempDir()
	for seed := uint64(1); seed <= 20; seed++ {
		seq := genModelSeq(seed, 30)
		f := checkModel(seq, root, fault, nil)
		if f == nil {
			continue
		}
		small, report := shrinkReport(seq, root, fault, f)
		if len(small.Ops) > 3 || !strings.Contains(report, "v.clear") || !strings.Contains(report, fmt.Sprintf("seed %d,", seed)) {
			t.Fatalf("shrunk to %d operations, want at most 3 with a v.clear and the seed:\n%s", len(small.Ops), report)
		}
		if checkModel(small, root, fault, nil) == nil {
			t.Fatalf("the shrunk sequence passes:\n%s", report)
		}
		t.Log(report)
		return
	}
	t.Fatal("no sequence of seeds 1 to 20 caught a Clear that does nothing on disk")
}
