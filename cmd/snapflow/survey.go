package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// survey is what the store holds of a job's checkpoints: each one as
// snapshots.Checkpoints.List describes it, its keys, the manifests that
// read, and which checkpoints reference which objects. An incremental
// checkpoint references the objects of earlier ones, so the directory of a
// deleted checkpoint keeps, without a manifest, the objects that retained
// checkpoints still reference.
type survey struct {
	infos     []snapshots.Info
	keys      map[uint64][]string           // by checkpoint id: its keys in the store
	manifests map[uint64]*messages.Manifest // complete checkpoints whose manifest reads
	refBy     map[string][]uint64           // object key: the complete checkpoints whose manifests reference it, ascending
}

// surveyCheckpoints lists the checkpoints of c's job and reads the
// manifests of the complete ones. A manifest that is corrupt, or deleted
// since the listing, references nothing.
func surveyCheckpoints(ctx context.Context, c *snapshots.Checkpoints) (*survey, error) {
	infos, err := c.List(ctx)
	if err != nil {
		return nil, err
	}
	keys, err := c.Store().List(ctx, snapshots.CheckpointsPrefix(c.Job()))
	if err != nil {
		return nil, err
	}
	s := &survey{infos: infos, keys: map[uint64][]string{}, manifests: map[uint64]*messages.Manifest{}, refBy: map[string][]uint64{}}
	for _, k := range keys {
		if id, ok := checkpointOfKey(c.Job(), k); ok {
			s.keys[id] = append(s.keys[id], k)
		}
	}
	for _, info := range infos {
		if !info.Complete || info.Err != nil {
			continue
		}
		m, err := c.ReadManifest(ctx, info.ID)
		switch {
		case err != nil && objectProblem(ctx, err):
			continue // deleted or overwritten since the listing
		case err != nil:
			return nil, err
		}
		s.manifests[info.ID] = m
		for _, k := range referencedObjects(m) {
			s.refBy[k] = append(s.refBy[k], info.ID)
		}
	}
	return s, nil
}

// referencedObjects returns the keys of the objects that manifest m needs,
// sorted: the tasks' own state objects (not inline states, which have
// none) and the objects that incremental states reference sections of.
func referencedObjects(m *messages.Manifest) []string {
	var keys []string
	for _, t := range m.GetTasks() {
		h := t.GetState()
		if len(h.GetInline()) == 0 {
			keys = append(keys, h.GetKey())
		}
		for _, s := range h.GetKeyGroups() {
			if s.GetKey() != "" {
				keys = append(keys, s.GetKey())
			}
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// checkpointOfKey returns the id of the checkpoint of job whose directory
// holds key.
func checkpointOfKey(job, key string) (uint64, bool) {
	rest, ok := strings.CutPrefix(key, snapshots.CheckpointsPrefix(job))
	if !ok {
		return 0, false
	}
	dir, _, _ := strings.Cut(rest, "/")
	digits, ok := strings.CutPrefix(dir, "chk-")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || !strings.HasPrefix(key, snapshots.CheckpointPrefix(job, id)) {
		return 0, false
	}
	return id, true
}

// referencedBy returns the complete checkpoints other than id whose
// manifests reference any of keys, ascending, and how many of keys they
// reference.
func (s *survey) referencedBy(id uint64, keys []string) (ids []uint64, n int) {
	for _, k := range keys {
		found := false
		for _, by := range s.refBy[k] {
			if by != id {
				ids, found = append(ids, by), true
			}
		}
		if found {
			n++
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), n
}

// sizes sums what a manifest's states hold and what storing them took.
type sizes struct {
	state      uint64 // the whole states: snapshots.StateSize
	stored     uint64 // the bytes written for them: snapshots.UploadedSize, and inline states' bytes
	objects    int    // states stored as objects of their own
	inline     int    // states inline in the manifest
	inlined    uint64 // their bytes, which the manifest holds
	refGroups  int    // key groups referenced in earlier checkpoints' objects
	refBytes   uint64 // their bytes
	refCheckps []uint64
}

// sizesOf sums the states of the tasks of a manifest of job.
func sizesOf(job string, tasks []*messages.TaskStateEntry) sizes {
	var z sizes
	for _, t := range tasks {
		h := t.GetState()
		z.state += snapshots.StateSize(h)
		z.stored += snapshots.UploadedSize(h)
		if n := uint64(len(h.GetInline())); n > 0 {
			z.inline++
			z.inlined += n
			z.stored += n
		} else {
			z.objects++
		}
		groups, bytes, ids := handleRefs(job, h)
		z.refGroups += groups
		z.refBytes += bytes
		z.refCheckps = append(z.refCheckps, ids...)
	}
	slices.Sort(z.refCheckps)
	z.refCheckps = slices.Compact(z.refCheckps)
	return z
}

// handleRefs counts the key groups that h references in other objects and
// their bytes, and returns the checkpoints of job those objects belong to,
// ascending.
func handleRefs(job string, h *messages.StateHandle) (groups int, bytes uint64, ids []uint64) {
	for _, s := range h.GetKeyGroups() {
		if s.GetKey() == "" {
			continue
		}
		groups++
		bytes += s.GetLength()
		if id, ok := checkpointOfKey(job, s.GetKey()); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return groups, bytes, slices.Compact(ids)
}

// storedOf formats what storing h took: its object's bytes, or "inline".
func storedOf(h *messages.StateHandle) string {
	if len(h.GetInline()) > 0 {
		return "inline"
	}
	return strconv.FormatUint(snapshots.UploadedSize(h), 10)
}

// idList formats checkpoint ids as "checkpoint 4" or "checkpoints 4, 5".
func idList(ids []uint64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(id, 10)
	}
	word := "checkpoint"
	if len(ids) > 1 {
		word = "checkpoints"
	}
	return word + " " + strings.Join(s, ", ")
}

// plural formats n and the noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// referencing formats "checkpoint 4 references" or "checkpoints 4, 5
// reference".
func referencing(ids []uint64) string {
	if len(ids) == 1 {
		return idList(ids) + " references"
	}
	return idList(ids) + " reference"
}

// incompleteErr is the error for checkpoint id of c's job, which has no
// manifest: aborted or in flight, or deleted while newer incremental
// checkpoints still reference its objects.
func incompleteErr(ctx context.Context, c *snapshots.Checkpoints, id uint64) error {
	s, err := surveyCheckpoints(ctx, c)
	if err != nil {
		return err
	}
	keys := s.keys[id]
	if by, n := s.referencedBy(id, keys); n > 0 && n == len(keys) {
		return fmt.Errorf("checkpoint %d of job %s was deleted: it has no manifest, and keeps only objects that %s "+
			"(incremental checkpoints share the key groups that did not change)", id, c.Job(), referencing(by))
	}
	return incomplete(c, id)
}
