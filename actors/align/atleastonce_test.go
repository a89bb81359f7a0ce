package align

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAtLeastOnceNeverBlocks: an at-least-once Aligner processes every
// data item at once, in the order delivered, and buffers nothing; it
// snapshots checkpoint n only once barrier n has arrived on every input
// not ended, in increasing order, and ends each checkpoint it counted
// with exactly one Snapshot or Abort; with every barrier delivered and
// no external abort, the newest checkpoint is snapshotted.
func TestAtLeastOnceNeverBlocks(t *testing.T) {
	snaps := 0
	for seed := uint64(1); seed <= 3000; seed++ {
		n, err := runAtLeastOnce(seed)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		snaps += n
	}
	if snaps == 0 {
		t.Fatal("no snapshot in any run")
	}
}

func runAtLeastOnce(seed uint64) (int, error) {
	r := rand.New(rand.NewPCG(seed, 0xa1))
	k := 1 + r.IntN(5)
	K := 1 + r.IntN(8)
	complete := r.IntN(2) == 0 // every barrier delivered, every input ended, no abort
	var streams [][]Event[item]
	if complete {
		streams = make([][]Event[item], k)
		for i := range streams {
			for n := 1; n <= K; n++ {
				for range r.IntN(4) {
					streams[i] = append(streams[i], Event[item]{Kind: Data})
				}
				streams[i] = append(streams[i], Event[item]{Kind: Barrier, Checkpoint: uint64(n)})
			}
			streams[i] = append(streams[i], Event[item]{Kind: End})
		}
	} else {
		streams = genStreams(r, k, K, r.IntN(5) != 0)
	}
	a := NewAtLeastOnce[item](k)
	arrived := map[uint64][]bool{}
	ended := make([]bool, k)
	ends := map[uint64]ActionKind{}
	var snapshots []uint64
	var out []Action[item]
	next := item{}
	for {
		live := liveInputs(streams)
		if len(live) == 0 {
			break
		}
		if !complete && r.IntN(100) < 3 {
			out = a.AbortCheckpoint(1+uint64(r.IntN(K)), out[:0])
		} else {
			i := live[r.IntN(len(live))]
			ev := streams[i][0]
			streams[i] = streams[i][1:]
			ev.Input = i
			switch ev.Kind {
			case Data:
				next.seq++
				ev.Data = item{in: i, seq: next.seq}
			case Barrier:
				if arrived[ev.Checkpoint] == nil {
					arrived[ev.Checkpoint] = make([]bool, k)
				}
				arrived[ev.Checkpoint][i] = true
			case End:
				ended[i] = true
			}
			out = a.Step(ev, out[:0])
			if ev.Kind == Data && (len(out) != 1 || out[0].Kind != Process || out[0].Data != ev.Data) {
				return 0, fmt.Errorf("data on input %d gave %v, want it processed at once", i, out)
			}
		}
		if a.Buffered() != 0 {
			return 0, fmt.Errorf("%d items buffered", a.Buffered())
		}
		for _, act := range out {
			switch act.Kind {
			case Snapshot, Abort:
				if prev, ok := ends[act.Checkpoint]; ok {
					return 0, fmt.Errorf("checkpoint %d ended twice: %v then %v", act.Checkpoint, prev, act.Kind)
				}
				ends[act.Checkpoint] = act.Kind
			}
			if act.Kind != Snapshot {
				continue
			}
			for i := range k {
				if !arrived[act.Checkpoint][i] && !ended[i] {
					return 0, fmt.Errorf("snapshot %d before its barrier arrived on open input %d", act.Checkpoint, i)
				}
			}
			if len(snapshots) > 0 && act.Checkpoint <= snapshots[len(snapshots)-1] {
				return 0, fmt.Errorf("snapshot %d after %v", act.Checkpoint, snapshots)
			}
			snapshots = append(snapshots, act.Checkpoint)
		}
	}
	if len(a.pending) != 0 && !slices.Contains(ended, false) {
		return 0, fmt.Errorf("every input ended with checkpoints %v still counted", a.pending)
	}
	if complete && (len(snapshots) == 0 || snapshots[len(snapshots)-1] != uint64(K)) {
		return 0, fmt.Errorf("every barrier delivered: snapshots %v, want the last one %d", snapshots, K)
	}
	return len(snapshots), nil
}

// TestAtLeastOnceExample: data after a barrier is processed before the
// other input's barrier arrives; a second checkpoint is counted meanwhile;
// a savepoint's barrier aligns.
func TestAtLeastOnceExample(t *testing.T) {
	a := NewAtLeastOnce[string](2)
	var out []Action[string]
	step := func(ev Event[string]) string {
		out = a.Step(ev, out[:0])
		s := ""
		for _, act := range out {
			s += fmt.Sprintf("%v%d%s ", act.Kind, act.Checkpoint, act.Data)
		}
		return s
	}
	for _, c := range []struct {
		ev   Event[string]
		want string
	}{
		{Event[string]{Kind: Barrier, Input: 0, Checkpoint: 1}, ""},
		{Event[string]{Kind: Data, Input: 0, Data: "a"}, "process0a "},
		{Event[string]{Kind: Barrier, Input: 0, Checkpoint: 2}, ""},
		{Event[string]{Kind: Barrier, Input: 1, Checkpoint: 1}, "snapshot1 "},
		{Event[string]{Kind: Barrier, Input: 1, Checkpoint: 2}, "snapshot2 "},
		{Event[string]{Kind: Barrier, Input: 0, Checkpoint: 3, Aligned: true}, ""},
		{Event[string]{Kind: Data, Input: 0, Data: "b"}, ""}, // held: the savepoint aligns
		{Event[string]{Kind: Data, Input: 1, Data: "c"}, "process0c "},
		{Event[string]{Kind: Barrier, Input: 1, Checkpoint: 3, Aligned: true}, "snapshot3 process0b "},
	} {
		if got := step(c.ev); got != c.want {
			t.Fatalf("after %v %d on input %d: %q, want %q", c.ev.Kind, c.ev.Checkpoint, c.ev.Input, got, c.want)
		}
	}
}
