package align

import (
	"flag"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

var (
	seedFlag  = flag.Uint64("seed", 0, "run TestRandomInterleavings with this seed only (or env ALIGN_SEED)")
	seedsFlag = flag.Int("seeds", 5000, "number of seeds TestRandomInterleavings runs")
)

// TestRandomInterleavings generates per-input FIFO streams of data and
// barriers 1..K (some inputs skip a checkpoint, as after an upstream abort;
// some end early), interleaves them at random with occasional external
// aborts, and checks the invariants on every action. Replay a failure with
// -seed=N or ALIGN_SEED=N.
func TestRandomInterleavings(t *testing.T) {
	first, n := uint64(1), *seedsFlag
	if s := os.Getenv("ALIGN_SEED"); s != "" && *seedFlag == 0 {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ALIGN_SEED: %v", err)
		}
		*seedFlag = v
	}
	if *seedFlag != 0 {
		first, n = *seedFlag, 1
	}
	if testing.Short() {
		n = min(n, 200)
	}
	t.Logf("seeds %d..%d", first, first+uint64(n)-1)
	var total stats
	for seed := first; seed < first+uint64(n); seed++ {
		c, st, err := runRandom(seed)
		if err != nil {
			t.Fatalf("seed %d (replay: go test ./actors/align -run TestRandomInterleavings -seed=%d): %v\n%s", seed, seed, err, c)
		}
		total.add(st)
	}
	t.Logf("%+v", total)
	if total.snapshots == 0 || total.aborts == 0 || total.released == 0 {
		t.Fatalf("generator too tame: %+v", total)
	}
}

type stats struct{ events, snapshots, aborts, released, maxBuffered int }

func (s *stats) add(o stats) {
	s.events += o.events
	s.snapshots += o.snapshots
	s.aborts += o.aborts
	s.released += o.released
	s.maxBuffered = max(s.maxBuffered, o.maxBuffered)
}

func runRandom(seed uint64) (*checker, stats, error) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	k := 1 + r.IntN(5)
	streams := genStreams(r, k, 1+r.IntN(8), r.IntN(5) != 0)
	c := newChecker(k)
	var st stats
	abortRate := 0
	if r.IntN(2) == 0 {
		abortRate = 1 + r.IntN(5) // percent
	}
	sticky := r.IntN(10) // chance in 10 to stay on the same input
	cur := 0
	for {
		live := liveInputs(streams)
		if len(live) == 0 {
			break
		}
		if len(streams[cur]) == 0 || r.IntN(10) >= sticky {
			cur = live[r.IntN(len(live))]
		}
		var err error
		if r.IntN(100) < abortRate {
			err = c.abort(1 + uint64(r.IntN(8)))
		} else {
			ev := streams[cur][0]
			streams[cur] = streams[cur][1:]
			buffered := c.a.Buffered()
			switch ev.Kind {
			case Data:
				err = c.data(cur)
			case Barrier:
				err = c.barrier(cur, ev.Checkpoint)
			case End:
				err = c.end(cur)
			}
			st.events++
			if c.a.Buffered() < buffered {
				st.released++
			}
		}
		if err != nil {
			return c, st, err
		}
		st.maxBuffered = max(st.maxBuffered, c.a.Buffered())
	}
	for _, kind := range c.finished {
		if kind == Snapshot {
			st.snapshots++
		} else {
			st.aborts++
		}
	}
	return c, st, c.finish()
}

// liveInputs lists the inputs whose streams have items left.
func liveInputs(streams [][]Event[item]) []int {
	var live []int
	for i, s := range streams {
		if len(s) > 0 {
			live = append(live, i)
		}
	}
	return live
}

// genStreams returns, per input, data items then barriers 1..K in order
// (each skipped with probability 1/10) and maybe an end, which may come early.
// Only Kind and Checkpoint matter: the checker numbers the data.
func genStreams(r *rand.Rand, k, K int, allEnd bool) [][]Event[item] {
	streams := make([][]Event[item], k)
	for i := range streams {
		var s []Event[item]
		endAfter := K
		if r.IntN(5) == 0 {
			endAfter = r.IntN(K + 1)
		}
		for n := 1; n <= endAfter; n++ {
			for range r.IntN(4) {
				s = append(s, Event[item]{Kind: Data})
			}
			if r.IntN(10) != 0 {
				s = append(s, Event[item]{Kind: Barrier, Checkpoint: uint64(n)})
			}
		}
		for range r.IntN(3) {
			s = append(s, Event[item]{Kind: Data})
		}
		if allEnd || endAfter < K || r.IntN(2) == 0 {
			s = append(s, Event[item]{Kind: End})
		}
		streams[i] = s
	}
	return streams
}
