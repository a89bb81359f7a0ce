package engine

import (
	"fmt"
	"slices"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// stored returns the entries of names as checkpoint id stores them.
func stored(id uint64, names ...string) []*messages.StateFile {
	var out []*messages.StateFile
	for _, n := range names {
		out = append(out, &messages.StateFile{Name: n, Key: snapshots.StateFileKey("job", id, 1, "t#0", n), Size: 10})
	}
	return out
}

func reusedNames(m map[string]*messages.StateFile) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// TestDiskBookReuse: a checkpoint references the tables its base stored,
// of the same database and size only; never a manifest or other mutable
// file; nothing without a base or with a base it does not know.
func TestDiskBookReuse(t *testing.T) {
	b := newDiskBook("job", 100)
	b.uploaded(7, 1, stored(1, "000004.sst", "000005.sst", "MANIFEST-000001"))
	names := []string{"000004.sst", "000005.sst", "000009.sst", "MANIFEST-000001"}
	for _, c := range []struct {
		name     string
		db, base uint64
		sizes    map[string]int64
		want     []string
	}{
		{"the same database", 7, 1, nil, []string{"000004.sst", "000005.sst"}},
		{"sizes that match", 7, 1, map[string]int64{"000004.sst": 10, "000005.sst": 10}, []string{"000004.sst", "000005.sst"}},
		{"a size that differs", 7, 1, map[string]int64{"000004.sst": 10, "000005.sst": 11}, []string{"000004.sst"}},
		{"another database", 8, 1, nil, nil},
		{"no base", 7, 0, nil, nil},
		{"an unknown base", 7, 2, nil, nil},
	} {
		if got := reusedNames(b.reuse(c.db, 2, c.base, names, c.sizes)); !slices.Equal(got, c.want) {
			t.Errorf("%s: reused %q, want %q", c.name, got, c.want)
		}
	}
	// Another database's upload replaces what the book knew.
	b.uploaded(8, 2, stored(2, "000004.sst"))
	if got := b.reuse(7, 3, 1, names, nil); got != nil {
		t.Errorf("after another database's upload, the first's files are reused: %q", reusedNames(got))
	}
}

// TestDiskBookRewritesOld: a file stored every or more checkpoints ago is
// stored again, at most ceil(n/every) per checkpoint, oldest first, so
// that no object stays referenced for much longer than every checkpoints.
func TestDiskBookRewritesOld(t *testing.T) {
	const every = 4
	b := newDiskBook("job", every)
	var files []string
	for i := range 8 {
		files = append(files, fmt.Sprintf("%06d.sst", i))
	}
	b.uploaded(1, 1, stored(1, files...))
	maxAge := uint64(0)
	for id := uint64(2); id <= 40; id++ {
		reuse := b.reuse(1, id, id-1, files, nil)
		var now []*messages.StateFile
		rewritten := 0
		for _, n := range files {
			if f := reuse[n]; f != nil {
				now = append(now, f)
				from, _ := snapshots.StateFileCheckpoint("job", f.GetKey())
				maxAge = max(maxAge, id-from)
			} else {
				now = append(now, stored(id, n)...)
				rewritten++
			}
		}
		if rewritten > (len(files)+every-1)/every {
			t.Fatalf("checkpoint %d stores %d files again, want at most %d", id, rewritten, (len(files)+every-1)/every)
		}
		b.uploaded(1, id, now)
	}
	// 8 files, 2 a checkpoint: each is stored again within every+3.
	if maxAge >= 2*every {
		t.Errorf("a checkpoint references an object %d checkpoints old, want under %d", maxAge, 2*every)
	}
	if len(b.uploads) > diskBookKeeps {
		t.Errorf("the book remembers %d uploads, want at most %d", len(b.uploads), diskBookKeeps)
	}
}
