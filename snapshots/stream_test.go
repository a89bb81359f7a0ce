package snapshots_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"google.golang.org/protobuf/proto"
)

// rangeCounter is a memory store that counts the ranged reads under way.
type rangeCounter struct {
	*snapshots.Mem
	mu         sync.Mutex
	now, most  int
	rangeReads int
	lengths    []int64
}

func (r *rangeCounter) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	r.mu.Lock()
	r.now++
	r.rangeReads++
	r.most = max(r.most, r.now)
	r.lengths = append(r.lengths, length)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.now--
		r.mu.Unlock()
	}()
	return r.Mem.GetRange(ctx, key, offset, length)
}

// randomGroup is key group kg of about size bytes.
func randomGroup(rnd *rand.Rand, kg uint32, size int) *messages.KeyGroupState {
	v := make([]byte, size)
	for i := range v {
		v[i] = byte(rnd.Uint32())
	}
	return &messages.KeyGroupState{KeyGroup: kg, States: []*messages.NamedState{{Name: "s", Entries: []*messages.StateEntry{{Key: []byte{byte(kg)}, Value: v}}}}}
}

// TestStreamKeyGroupsBounded reads random ranges of states spread over
// three objects with small limits, and checks what it reads against the
// logical state, and the bounds: the reads under way, and the bytes read
// but not yet handed over (one run over the bound only when alone).
func TestStreamKeyGroupsBounded(t *testing.T) {
	const (
		groups   = 120
		runBytes = 8 << 10
		inFlight = 20 << 10
		workers  = 3
		huge     = 40 // a key group larger than inFlight
	)
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ctx := t.Context()
			rnd := rand.New(rand.NewPCG(seed, 7))
			store := &rangeCounter{Mem: snapshots.NewMem()}
			c := snapshots.NewCheckpoints(store, "job", nil)
			var mu sync.Mutex
			var over []string
			snapshots.SetStreamLimits(c, runBytes, 64, workers, inFlight, func(n uint64, runs int) {
				mu.Lock()
				defer mu.Unlock()
				if n > inFlight && runs > 1 {
					over = append(over, fmt.Sprintf("%d bytes in %d runs", n, runs))
				}
			})
			logical := map[uint32]*messages.KeyGroupState{}
			var h *messages.StateHandle
			for id := uint64(1); id <= 3; id++ {
				st := &messages.TaskState{TaskId: "t#0", CheckpointId: id}
				var refs []*messages.KeyGroupSection
				prev, _ := snapshots.Sections(h)
				for kg := range uint32(groups) {
					if id == 1 || rnd.IntN(3) == 0 {
						size := 50 + rnd.IntN(3000)
						if kg == huge {
							size = 2 * inFlight
						}
						g := randomGroup(rnd, kg, size)
						logical[kg] = g
						st.KeyGroups = append(st.KeyGroups, g)
						continue
					}
					refs = append(refs, prev[kg])
				}
				var err error
				if h, err = c.PutTaskStateRefs(ctx, id, st, refs); err != nil {
					t.Fatal(err)
				}
			}
			objects := map[string]bool{}
			for _, s := range mustSections(t, h) {
				objects[s.GetKey()] = true
			}
			if len(objects) != 3 {
				t.Fatalf("the state lies in %d objects, want 3", len(objects))
			}
			for range 20 {
				a, b := rnd.IntN(groups+1), rnd.IntN(groups+1)
				start, end := min(a, b), max(a, b)
				got := map[uint32]*messages.KeyGroupState{} // no lock: fn runs on this goroutine only
				if _, err := c.StreamKeyGroups(ctx, h, start, end, func(g *messages.KeyGroupState) error {
					got[g.GetKeyGroup()] = g
					return nil
				}); err != nil {
					t.Fatalf("[%d,%d): %v", start, end, err)
				}
				if len(got) != end-start {
					t.Fatalf("[%d,%d): %d key groups", start, end, len(got))
				}
				for kg, g := range got {
					if !proto.Equal(g, logical[kg]) {
						t.Fatalf("[%d,%d): key group %d differs", start, end, kg)
					}
				}
			}
			if store.most > workers {
				t.Errorf("%d ranged reads at once, want at most %d", store.most, workers)
			}
			hugeLen := int64(mustSections(t, h)[huge].GetLength())
			for _, n := range store.lengths {
				if n > runBytes && n != hugeLen {
					t.Errorf("a read of %d bytes: runs are of at most %d bytes, or one larger key group (%d)", n, runBytes, hugeLen)
				}
			}
			if len(over) > 0 {
				t.Errorf("more than %d bytes in flight in more than one run: %q", inFlight, over)
			}
		})
	}
}

func mustSections(t *testing.T, h *messages.StateHandle) []*messages.KeyGroupSection {
	t.Helper()
	secs, ok := snapshots.Sections(h)
	if !ok {
		t.Fatal("Sections: not ok")
	}
	return secs
}

// getCounter is a store without ranged reads that counts its Gets.
type getCounter struct {
	snapshots.Store
	gets atomic.Int64
}

func (g *getCounter) Get(ctx context.Context, key string) ([]byte, error) {
	g.gets.Add(1)
	return g.Store.Get(ctx, key)
}

// TestStreamKeyGroupsWholeObjects checks that a store that cannot read
// ranges is read one whole object at a time, each object once.
func TestStreamKeyGroupsWholeObjects(t *testing.T) {
	ctx := t.Context()
	store := &getCounter{Store: snapshots.NewMem()}
	c := snapshots.NewCheckpoints(store, "job", nil)
	snapshots.SetStreamLimits(c, 64, 0, 2, 128, nil) // tiny runs, if the store could read them
	rnd := rand.New(rand.NewPCG(3, 3))
	st := &messages.TaskState{TaskId: "t#0", CheckpointId: 1}
	for kg := range uint32(40) {
		st.KeyGroups = append(st.KeyGroups, randomGroup(rnd, kg, 100))
	}
	h1, err := c.PutTaskState(ctx, 1, st)
	if err != nil {
		t.Fatal(err)
	}
	refs := mustSections(t, h1)[:20]
	h2, err := c.PutTaskStateRefs(ctx, 2, &messages.TaskState{TaskId: "t#0", CheckpointId: 2, KeyGroups: st.KeyGroups[20:]}, refs)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint32
	if _, err := c.StreamKeyGroups(ctx, h2, 0, 40, func(g *messages.KeyGroupState) error {
		got = append(got, g.GetKeyGroup())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if len(got) != 40 || got[0] != 0 || got[39] != 39 {
		t.Errorf("key groups %v, want 0..39", got)
	}
	if n := store.gets.Load(); n != 2 {
		t.Errorf("%d reads of 2 objects from a store without ranged reads, want 2", n)
	}
}

// TestReadTaskStateHeadReadsLittle checks that the head of an indexed
// state is read without the bytes of its key groups.
func TestReadTaskStateHeadReadsLittle(t *testing.T) {
	ctx := t.Context()
	store := &rangeCounter{Mem: snapshots.NewMem()}
	c := snapshots.NewCheckpoints(store, "job", nil)
	rnd := rand.New(rand.NewPCG(9, 9))
	st := &messages.TaskState{TaskId: "t#0", CheckpointId: 1, OperatorState: []byte("op"), Ended: true}
	for kg := range uint32(40) {
		st.KeyGroups = append(st.KeyGroups, randomGroup(rnd, kg, 3000))
	}
	h, err := c.PutTaskState(ctx, 1, st)
	if err != nil {
		t.Fatal(err)
	}
	head, err := c.ReadTaskStateHead(ctx, h)
	if err != nil || head.GetTaskId() != "t#0" || string(head.GetOperatorState()) != "op" || !head.GetEnded() || len(head.GetKeyGroups()) != 0 {
		t.Fatalf("ReadTaskStateHead = %v, %v", head, err)
	}
	var sections, read int64
	for _, s := range h.GetKeyGroups() {
		sections += int64(s.GetLength())
	}
	for _, n := range store.lengths {
		read += n
	}
	if len(store.lengths) != 2 || read > int64(h.GetSize())-sections {
		t.Errorf("ReadTaskStateHead read %d bytes in %d reads; the object has %d bytes, %d of them in key groups", read, len(store.lengths), h.GetSize(), sections)
	}
}
