package snapshots

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/snapflow/snapflow/messages"
	"google.golang.org/protobuf/proto"
)

// Bounds of the reads of key-group sections (see StreamKeyGroups). A run
// is one read: adjacent sections of one object, merged across gaps of at
// most runGap bytes (the tag and length between two sections, or a few
// small sections not asked for) up to runBytes, unless one section alone
// is larger. At most streamWorkers runs are read at once, and runs are
// started only while the runs read but not yet handed to the caller hold
// at most streamBytes, except that one run is always let in.
const (
	runBytes      = 2 << 20
	runGap        = 16 << 10
	streamWorkers = 4
	streamBytes   = 8 << 20
)

// streamLimits are the bounds a Checkpoints reads sections with; tests
// shrink them.
type streamLimits struct {
	runBytes, runGap, workers, inFlight uint64
	// admitted, when set, is called with the bytes and the number of the
	// runs in flight each time a run is let in.
	admitted func(inFlight uint64, runs int)
}

var defaultStreamLimits = streamLimits{runBytes: runBytes, runGap: runGap, workers: streamWorkers, inFlight: streamBytes}

// run is one read of an object: the sections of secs, in offset order,
// lie in its bytes [off, end).
type run struct {
	key      string // the object
	inline   []byte // the object itself, when it travels inline
	off, end uint64
	secs     []*messages.KeyGroupSection
}

func (r *run) size() uint64 { return r.end - r.off }

// StreamKeyGroups reads the key groups in [start, end) that h indexes and
// calls fn with each of them, in no particular order. It is the restore
// path for a large state: the runs of adjacent sections are fetched from
// the store in parallel (at most 4 at once, and at most 8 MiB read but not
// yet handed to fn, except that one run larger than that is let in
// alone), verified against the index (CRC-32C, key group) and decoded in
// parallel, and fn is called from the calling goroutine only, so that it
// may fill maps without locks. Each run's bytes are released once decoded,
// so memory stays bounded by the runs in flight, not by the state.
//
// It stops at the first error: fn's, returned as it is; a done ctx, which
// it checks between calls of fn; or a read or verification failure,
// wrapping ErrNotFound or ErrCorrupt and naming the object. A key group
// that fn received before an error is not withdrawn. It returns the bytes
// it read (those of the runs, gaps included).
//
// A handle without an index is read whole (see ReadKeyGroups), and fn is
// called with its key groups in [start, end).
func (c *Checkpoints) StreamKeyGroups(ctx context.Context, h *messages.StateHandle, start, end int, fn func(*messages.KeyGroupState) error) (read int64, err error) {
	if !h.GetIndexed() {
		groups, read, err := c.ReadKeyGroups(ctx, h, start, end)
		if err != nil {
			return 0, err
		}
		for _, g := range groups {
			if err := ctx.Err(); err != nil {
				return read, fmt.Errorf("snapshots: state %s: %w", h.GetKey(), err)
			}
			if err := fn(g); err != nil {
				return read, err
			}
		}
		return read, nil
	}
	secs, err := c.indexRange(h, start, end)
	if err != nil {
		return 0, err
	}
	return c.streamSections(ctx, h, secs, fn)
}

// indexRange checks h's index and returns its sections of the key groups
// in [start, end).
func (c *Checkpoints) indexRange(h *messages.StateHandle, start, end int) ([]*messages.KeyGroupSection, error) {
	key := h.GetKey()
	if err := validateKey(key); err != nil {
		return nil, fmt.Errorf("snapshots: state handle: %w", err)
	}
	if err := checkHandleIndex(h); err != nil {
		return nil, fmt.Errorf("snapshots: state %s: %w: %w", key, ErrCorrupt, err)
	}
	idx := h.GetKeyGroups()
	lo, _ := slices.BinarySearchFunc(idx, start, func(s *messages.KeyGroupSection, kg int) int { return cmp.Compare(int(s.GetKeyGroup()), kg) })
	hi, _ := slices.BinarySearchFunc(idx, end, func(s *messages.KeyGroupSection, kg int) int { return cmp.Compare(int(s.GetKeyGroup()), kg) })
	if lo >= hi {
		return nil, nil
	}
	return idx[lo:hi], nil
}

// runsOf groups secs, sections of h's checked index, into runs: by
// object, in offset order, cut by the limits. A store that cannot read
// ranges gets one run per object.
func (c *Checkpoints) runsOf(h *messages.StateHandle, secs []*messages.KeyGroupSection) []*run {
	lim := c.limits()
	if _, ranged := c.given.(RangeReader); !ranged {
		lim.runBytes, lim.runGap = ^uint64(0), ^uint64(0)
	}
	sorted := slices.Clone(secs)
	slices.SortFunc(sorted, func(a, b *messages.KeyGroupSection) int {
		return cmp.Or(cmp.Compare(a.GetKey(), b.GetKey()), cmp.Compare(a.GetOffset(), b.GetOffset()))
	})
	var runs []*run
	var cur *run
	for _, s := range sorted {
		off, end := s.GetOffset(), s.GetOffset()+s.GetLength()
		if cur != nil && cur.key == objectKey(h, s) && off-cur.end <= lim.runGap && end-cur.off <= lim.runBytes {
			cur.end = end
			cur.secs = append(cur.secs, s)
			continue
		}
		cur = &run{key: objectKey(h, s), off: off, end: end, secs: []*messages.KeyGroupSection{s}}
		if s.GetKey() == "" && len(h.GetInline()) > 0 {
			cur.inline = h.GetInline()
		}
		runs = append(runs, cur)
	}
	return runs
}

// objectKey returns the key of the object section s of h lies in.
func objectKey(h *messages.StateHandle, s *messages.KeyGroupSection) string {
	if k := s.GetKey(); k != "" {
		return k
	}
	return h.GetKey()
}

func (c *Checkpoints) limits() streamLimits {
	if l := c.streamLimits.Load(); l != nil {
		return *l
	}
	return defaultStreamLimits
}

// runResult is a run read, verified and decoded, or why it could not be.
type runResult struct {
	r      *run
	groups []*messages.KeyGroupState
	err    error
}

// streamSections reads secs, sections of h's checked index, in runs, and
// calls fn with each key group from the calling goroutine (see
// StreamKeyGroups).
func (c *Checkpoints) streamSections(ctx context.Context, h *messages.StateHandle, secs []*messages.KeyGroupSection, fn func(*messages.KeyGroupState) error) (read int64, err error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("snapshots: state %s: %w", h.GetKey(), err)
	}
	runs := c.runsOf(h, secs)
	if len(runs) == 0 {
		return 0, nil
	}
	deliver := func(res runResult) error {
		if res.err != nil {
			return res.err
		}
		read += int64(res.r.size())
		for _, g := range res.groups {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("snapshots: state %s: %w", h.GetKey(), err)
			}
			if err := fn(g); err != nil {
				return err
			}
		}
		return nil
	}
	lim := c.limits()
	if len(runs) == 1 { // nothing to overlap
		if lim.admitted != nil {
			lim.admitted(runs[0].size(), 1)
		}
		return read, deliver(c.readRun(ctx, h, runs[0]))
	}

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	work := make(chan *run, len(runs)) // never full: the admission below bounds the reads
	results := make(chan runResult)
	defer wg.Wait()
	defer close(work)
	defer cancel()
	for range min(lim.workers, uint64(len(runs))) {
		wg.Go(func() {
			for r := range work {
				if ctx.Err() != nil {
					return
				}
				select {
				case results <- c.readRun(ctx, h, r):
				case <-ctx.Done():
					return
				}
			}
		})
	}
	next, pending, inFlight := 0, 0, uint64(0)
	admit := func() {
		for next < len(runs) && (pending == 0 || inFlight+runs[next].size() <= lim.inFlight) {
			inFlight += runs[next].size()
			pending++
			work <- runs[next]
			next++
			if lim.admitted != nil {
				lim.admitted(inFlight, pending)
			}
		}
	}
	admit()
	for pending > 0 {
		select {
		case <-ctx.Done():
			return read, fmt.Errorf("snapshots: state %s: %w", h.GetKey(), ctx.Err())
		case res := <-results:
			pending--
			if err := deliver(res); err != nil {
				return read, err
			}
			inFlight -= res.r.size()
			admit()
		}
	}
	return read, nil
}

// readRun reads run r of h, checks each of its sections against the index
// and decodes it. The run's bytes are not kept.
func (c *Checkpoints) readRun(ctx context.Context, h *messages.StateHandle, r *run) runResult {
	data, err := c.runBytes(ctx, h, r)
	if err != nil {
		return runResult{r: r, err: err}
	}
	groups := make([]*messages.KeyGroupState, 0, len(r.secs))
	for _, s := range r.secs {
		b := data[s.GetOffset()-r.off : s.GetOffset()-r.off+s.GetLength()]
		if got := Checksum(b); got != s.GetCrc32C() {
			return runResult{r: r, err: c.objectErr(h, r, fmt.Errorf("key group %d: crc32c %08x, want %08x: %w", s.GetKeyGroup(), got, s.GetCrc32C(), ErrCorrupt))}
		}
		g := new(messages.KeyGroupState)
		if err := proto.Unmarshal(b, g); err != nil {
			return runResult{r: r, err: c.objectErr(h, r, fmt.Errorf("key group %d: %w: %w", s.GetKeyGroup(), ErrCorrupt, err))}
		}
		if g.GetKeyGroup() != s.GetKeyGroup() {
			return runResult{r: r, err: c.objectErr(h, r, fmt.Errorf("the index says key group %d, the bytes hold %d: %w", s.GetKeyGroup(), g.GetKeyGroup(), ErrCorrupt))}
		}
		groups = append(groups, g)
	}
	return runResult{r: r, groups: groups}
}

// runBytes returns the bytes of run r: a slice of the inline object, or a
// read from the store.
func (c *Checkpoints) runBytes(ctx context.Context, h *messages.StateHandle, r *run) ([]byte, error) {
	if r.inline != nil {
		if err := checkInline(h); err != nil {
			return nil, c.objectErr(h, r, err)
		}
		return r.inline[r.off:r.end], nil
	}
	data, err := getRange(ctx, c.store, r.key, int64(r.off), int64(r.size()))
	if err != nil {
		return nil, c.objectErr(h, r, err)
	}
	if uint64(len(data)) != r.size() {
		return nil, c.objectErr(h, r, fmt.Errorf("bytes %d..%d: %d bytes came back: %w", r.off, r.end, len(data), ErrCorrupt))
	}
	return data, nil
}

// objectErr wraps err, a failure to read or verify run r of h, naming the
// object and, when it is not h's own, h.
func (c *Checkpoints) objectErr(h *messages.StateHandle, r *run, err error) error {
	if r.key == h.GetKey() {
		what := "state " + r.key
		if r.inline != nil {
			what += " (inline)"
		}
		return &objectError{key: r.key, err: fmt.Errorf("snapshots: %s: %w", what, err)}
	}
	first, last := r.secs[0].GetKeyGroup(), r.secs[len(r.secs)-1].GetKeyGroup()
	return &objectError{key: r.key, err: fmt.Errorf("snapshots: state %s: key groups %d..%d referenced in %s: %w", h.GetKey(), first, last, r.key, err)}
}

// objectError is a failure to read or verify an object, with its key: the
// key LoadLatest reports, which for an incremental state may be another
// checkpoint's object than the one its manifest names.
type objectError struct {
	key string
	err error
}

func (e *objectError) Error() string { return e.err.Error() }
func (e *objectError) Unwrap() error { return e.err }
