package snapshots_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/snapflow/snapflow/internal/miniotest"
	"github.com/snapflow/snapflow/snapshots"
)

// raceCreates makes each of the stores (views of one namespace, as two
// processes would open it) race to create each of a run of keys, and
// checks that exactly one Create wins each key.
func raceCreates(t *testing.T, stores []snapshots.Store) {
	t.Helper()
	const keys, perStore = 6, 3
	var mu sync.Mutex
	wins := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for si, s := range stores {
		c := s.(snapshots.Creator)
		for n := range perStore {
			wg.Go(func() {
				<-start
				for k := range keys {
					err := c.Create(t.Context(), fmt.Sprintf("job/leases/%05d", k), fmt.Appendf(nil, "store %d claimant %d", si, n))
					switch {
					case err == nil:
						mu.Lock()
						wins[k]++
						mu.Unlock()
					case !errors.Is(err, snapshots.ErrExists):
						t.Errorf("Create through store %d: %v", si, err)
					}
				}
			})
		}
	}
	close(start)
	wg.Wait()
	for k := range keys {
		if wins[k] != 1 {
			t.Errorf("key %d: %d Creates succeeded, want exactly 1", k, wins[k])
		}
	}
}

func TestDirCreateAcrossStores(t *testing.T) {
	root := t.TempDir()
	var stores []snapshots.Store
	for range 3 {
		d, err := snapshots.NewDir(root)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, d)
	}
	raceCreates(t, stores)
}

func TestMinIOCreateAcrossClients(t *testing.T) {
	t.Parallel()
	srv := miniotest.Start(t)
	stores := []snapshots.Store{srv.Store(t, "create", "race"), srv.Store(t, "create", "race"), srv.Store(t, "create", "race")}
	raceCreates(t, stores)
}
