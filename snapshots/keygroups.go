package snapshots

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/snapflow/snapflow/messages"
	"google.golang.org/protobuf/encoding/protowire"
)

// RangeReader is implemented by stores that can read part of an object.
// Checkpoints uses it, when the store has it, to read only the key groups a
// task restored at another parallelism needs (see ReadKeyGroups); other
// stores serve those reads with Get.
type RangeReader interface {
	// GetRange returns the length bytes of the object under key that start
	// at offset. It returns an error wrapping ErrNotFound when there is no
	// object, and one wrapping ErrCorrupt when the object is shorter than
	// offset+length.
	GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error)
}

// Field numbers of messages.TaskState.key_groups and
// messages.KeyGroupState.key_group.
const (
	fieldTaskKeyGroups = 8
	fieldKeyGroup      = 1
)

// indexKeyGroups returns where each KeyGroupState of the TaskState object
// data (an envelope written by EncodeObject) lies in data, in the order
// stored.
func indexKeyGroups(data []byte) ([]*messages.KeyGroupSection, error) {
	env, err := parseEnvelope(data)
	if err != nil {
		return nil, err
	}
	if len(env.payload) == 0 {
		return nil, nil
	}
	base := cap(data) - cap(env.payload) // the payload is data[base:...]
	if base < 0 || base+len(env.payload) > len(data) || &data[base] != &env.payload[0] {
		return nil, fmt.Errorf("the payload is not within the object")
	}
	var out []*messages.KeyGroupSection
	p := env.payload
	for off := 0; off < len(p); {
		num, typ, n := protowire.ConsumeTag(p[off:])
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		off += n
		if num != fieldTaskKeyGroups || typ != protowire.BytesType {
			m := protowire.ConsumeFieldValue(num, typ, p[off:])
			if m < 0 {
				return nil, protowire.ParseError(m)
			}
			off += m
			continue
		}
		v, m := protowire.ConsumeBytes(p[off:])
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		start := off + m - len(v)
		off += m
		kg, err := keyGroupNumber(v)
		if err != nil {
			return nil, err
		}
		out = append(out, &messages.KeyGroupSection{KeyGroup: kg, Offset: uint64(base + start), Length: uint64(len(v)), Crc32C: Checksum(v)})
	}
	return out, nil
}

// keyGroupNumber reads the key_group field of a serialised KeyGroupState.
func keyGroupNumber(b []byte) (uint32, error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		b = b[n:]
		if num == fieldKeyGroup && typ == protowire.VarintType {
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return 0, protowire.ParseError(m)
			}
			return uint32(v), nil
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return 0, protowire.ParseError(m)
		}
		b = b[m:]
	}
	return 0, nil // proto3 leaves key group 0 out
}

// ReadKeyGroups reads the key groups in [start, end) of the task state h
// points at, using the index in h (see StateHandle.key_groups) to read only
// the bytes that hold them: one ranged read per run of adjacent sections
// when the store is a RangeReader, the runs read in parallel. An
// incremental state's index also lists the key groups it references in
// earlier checkpoints' objects (KeyGroupSection.key), which are read from
// there. Each key group is checked against the CRC-32C the index records
// and must be the key group the index says; errors wrap ErrCorrupt (or
// ErrNotFound) and name the object. A handle without an index (written
// before it existed) is read whole, as ReadTaskState does. It returns the
// key groups in key-group order and the bytes read.
//
// ReadKeyGroups holds every key group of the range at once; see
// StreamKeyGroups for a restore that does not.
func (c *Checkpoints) ReadKeyGroups(ctx context.Context, h *messages.StateHandle, start, end int) ([]*messages.KeyGroupState, int64, error) {
	if !h.GetIndexed() {
		st, err := c.ReadTaskState(ctx, h)
		if err != nil {
			return nil, 0, err
		}
		var out []*messages.KeyGroupState
		for _, g := range st.GetKeyGroups() {
			if int(g.GetKeyGroup()) >= start && int(g.GetKeyGroup()) < end {
				out = append(out, g)
			}
		}
		return out, int64(h.GetSize()), nil
	}
	secs, err := c.indexRange(h, start, end)
	if err != nil || len(secs) == 0 {
		return nil, 0, err
	}
	out := make([]*messages.KeyGroupState, 0, len(secs))
	read, err := c.streamSections(ctx, h, secs, func(g *messages.KeyGroupState) error {
		out = append(out, g)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	sortKeyGroups(out)
	return out, read, nil
}

// sortKeyGroups sorts gs by key group.
func sortKeyGroups(gs []*messages.KeyGroupState) {
	slices.SortFunc(gs, func(a, b *messages.KeyGroupState) int { return cmp.Compare(a.GetKeyGroup(), b.GetKeyGroup()) })
}

// checkHandleIndex checks h's key-group index: key groups strictly
// increasing over the whole index (the order ReadKeyGroups searches in);
// sections of h's own object (an empty key) within its size; sections of
// other objects with a valid key that is not h's own and an end that does
// not overflow; and, per object, sections that do not overlap.
func checkHandleIndex(h *messages.StateHandle) error {
	idx := h.GetKeyGroups()
	size := h.GetSize()
	sorted := true // the sections of each object in offset order
	last := map[string]uint64{}
	for i, s := range idx {
		if i > 0 && s.GetKeyGroup() <= idx[i-1].GetKeyGroup() {
			return fmt.Errorf("key-group index out of order: %d after %d", s.GetKeyGroup(), idx[i-1].GetKeyGroup())
		}
		off, end := s.GetOffset(), s.GetOffset()+s.GetLength()
		if end < off {
			return fmt.Errorf("key-group index: key group %d at bytes %d..+%d: the end overflows", s.GetKeyGroup(), off, s.GetLength())
		}
		switch k := s.GetKey(); {
		case k == "" && end > size:
			return fmt.Errorf("key-group index: key group %d at bytes %d..%d lies beyond the object's %d bytes", s.GetKeyGroup(), off, end, size)
		case k == h.GetKey():
			return fmt.Errorf("key-group index: key group %d names the handle's own object %s as another", s.GetKeyGroup(), k)
		case k != "":
			if err := validateKey(k); err != nil {
				return fmt.Errorf("key-group index: key group %d: %w", s.GetKeyGroup(), err)
			}
		}
		if prev, ok := last[s.GetKey()]; ok && off < prev {
			sorted = false
		}
		last[s.GetKey()] = end
	}
	if sorted {
		return nil
	}
	// Some object's sections are not in offset order (an incremental
	// state's, or one whose key groups were stored unsorted): sort them.
	byObject := slices.Clone(idx)
	slices.SortFunc(byObject, func(a, b *messages.KeyGroupSection) int {
		return cmp.Or(cmp.Compare(a.GetKey(), b.GetKey()), cmp.Compare(a.GetOffset(), b.GetOffset()))
	})
	for i, s := range byObject {
		if i > 0 {
			p := byObject[i-1]
			if p.GetKey() == s.GetKey() && s.GetOffset() < p.GetOffset()+p.GetLength() {
				return fmt.Errorf("key-group index: key group %d at bytes %d..%d overlaps key group %d", s.GetKeyGroup(), s.GetOffset(), s.GetOffset()+s.GetLength(), p.GetKeyGroup())
			}
		}
	}
	return nil
}

// getRange reads length bytes at offset of the object under key: a ranged
// read when s is a RangeReader, else the whole object, sliced.
func getRange(ctx context.Context, s Store, key string, offset, length int64) ([]byte, error) {
	if r, ok := s.(RangeReader); ok {
		return r.GetRange(ctx, key, offset, length)
	}
	data, err := s.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return sliceRange(key, data, offset, length)
}

// sliceRange returns data[offset:offset+length], or an error wrapping
// ErrCorrupt when the object is too short.
func sliceRange(key string, data []byte, offset, length int64) ([]byte, error) {
	if offset < 0 || length < 0 || offset+length > int64(len(data)) {
		return nil, fmt.Errorf("snapshots: get %s bytes %d..%d: the object has %d bytes: %w", key, offset, offset+length, len(data), ErrCorrupt)
	}
	return data[offset : offset+length], nil
}
