package topology

import (
	"context"
	"errors"
	"fmt"

	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/snapshots"
)

// ErrDiskStateNotExpanded is wrapped by the errors of DecodeValueState and
// DecodeMapState for a state that a checkpoint holds as the files of an
// on-disk database (actors.WithDiskState): read them with ExpandDiskState
// first. Savepoints hold every state in full.
var ErrDiskStateNotExpanded = dataflow.ErrDiskStateNotExpanded

// ExpandDiskState reads the states that rp's checkpoint holds as the
// files of the tasks' on-disk databases (actors.WithDiskState) into
// rp.States, so that DecodeValueState and DecodeMapState read them as any
// other. Every file is read from cps and checked against its size and
// checksum; each task's files go through a temporary directory under
// tmpDir ("": the system's), removed when done. A task's whole state is
// then in memory. rp must be loaded in full (not as heads).
func ExpandDiskState(ctx context.Context, cps *snapshots.Checkpoints, rp *snapshots.Restorable, tmpDir string) error {
	if rp == nil {
		return errors.New("topology: ExpandDiskState: no checkpoint")
	}
	for _, e := range rp.Manifest.GetTasks() {
		d := e.GetState().GetDisk()
		st := rp.States[e.GetTaskId()]
		if d == nil || st == nil || len(st.GetDiskStates()) == 0 {
			continue
		}
		if rp.Heads {
			return fmt.Errorf("topology: ExpandDiskState: checkpoint %d was loaded as heads: load it in full", rp.Manifest.GetCheckpointId())
		}
		if err := dataflow.ExpandDiskState(ctx, st, d, tmpDir, cps.ReadStateFile); err != nil {
			return err
		}
	}
	return nil
}
