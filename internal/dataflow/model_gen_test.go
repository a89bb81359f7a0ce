package dataflow

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// The model test of the state backends (model_test.go) runs one random
// sequence of operations on two sets of instances of the same operator,
// one keeping its keyed state on the heap and the other on disk, and
// compares what each saw. This file holds the sequences: the operations,
// their generator from a seed, how they print, and how a failing one is
// shrunk.

// mCfg is what a sequence fixes for its whole run.
type mCfg struct {
	MaxP  int   // the job's max parallelism: its number of key groups
	Par   int   // the operator's parallelism at the start
	Keys  int   // records use keys k0 .. k<Keys-1>
	TTL   int64 // the time-to-live of states vt and mt, in seconds
	Batch int   // records per output batch (InstanceContext.BatchSize)
	// Untracked creates the instances with SkipDirtyKeyGroups, as the
	// runtime does when checkpoints are full: they then report every key
	// group as written.
	Untracked bool
	// Pad lengthens the values of vt and mt by as many bytes, so that
	// the state outgrows the databases' memtable of 1 MiB: tables are
	// flushed and compacted while the sequence runs.
	Pad int
}

func (c mCfg) String() string {
	return fmt.Sprintf("config maxP=%d par=%d keys=%d ttl=%ds batch=%d untracked=%v pad=%d", c.MaxP, c.Par, c.Keys, c.TTL, c.Batch, c.Untracked, c.Pad)
}

// mSeq is a sequence: its configuration and operations.
type mSeq struct {
	Seed uint64
	Cfg  mCfg
	Ops  []mOp
}

// mKind is the kind of an operation of a sequence.
type mKind uint8

const (
	// mBatch gives every task an input batch: the records of Recs whose
	// key group it owns, in order.
	mBatch mKind = iota + 1
	// mClock sets the processing time to T (seconds); it never goes back.
	mClock
	// mWatermark gives every task watermark T (seconds).
	mWatermark
	// mFire fires every task's processing-time timers due at the clock.
	mFire
	// mCheckpoint takes a checkpoint, incremental when Incr, as the
	// runtime takes it on each backend; Defer completes it (the
	// asynchronous part) only before the next operation that is not a
	// batch, a clock or a timer operation, so that the tasks go on in
	// between.
	mCheckpoint
	// mSavepoint takes a savepoint: every state's entries, readable by
	// either backend.
	mSavepoint
	// mRestore restores a stored checkpoint or savepoint, the Back-th
	// newest (modulo their number), into Par new tasks, key group by key
	// group when ByGroup, as the runtime restores it: a checkpoint into
	// the backend it was taken on, a savepoint into the other one when
	// Switch. The new tasks declare states vt and mt with a time-to-live
	// of TTL seconds (0: none), which may be another than the point's.
	mRestore
	// mSwitch takes a savepoint and restores it at once into Par tasks of
	// the other backend, with a time-to-live of TTL.
	mSwitch
)

// mOp is one operation of a sequence. Its fields are absolute (times,
// not advances), so that a sequence with operations left out is still a
// valid one: shrinking drops operations freely.
type mOp struct {
	Kind    mKind
	Recs    []mRec
	T       int64 // seconds
	Incr    bool
	Defer   bool
	Back    int
	Par     int
	ByGroup bool
	Switch  bool
	TTL     int64
}

func (o mOp) String() string {
	switch o.Kind {
	case mBatch:
		recs := make([]string, len(o.Recs))
		for i, r := range o.Recs {
			recs[i] = r.String()
		}
		return "batch " + strings.Join(recs, " ")
	case mClock:
		return fmt.Sprintf("clock %ds", o.T)
	case mWatermark:
		return fmt.Sprintf("watermark %ds", o.T)
	case mFire:
		return "fire processing-time timers"
	case mCheckpoint:
		return fmt.Sprintf("checkpoint %s%s", map[bool]string{false: "full", true: "incremental"}[o.Incr], deferred(o.Defer))
	case mSavepoint:
		return "savepoint" + deferred(o.Defer)
	case mRestore:
		return fmt.Sprintf("restore back=%d par=%d by-group=%v switch=%v ttl=%ds", o.Back, o.Par, o.ByGroup, o.Switch, o.TTL)
	case mSwitch:
		return fmt.Sprintf("switch backends par=%d by-group=%v ttl=%ds", o.Par, o.ByGroup, o.TTL)
	}
	return fmt.Sprintf("mKind(%d)", o.Kind)
}

func deferred(d bool) string {
	if d {
		return " (completed later)"
	}
	return ""
}

// mRec is a record: a key and what the process function does with the
// key's state, in order.
type mRec struct {
	Key string
	Ops []mStOp
}

func (r mRec) String() string {
	ops := make([]string, len(r.Ops))
	for i, o := range r.Ops {
		ops[i] = o.String()
	}
	return r.Key + "{" + strings.Join(ops, "; ") + "}"
}

// sKind is what a record does with one state.
type sKind uint8

const (
	sVGet       sKind = iota + 1 // Get of value state S
	sVSet                        // Set to a value made from N
	sVClear                      // Clear
	sVLen                        // Len: the task's keys with a value
	sVMutate                     // Get, then change the value in place by N (state vl)
	sMGet                        // Get of user key UK of map state S
	sMHas                        // whether Get finds UK
	sMPut                        // Put UK, a value made from N
	sMDel                        // Delete UK
	sMLen                        // Len
	sMAll                        // All, to the end
	sMAllStop                    // All, stopped after N entries
	sMAllMutate                  // All, changing each value in place by N (state ml)
	sMAllDelete                  // All, deleting each user key at most UK
	sRegEvent                    // register an event-time timer at N (seconds)
	sDelEvent                    // delete the event-time timer at N
	sRegProc                     // register a processing-time timer at N
	sDelProc                     // delete the processing-time timer at N
)

// mStOp is one thing a record does.
type mStOp struct {
	Kind sKind
	S    uint8 // the state: 0, 1, 2 for v, vt, vl or m, mt, ml
	UK   string
	N    int64
}

var (
	mValueNames = [3]string{"v", "vt", "vl"}
	mMapNames   = [3]string{"m", "mt", "ml"}
	mUserKeys   = []string{"a", "b", "c", "d", "e", "f"}
)

func (o mStOp) String() string {
	v, m := mValueNames[o.S%3], mMapNames[o.S%3]
	switch o.Kind {
	case sVGet:
		return v + ".get"
	case sVSet:
		return fmt.Sprintf("%s.set %d", v, o.N)
	case sVClear:
		return v + ".clear"
	case sVLen:
		return v + ".len"
	case sVMutate:
		return fmt.Sprintf("%s.mutate %d", v, o.N)
	case sMGet:
		return fmt.Sprintf("%s.get %s", m, o.UK)
	case sMHas:
		return fmt.Sprintf("%s.has %s", m, o.UK)
	case sMPut:
		return fmt.Sprintf("%s.put %s=%d", m, o.UK, o.N)
	case sMDel:
		return fmt.Sprintf("%s.delete %s", m, o.UK)
	case sMLen:
		return m + ".len"
	case sMAll:
		return m + ".all"
	case sMAllStop:
		return fmt.Sprintf("%s.all stop-after=%d", m, o.N)
	case sMAllMutate:
		return fmt.Sprintf("%s.all mutate %d", m, o.N)
	case sMAllDelete:
		return fmt.Sprintf("%s.all delete<=%s", m, o.UK)
	case sRegEvent:
		return fmt.Sprintf("timer.register-event %ds", o.N)
	case sDelEvent:
		return fmt.Sprintf("timer.delete-event %ds", o.N)
	case sRegProc:
		return fmt.Sprintf("timer.register-processing %ds", o.N)
	case sDelProc:
		return fmt.Sprintf("timer.delete-processing %ds", o.N)
	}
	return fmt.Sprintf("sKind(%d)", o.Kind)
}

// String prints the sequence one operation a line, numbered as the
// history numbers them.
func (s mSeq) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, %s\n", s.Seed, s.Cfg)
	for i, o := range s.Ops {
		fmt.Fprintf(&b, "#%d %s\n", i, o)
	}
	return b.String()
}

// mStart is where the clock and the watermark start, in seconds (a write
// time of 0 reads as none).
const (
	mStartClock     = 1000
	mStartWatermark = 500
)

// mGen generates a sequence.
type mGen struct {
	r      *rand.Rand
	cfg    mCfg
	now    int64 // seconds
	wm     int64
	par    int
	ttl    int64 // of the tasks now
	points int   // checkpoints and savepoints taken so far
	// timers are recent timers registered, for deletes to name.
	timers []int64
}

// genModelSeq returns the sequence of seed, of n operations.
func genModelSeq(seed uint64, n int) mSeq {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	cfg := mCfg{
		MaxP:      []int{4, 8, 16, 128}[r.IntN(4)],
		Par:       1 + r.IntN(4),
		Keys:      3 + r.IntN(10),
		TTL:       []int64{2, 5, 10}[r.IntN(3)],
		Batch:     1 + r.IntN(8),
		Untracked: r.IntN(8) == 0,
	}
	if r.IntN(6) == 0 {
		cfg.Pad = 16000
	}
	g := &mGen{r: r, cfg: cfg, now: mStartClock, wm: mStartWatermark, par: cfg.Par, ttl: cfg.TTL}
	seq := mSeq{Seed: seed, Cfg: cfg}
	for len(seq.Ops) < n {
		seq.Ops = append(seq.Ops, g.op())
	}
	return seq
}

func (g *mGen) op() mOp {
	r := g.r
	switch x := r.IntN(100); {
	case x < 50:
		recs := make([]mRec, 1+r.IntN(6))
		for i := range recs {
			recs[i] = g.rec()
		}
		return mOp{Kind: mBatch, Recs: recs}
	case x < 60:
		if r.IntN(4) > 0 {
			g.now += r.Int64N(max(g.ttl, g.cfg.TTL) + 2)
		}
		return mOp{Kind: mClock, T: g.now}
	case x < 65:
		g.wm += r.Int64N(5)
		return mOp{Kind: mWatermark, T: g.wm}
	case x < 69:
		return mOp{Kind: mFire}
	case x < 83:
		g.points++
		return mOp{Kind: mCheckpoint, Incr: x >= 75, Defer: r.IntN(3) == 0}
	case x < 87:
		g.points++
		return mOp{Kind: mSavepoint, Defer: r.IntN(3) == 0}
	case x < 95:
		if r.IntN(4) == 0 { // another time-to-live, or none
			g.ttl = []int64{0, 2, 5, 10}[r.IntN(4)]
		}
		o := mOp{Kind: mRestore, Par: g.newPar(), ByGroup: r.IntN(2) == 0, Switch: r.IntN(2) == 0, TTL: g.ttl}
		if g.points > 1 && r.IntN(3) == 0 {
			o.Back = r.IntN(g.points)
		}
		return o
	}
	g.points++
	return mOp{Kind: mSwitch, Par: g.newPar(), ByGroup: r.IntN(2) == 0, TTL: g.ttl}
}

// newPar is the parallelism of a restore: half the time the current one.
func (g *mGen) newPar() int {
	if g.r.IntN(2) == 0 {
		g.par = 1 + g.r.IntN(4)
	}
	return g.par
}

func (g *mGen) rec() mRec {
	r := g.r
	rec := mRec{Key: fmt.Sprint("k", r.IntN(g.cfg.Keys))}
	for range 1 + r.IntN(4) {
		rec.Ops = append(rec.Ops, g.stOp())
	}
	return rec
}

func (g *mGen) stOp() mStOp {
	r := g.r
	o := mStOp{S: uint8(r.IntN(3)), UK: mUserKeys[r.IntN(len(mUserKeys))], N: r.Int64N(100)}
	switch x := r.IntN(100); {
	case x < 35:
		o.Kind = pick(r, []sKind{sVGet, sVSet, sVClear, sVLen, sVMutate}, []int{35, 35, 10, 10, 10})
		if o.Kind == sVMutate {
			o.S = 2
		}
	case x < 80:
		o.Kind = pick(r, []sKind{sMGet, sMHas, sMPut, sMDel, sMLen, sMAll, sMAllStop, sMAllMutate, sMAllDelete},
			[]int{15, 5, 35, 12, 8, 10, 5, 5, 5})
		switch o.Kind {
		case sMAllMutate:
			o.S = 2
		case sMAllStop:
			o.N = 1 + r.Int64N(3)
		}
	default:
		o.Kind = pick(r, []sKind{sRegEvent, sDelEvent, sRegProc, sDelProc}, []int{35, 15, 35, 15})
		switch o.Kind {
		case sRegEvent:
			o.N = g.wm - 1 + r.Int64N(8)
			g.timers = append(g.timers, o.N)
		case sRegProc:
			o.N = g.now - 1 + r.Int64N(10)
			g.timers = append(g.timers, o.N)
		default:
			if len(g.timers) > 0 && r.IntN(4) > 0 {
				o.N = g.timers[len(g.timers)-1-r.IntN(min(len(g.timers), 8))]
			} else {
				o.N = g.now + r.Int64N(8)
			}
		}
	}
	return o
}

// pick returns one of ks, with the weights ws.
func pick[T any](r *rand.Rand, ks []T, ws []int) T {
	total := 0
	for _, w := range ws {
		total += w
	}
	x := r.IntN(total)
	for i, w := range ws {
		if x < w {
			return ks[i]
		}
		x -= w
	}
	return ks[len(ks)-1]
}

// shrinkModel returns a shorter sequence that still fails, as far as
// tries runs of fails allow: it drops chunks of operations (halves, then
// quarters, down to single ones), then records of batches and what
// records do, then makes the operations left plainer (restores at
// parallelism 1, checkpoints completed at once), until nothing more
// goes. fails is true of seq itself.
func shrinkModel(seq mSeq, fails func(mSeq) bool, tries int) mSeq {
	try := func(cand mSeq) bool {
		if tries <= 0 {
			return false
		}
		tries--
		return fails(cand)
	}
	for changed := true; changed && tries > 0; {
		changed = false
		for n := max(1, len(seq.Ops)/2); n >= 1; n /= 2 {
			for i := 0; i+n <= len(seq.Ops); {
				cand := seq
				cand.Ops = slices.Delete(slices.Clone(seq.Ops), i, i+n)
				if try(cand) {
					seq, changed = cand, true
				} else {
					i += n
				}
			}
			if n == 1 {
				break
			}
		}
		for i := 0; i < len(seq.Ops); i++ {
			if seq.Ops[i].Kind != mBatch {
				continue
			}
			for j := 0; j < len(seq.Ops[i].Recs); {
				if len(seq.Ops[i].Recs) == 1 {
					break // dropping the batch is the chunk pass's
				}
				cand := seq.withOp(i, func(o *mOp) { o.Recs = slices.Delete(o.Recs, j, j+1) })
				if try(cand) {
					seq, changed = cand, true
				} else {
					j++
				}
			}
			for j := range seq.Ops[i].Recs {
				for k := 0; k < len(seq.Ops[i].Recs[j].Ops) && len(seq.Ops[i].Recs[j].Ops) > 1; {
					cand := seq.withOp(i, func(o *mOp) { o.Recs[j].Ops = slices.Delete(o.Recs[j].Ops, k, k+1) })
					if try(cand) {
						seq, changed = cand, true
					} else {
						k++
					}
				}
			}
		}
		for i := range seq.Ops {
			for _, plain := range []func(*mOp) bool{
				func(o *mOp) bool { c := o.Par > 1; o.Par = 1; return c },
				func(o *mOp) bool { c := o.Defer; o.Defer = false; return c },
				func(o *mOp) bool { c := o.ByGroup; o.ByGroup = false; return c },
				func(o *mOp) bool { c := o.Back > 0; o.Back = 0; return c },
			} {
				var differs bool
				cand := seq.withOp(i, func(o *mOp) { differs = plain(o) })
				if differs && try(cand) {
					seq, changed = cand, true
				}
			}
		}
	}
	return seq
}

// withOp returns a copy of s whose operation i is changed by fn; the
// operations and records it changes are copies.
func (s mSeq) withOp(i int, fn func(*mOp)) mSeq {
	s.Ops = slices.Clone(s.Ops)
	o := s.Ops[i]
	o.Recs = slices.Clone(o.Recs)
	for j := range o.Recs {
		o.Recs[j].Ops = slices.Clone(o.Recs[j].Ops)
	}
	fn(&o)
	s.Ops[i] = o
	return s
}
