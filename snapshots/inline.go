package snapshots

import (
	"fmt"

	"github.com/snapflow/snapflow/messages"
)

// SetInlineLimit makes the states that c stores from now on travel inline
// when their stored object would be at most n bytes: PutTaskState,
// PutTaskStateRefs without references, and PutSavepointState then write
// nothing and return a
// handle whose Inline holds the object's bytes, for the manifest to carry
// (Key still names it; Size, Crc32C and the key-group index describe the
// bytes as usual). A checkpoint whose states are all inline is thus one
// store write, its manifest. n <= 0 disables it, the default. It is safe
// for concurrent use.
//
// Reads (ReadTaskState, ReadKeyGroups, StreamKeyGroups, LoadLatest,
// Verify) use the inline bytes, checked against Size and Crc32C; a
// manifest whose inline bytes do not match is corrupt. Retention and
// deletions have no object to delete for them. Sections refuses an inline
// handle: a later incremental state must store its key groups again.
func (c *Checkpoints) SetInlineLimit(n int) { c.inlineLimit.Store(int64(max(n, 0))) }

// checkInline checks that h's inline bytes are those its size and CRC-32C
// describe; the error wraps ErrCorrupt.
func checkInline(h *messages.StateHandle) error {
	data := h.GetInline()
	if uint64(len(data)) != h.GetSize() {
		return fmt.Errorf("inline state of %d bytes, want %d: %w", len(data), h.GetSize(), ErrCorrupt)
	}
	if got := Checksum(data); got != h.GetCrc32C() {
		return fmt.Errorf("inline state: crc32c %08x, want %08x: %w", got, h.GetCrc32C(), ErrCorrupt)
	}
	return nil
}
