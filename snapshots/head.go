package snapshots

import (
	"cmp"
	"context"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/snapflow/snapflow/messages"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// ReadTaskStateHead reads the state h points at without its key groups:
// its task id, operator state, source offset, state descriptors and the
// rest. With StreamKeyGroups for the key groups it is a restore that never
// holds a state's bytes and its decoded key groups at once: ReadTaskState
// is ReadTaskStateHead plus every key group.
//
// For an indexed handle on a store that reads ranges, it reads only the
// bytes of h's own object before and after its key groups (two ranged
// reads) and checks them against h's CRC-32C, combined with the CRC-32C
// that the index records for each key group it does not read (those are
// checked when they are read) and with the tag and length that precede
// each key group in an object EncodeObject wrote, which the index implies
// and neither read uses. Otherwise (no index, an inline state, no
// key group in the object, a store without ranged reads) it reads and
// verifies the whole object as ReadTaskState does, and drops the key
// groups. Errors wrap ErrNotFound or ErrCorrupt and name the key.
func (c *Checkpoints) ReadTaskStateHead(ctx context.Context, h *messages.StateHandle) (*messages.TaskState, error) {
	key := h.GetKey()
	if err := validateKey(key); err != nil {
		return nil, fmt.Errorf("snapshots: state handle: %w", err)
	}
	_, ranged := c.given.(RangeReader)
	if !h.GetIndexed() || len(h.GetInline()) > 0 || !ranged {
		return c.readHeadWhole(ctx, h)
	}
	if err := checkHandleIndex(h); err != nil {
		return nil, fmt.Errorf("snapshots: state %s: %w: %w", key, ErrCorrupt, err)
	}
	own := make([]*messages.KeyGroupSection, 0, len(h.GetKeyGroups()))
	for _, s := range h.GetKeyGroups() {
		if s.GetKey() == "" {
			own = append(own, s)
		}
	}
	if len(own) == 0 {
		return c.readHeadWhole(ctx, h)
	}
	slices.SortFunc(own, func(a, b *messages.KeyGroupSection) int { return cmp.Compare(a.GetOffset(), b.GetOffset()) })
	// The key groups are one run of field key_groups of the payload: each
	// section follows its tag and length, right after the previous one.
	gaps := make([][]byte, len(own))
	for i, s := range own {
		gaps[i] = protowire.AppendVarint(protowire.AppendTag(nil, fieldTaskKeyGroups, protowire.BytesType), s.GetLength())
		prev := uint64(0)
		if i > 0 {
			prev = own[i-1].GetOffset() + own[i-1].GetLength()
		}
		if s.GetOffset() < uint64(len(gaps[i])) || (i > 0 && s.GetOffset()-uint64(len(gaps[i])) != prev) {
			return c.readHeadWhole(ctx, h) // not laid out as EncodeObject does: read it all
		}
	}
	headEnd := own[0].GetOffset() - uint64(len(gaps[0]))
	tailStart := own[len(own)-1].GetOffset() + own[len(own)-1].GetLength()
	head, err := getRange(ctx, c.store, key, 0, int64(headEnd))
	if err != nil {
		return nil, err
	}
	tail, err := getRange(ctx, c.store, key, int64(tailStart), int64(h.GetSize()-tailStart))
	if err != nil {
		return nil, err
	}
	crc := Checksum(head)
	for i, s := range own {
		crc = crc32.Update(crc, castagnoli, gaps[i])
		crc = crcCombine(crc, s.GetCrc32C(), s.GetLength())
	}
	if crc = crc32.Update(crc, castagnoli, tail); crc != h.GetCrc32C() {
		return nil, fmt.Errorf("snapshots: state %s: the bytes around its key groups: crc32c %08x, want %08x: %w", key, crc, h.GetCrc32C(), ErrCorrupt)
	}
	st, err := decodeHead(head, tail, tailStart)
	if err != nil {
		return nil, fmt.Errorf("snapshots: state %s: %w: %w", key, ErrCorrupt, err)
	}
	return st, nil
}

// decodeHead decodes the TaskState whose envelope starts with head and
// ends with tail, which starts at byte tailStart, leaving out the key
// groups between them.
func decodeHead(head, tail []byte, tailStart uint64) (*messages.TaskState, error) {
	b := head
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != fieldKind || typ != protowire.BytesType {
		return nil, fmt.Errorf("the envelope does not start with its kind")
	}
	b = b[n:]
	kind, n := protowire.ConsumeBytes(b)
	if n < 0 || string(kind) != KindTaskState {
		return nil, fmt.Errorf("kind %q, want %q", kind, KindTaskState)
	}
	b = b[n:]
	num, typ, n = protowire.ConsumeTag(b)
	if n < 0 || num != fieldPayload || typ != protowire.BytesType {
		return nil, fmt.Errorf("the envelope's kind is not followed by its payload")
	}
	b = b[n:]
	size, n := protowire.ConsumeVarint(b)
	if n < 0 {
		return nil, fmt.Errorf("the payload's length: %w", protowire.ParseError(n))
	}
	start := uint64(len(head) - len(b[n:])) // the payload's first byte
	end := start + size
	if end < tailStart || end-tailStart > uint64(len(tail)) {
		return nil, fmt.Errorf("a payload of bytes %d..%d does not hold the key groups, which end at %d", start, end, tailStart)
	}
	payload := append(b[n:len(b):len(b)], tail[:end-tailStart]...)
	st := new(messages.TaskState)
	if err := proto.Unmarshal(payload, st); err != nil {
		return nil, err
	}
	if len(st.GetKeyGroups()) > 0 {
		return nil, fmt.Errorf("key groups outside the indexed ones")
	}
	return st, nil
}

// readHeadWhole reads the whole of h's own object, verified, and returns
// its state without key groups.
func (c *Checkpoints) readHeadWhole(ctx context.Context, h *messages.StateHandle) (*messages.TaskState, error) {
	data, err := c.ownObject(ctx, h)
	if err != nil {
		return nil, err
	}
	st := new(messages.TaskState)
	if err := decodeObject(data, KindTaskState, st, true); err != nil {
		return nil, fmt.Errorf("snapshots: state %s: %w", h.GetKey(), err)
	}
	st.KeyGroups = nil
	return st, nil
}
