package engine

import (
	"strings"
	"testing"
)

// TestUnalignedRefusesSynchronousSnapshots: an unaligned checkpoint's
// upload waits for channel state that the task records while it runs on,
// which a synchronous snapshot would never let it do.
func TestUnalignedRefusesSynchronousSnapshots(t *testing.T) {
	c := defaultConfig()
	WithCheckpointMode(Unaligned)(&c)
	WithSynchronousSnapshots()(&c)
	if err := c.finish(); err == nil || !strings.Contains(err.Error(), "CheckpointUnaligned") || !strings.Contains(err.Error(), "WithSynchronousSnapshots") {
		t.Fatalf("finish: %v", err)
	}
	c = defaultConfig()
	WithCheckpointMode(Unaligned)(&c)
	if err := c.finish(); err != nil || !c.unaligned || c.atLeastOnce {
		t.Fatalf("finish: %v, unaligned %v, at least once %v", err, c.unaligned, c.atLeastOnce)
	}
}
