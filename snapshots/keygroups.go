package snapshots

import (
	"context"
	"fmt"
	"sort"

	"github.com/snapflow/snapflow/messages"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
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
// the bytes that hold them: one ranged read when the store is a
// RangeReader. Each key group is checked against the CRC-32C the index
// records and must be the key group the index says; errors wrap ErrCorrupt
// (or ErrNotFound) and name the key. A handle without an index (written
// before it existed) is read whole, as ReadTaskState does. It returns the
// key groups and the bytes read.
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
	key := h.GetKey()
	if err := validateKey(key); err != nil {
		return nil, 0, fmt.Errorf("snapshots: state handle: %w", err)
	}
	idx := h.GetKeyGroups()
	if err := checkIndex(idx, h.GetSize()); err != nil {
		return nil, 0, fmt.Errorf("snapshots: state %s: %w: %w", key, ErrCorrupt, err)
	}
	lo := sort.Search(len(idx), func(i int) bool { return int(idx[i].GetKeyGroup()) >= start })
	hi := sort.Search(len(idx), func(i int) bool { return int(idx[i].GetKeyGroup()) >= end })
	if lo >= hi {
		return nil, 0, nil
	}
	first, last := idx[lo], idx[hi-1]
	from, to := first.GetOffset(), last.GetOffset()+last.GetLength()
	if to < from || to > h.GetSize() {
		return nil, 0, fmt.Errorf("snapshots: state %s: key-group index points at bytes %d..%d of %d: %w", key, from, to, h.GetSize(), ErrCorrupt)
	}
	data, err := getRange(ctx, c.store, key, int64(from), int64(to-from))
	if err != nil {
		return nil, 0, err
	}
	out := make([]*messages.KeyGroupState, 0, hi-lo)
	for _, s := range idx[lo:hi] {
		if s.GetOffset() < from || s.GetOffset()+s.GetLength() > to {
			return nil, 0, fmt.Errorf("snapshots: state %s: key group %d lies outside the bytes read: %w", key, s.GetKeyGroup(), ErrCorrupt)
		}
		b := data[s.GetOffset()-from : s.GetOffset()-from+s.GetLength()]
		if got := Checksum(b); got != s.GetCrc32C() {
			return nil, 0, fmt.Errorf("snapshots: state %s: key group %d: crc32c %08x, want %08x: %w", key, s.GetKeyGroup(), got, s.GetCrc32C(), ErrCorrupt)
		}
		g := new(messages.KeyGroupState)
		if err := proto.Unmarshal(b, g); err != nil {
			return nil, 0, fmt.Errorf("snapshots: state %s: key group %d: %w: %w", key, s.GetKeyGroup(), ErrCorrupt, err)
		}
		if g.GetKeyGroup() != s.GetKeyGroup() {
			return nil, 0, fmt.Errorf("snapshots: state %s: the index says key group %d, the bytes hold %d: %w", key, s.GetKeyGroup(), g.GetKeyGroup(), ErrCorrupt)
		}
		out = append(out, g)
	}
	return out, int64(len(data)), nil
}

// checkIndex checks that a key-group index is in strictly increasing key
// groups and offsets, with sections that do not overlap and lie within the
// object's size: the order ReadKeyGroups searches in.
func checkIndex(idx []*messages.KeyGroupSection, size uint64) error {
	var end uint64
	for i, s := range idx {
		if i > 0 && s.GetKeyGroup() <= idx[i-1].GetKeyGroup() {
			return fmt.Errorf("key-group index out of order: %d after %d", s.GetKeyGroup(), idx[i-1].GetKeyGroup())
		}
		if s.GetOffset() < end || s.GetOffset()+s.GetLength() > size || s.GetOffset()+s.GetLength() < s.GetOffset() {
			return fmt.Errorf("key-group index: key group %d at bytes %d..%d overlaps another or lies beyond the object's %d bytes",
				s.GetKeyGroup(), s.GetOffset(), s.GetOffset()+s.GetLength(), size)
		}
		end = s.GetOffset() + s.GetLength()
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
