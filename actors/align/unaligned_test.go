package align

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestUnalignedNeverBlocks: an unaligned Aligner processes every data item
// at once, in the order delivered, and buffers nothing. Each checkpoint it
// snapshots comes at the first of its barriers, in increasing order, and
// ends with exactly one Persisted or Abort. For a checkpoint Persisted,
// the data processed before its Snapshot and the data it marked InFlight
// are, together and without overlap, exactly the items that precede its
// barrier on each input (all of an input that ended without it): the
// state plus the channel state replay each item once.
func TestUnalignedNeverBlocks(t *testing.T) {
	persisted := 0
	for seed := uint64(1); seed <= 3000; seed++ {
		n, err := runUnaligned(seed, false)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		persisted += n
	}
	if persisted == 0 {
		t.Fatal("no checkpoint persisted in any run")
	}
}

// TestAlignmentTimeout: an aligned Aligner whose alignments are switched
// to unaligned at random moments (Timeout) keeps both snapshot boundaries:
// an aligned snapshot reflects exactly the items before its barriers, and
// a switched one, with the items it marks InFlight, too.
func TestAlignmentTimeout(t *testing.T) {
	persisted := 0
	for seed := uint64(1); seed <= 3000; seed++ {
		n, err := runUnaligned(seed, true)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		persisted += n
	}
	if persisted == 0 {
		t.Fatal("no alignment was switched and persisted in any run")
	}
}

// runUnaligned drives an unaligned Aligner with random streams, or, with
// timeout, an aligned one whose alignments time out at random moments; it
// returns the number of checkpoints persisted unaligned.
func runUnaligned(seed uint64, timeout bool) (int, error) {
	r := rand.New(rand.NewPCG(seed, 0x5a))
	k := 1 + r.IntN(5)
	K := 1 + r.IntN(8)
	streams := genStreams(r, k, K, r.IntN(3) != 0)
	a := NewUnaligned[item](k)
	if timeout {
		a = New[item](k)
	}
	type ckpt struct {
		before    []int  // per input, data items delivered before its barrier (-1: not yet)
		snapAt    []int  // per input, data items processed when it was snapshotted
		inflight  []int  // per input, data items marked InFlight for it
		end       string // "persisted" or "abort"
		unaligned bool
	}
	cks := map[uint64]*ckpt{}
	get := func(id uint64) *ckpt {
		if cks[id] == nil {
			c := &ckpt{before: make([]int, k), inflight: make([]int, k)}
			for i := range c.before {
				c.before[i] = -1
			}
			cks[id] = c
		}
		return cks[id]
	}
	delivered := make([]int, k)
	processed := make([]int, k)
	ended := make([]bool, k)
	var last uint64
	var out []Action[item]
	external := false
	for {
		live := liveInputs(streams)
		if len(live) == 0 {
			break
		}
		if id, ok := a.Aligning(); timeout && ok && r.IntN(10) == 0 {
			out = a.Timeout(id, out[:0])
		} else if r.IntN(100) < 2 {
			external = true
			out = a.AbortCheckpoint(1+uint64(r.IntN(K)), out[:0])
		} else {
			i := live[r.IntN(len(live))]
			ev := streams[i][0]
			streams[i] = streams[i][1:]
			ev.Input = i
			switch ev.Kind {
			case Data:
				delivered[i]++
				ev.Data = item{in: i, seq: delivered[i]}
			case Barrier:
				get(ev.Checkpoint).before[i] = delivered[i]
			case End:
				ended[i] = true
			}
			out = a.Step(ev, out[:0])
			if ev.Kind == Data && !timeout && (len(out) != 1 || out[0].Kind != Process || out[0].Data != ev.Data) {
				return 0, fmt.Errorf("data on input %d gave %v, want it processed at once", i, out)
			}
		}
		for _, act := range out {
			switch act.Kind {
			case Process:
				processed[act.Input]++
				if act.Data.seq != processed[act.Input] {
					return 0, fmt.Errorf("input %d: processed item %d, want %d", act.Input, act.Data.seq, processed[act.Input])
				}
				if act.InFlight {
					c := get(act.Checkpoint)
					if c.snapAt == nil || c.end != "" {
						return 0, fmt.Errorf("item marked in flight for checkpoint %d, which is not being persisted", act.Checkpoint)
					}
					c.inflight[act.Input]++
				}
			case Snapshot:
				if (!act.Unaligned && !timeout) || act.Checkpoint <= last {
					return 0, fmt.Errorf("%v after checkpoint %d", act, last)
				}
				last = act.Checkpoint
				c := get(act.Checkpoint)
				c.snapAt, c.unaligned = append([]int(nil), processed...), act.Unaligned
				if !act.Unaligned { // aligned: ends here
					c.end = "persisted"
				}
			case Persisted, Abort:
				c := get(act.Checkpoint)
				if act.Kind == Abort && c.snapAt == nil { // an alignment given up before its snapshot
					c.end = "abort"
					continue
				}
				if c.snapAt == nil || c.end != "" {
					return 0, fmt.Errorf("%v of a checkpoint not snapshotted or already ended", act)
				}
				c.end = act.Kind.String()
			}
		}
		if a.Buffered() != 0 && !timeout {
			return 0, fmt.Errorf("%d items buffered", a.Buffered())
		}
	}
	n := 0
	for id, c := range cks {
		if c.snapAt != nil && c.end == "" && id != last {
			return 0, fmt.Errorf("checkpoint %d snapshotted, never persisted nor aborted", id)
		}
		if c.end != "persisted" {
			continue
		}
		if c.unaligned {
			n++
		}
		for i := range k {
			want := c.before[i]
			if want < 0 {
				if !ended[i] {
					return 0, fmt.Errorf("checkpoint %d persisted without a barrier on input %d, which did not end", id, i)
				}
				want = delivered[i] // ended before its barrier: every item precedes it
			}
			if got := c.snapAt[i] + c.inflight[i]; got != want {
				return 0, fmt.Errorf("checkpoint %d, input %d: %d processed before the snapshot + %d in flight, want the %d before its barrier",
					id, i, c.snapAt[i], c.inflight[i], want)
			}
		}
	}
	if !external {
		// With every barrier delivered, nothing is left being persisted.
		if _, ok := a.Aligning(); ok && len(liveInputs(streams)) == 0 && allEnded(ended) {
			return 0, fmt.Errorf("a checkpoint is still persisted after every input ended")
		}
	}
	return n, nil
}

func allEnded(ended []bool) bool {
	for _, e := range ended {
		if !e {
			return false
		}
	}
	return true
}

// TestUnalignedExample: the first barrier snapshots at once; data of the
// other input before its barrier is in flight; a newer barrier gives an
// unfinished checkpoint up; a savepoint's barrier still aligns.
func TestUnalignedExample(t *testing.T) {
	a := NewUnaligned[string](2)
	var out []Action[string]
	step := func(ev Event[string]) string {
		out = a.Step(ev, out[:0])
		return fmt.Sprint(out)
	}
	for _, c := range []struct {
		ev   Event[string]
		want string
	}{
		{Event[string]{Kind: Data, Input: 0, Data: "a"}, "[process in=0]"},
		{Event[string]{Kind: Barrier, Input: 1, Checkpoint: 1}, "[snapshot id=1 unaligned]"},
		{Event[string]{Kind: Data, Input: 1, Data: "b"}, "[process in=1]"},
		{Event[string]{Kind: Data, Input: 0, Data: "c"}, "[process in=0 in-flight=1]"},
		{Event[string]{Kind: Barrier, Input: 0, Checkpoint: 1}, "[persisted id=1 unaligned]"},
		{Event[string]{Kind: Barrier, Input: 0, Checkpoint: 2}, "[snapshot id=2 unaligned]"},
		{Event[string]{Kind: Data, Input: 1, Data: "d"}, "[process in=1 in-flight=2]"},
		{Event[string]{Kind: Barrier, Input: 1, Checkpoint: 3}, "[abort id=2 unaligned snapshot id=3 unaligned]"},
		{Event[string]{Kind: Barrier, Input: 0, Checkpoint: 2}, "[]"},
		{Event[string]{Kind: End, Input: 0}, "[end-of-input in=0 persisted id=3 unaligned]"},
		{Event[string]{Kind: Barrier, Input: 1, Checkpoint: 4, Aligned: true}, "[snapshot id=4]"},
	} {
		if got := step(c.ev); got != c.want {
			t.Fatalf("%v on input %d: %s, want %s", c.ev.Kind, c.ev.Input, got, c.want)
		}
	}
}
