//go:build unix

package main

import (
	"strings"
	"testing"
)

// TestLostLinkDetected loses every batch on the channels from one worker's
// sources to the other node, from an early seq on, as a broken stream or a
// cut link would: the senders soon wait for credit that never comes, and no
// later batch shows the gap. The link watch must fail the job over (the
// fault heals in the next incarnation) and the job must end exactly once,
// with checkpoints off (before, it hung for ever) and on (before, it
// stalled until checkpoints had timed out past the tolerable failures).
func TestLostLinkDetected(t *testing.T) {
	for _, interval := range []string{"0", "20ms"} {
		t.Run("interval="+interval, func(t *testing.T) {
			c := newTestCluster(t)
			coord, addr := c.startCoordinator("coordinator", "127.0.0.1:0", 2, "-interval", interval)
			w1, _ := c.startWorker("worker 1", addr, "-lose-from", "5")
			w2, _ := c.startWorker("worker 2", addr, "-lose-from", "5")
			c.release()
			at, failed := c.awaitEvent(coord, 0, "task-failed", nil)
			reason := failed.get("err")
			switch {
			case strings.Contains(reason, "lost the link to"):
			case interval != "0" && strings.Contains(reason, "sequence gap"):
				// A barrier sent before the credit ran out showed the gap.
			default:
				t.Errorf("the first failure says %q, want a lost link", reason)
			}
			for _, l := range coord.linesFrom(0)[:at] {
				if strings.Contains(l, "timed out") {
					t.Errorf("a checkpoint timed out before the lost link was detected: %s", l)
				}
			}
			c.expectExact(coord, w1, w2)
		})
	}
}
