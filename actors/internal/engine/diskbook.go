package engine

import (
	"cmp"
	"maps"
	"slices"

	"github.com/snapflow/snapflow/internal/diskstate"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/snapshots/incremental"
)

// diskBook is a task's record of where the files of its on-disk state
// database are stored, so that an incremental checkpoint references the
// files its base already holds instead of storing them again. It is pure
// bookkeeping, used on the task's goroutine.
//
// File names are unique within one database only: what the book records
// for one database is never used for another (a restarted task opens a
// new one). A file is referenced only where the base's own handle lists
// it: retention keeps the base's objects while a checkpoint that builds
// on it can complete. And like the key groups of the heap backend (see
// snapshots/incremental), a file whose object is every or more
// checkpoints old is stored again, at most ceil(n/every) of the n
// referenced per checkpoint, oldest first, so that an old checkpoint
// stops sharing objects with the newest and retention can delete it.
type diskBook struct {
	job   string
	every int
	db    uint64
	// uploads holds the files of the newest uploads, by checkpoint id.
	uploads map[uint64][]*messages.StateFile
}

// diskBookKeeps bounds the uploads a diskBook remembers.
const diskBookKeeps = 8

// newDiskBook returns the book of a task of job whose files are stored
// again after every checkpoints (incremental.DefaultRewriteEvery when
// every < 1).
func newDiskBook(job string, every int) *diskBook {
	if every < 1 {
		every = incremental.DefaultRewriteEvery
	}
	return &diskBook{job: job, every: every, uploads: map[uint64][]*messages.StateFile{}}
}

// reuse returns the stored files to reference, by name, for a checkpoint
// of database db, whose files are names, that builds on checkpoint base
// (0: none); the others are to be stored. sizes, when not nil, gives each
// file's size: a stored file of another size is not reused.
func (b *diskBook) reuse(db, id, base uint64, names []string, sizes map[string]int64) map[string]*messages.StateFile {
	return b.plan(db, id, base).reuse(names, sizes)
}

// reusePlan is what a diskBook knew of a checkpoint's base when the
// checkpoint began: its reuse, which needs the checkpoint's files, may
// be worked out later, on another goroutine.
type reusePlan struct {
	job   string
	every int
	id    uint64
	prev  []*messages.StateFile // the base's files; nil: reuse none
}

// plan is reuse's knowledge of the book, taken now for checkpoint id of
// database db that builds on base.
func (b *diskBook) plan(db, id, base uint64) reusePlan {
	if b == nil || db != b.db || base == 0 {
		return reusePlan{}
	}
	return reusePlan{job: b.job, every: b.every, id: id, prev: b.uploads[base]}
}

// reuse is diskBook.reuse for the plan's checkpoint.
func (p reusePlan) reuse(names []string, sizes map[string]int64) map[string]*messages.StateFile {
	if len(p.prev) == 0 {
		return nil
	}
	byName := make(map[string]*messages.StateFile, len(p.prev))
	for _, f := range p.prev {
		byName[f.GetName()] = f
	}
	type cand struct {
		f      *messages.StateFile
		stored uint64
	}
	var cands []cand
	for _, name := range names {
		f := byName[name]
		if f == nil || !diskstate.IsTable(name) {
			continue
		}
		if sz, ok := sizes[name]; sizes != nil && (!ok || uint64(sz) != f.GetSize()) {
			continue
		}
		stored, ok := snapshots.StateFileCheckpoint(p.job, f.GetKey())
		if !ok {
			continue
		}
		cands = append(cands, cand{f, stored})
	}
	slices.SortFunc(cands, func(x, y cand) int {
		return cmp.Or(cmp.Compare(x.stored, y.stored), cmp.Compare(x.f.GetName(), y.f.GetName()))
	})
	rewrite := (len(cands) + p.every - 1) / p.every
	out := make(map[string]*messages.StateFile, len(cands))
	for _, c := range cands {
		if rewrite > 0 && p.id >= c.stored+uint64(p.every) {
			rewrite--
			continue // stored again
		}
		out[c.f.GetName()] = c.f
	}
	return out
}

// uploaded records the files of database db stored for checkpoint id.
func (b *diskBook) uploaded(db, id uint64, files []*messages.StateFile) {
	if b == nil {
		return
	}
	if db != b.db {
		b.db = db
		clear(b.uploads)
	}
	b.uploads[id] = files
	for len(b.uploads) > diskBookKeeps {
		delete(b.uploads, slices.Min(slices.Collect(maps.Keys(b.uploads))))
	}
}
