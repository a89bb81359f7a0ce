package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/snapflow/snapflow/actors/coordinator"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// savepointReq is a savepoint the job actor was asked for.
type savepointReq struct {
	name string
	stop bool // stop the job once it is complete
}

// savepointRequest asks the job actor for a savepoint.
type savepointRequest struct {
	name  string
	stop  bool
	reply chan checkpointResult
}

// savepointName returns the name of the savepoint of request req, or "".
func (j *jobActor) savepointName(req uint64) string {
	if sp := j.savepoints[req]; sp != nil {
		return sp.name
	}
	return ""
}

func (j *jobActor) onSavepointRequest(m *savepointRequest) {
	switch {
	case j.phase == phaseDone:
		m.reply <- checkpointResult{err: ErrFinished}
		return
	case j.spNames[m.name]:
		m.reply <- checkpointResult{err: fmt.Errorf("actors: savepoint %q: %w: a savepoint of that name is being taken", m.name, snapshots.ErrSavepointExists)}
		return
	}
	j.nextRequest++
	req := j.nextRequest
	j.requests[req] = m.reply
	j.savepoints[req] = &savepointReq{name: m.name, stop: m.stop}
	j.spNames[m.name] = true
	if j.phase != phaseRunning {
		j.waitingSavepoints = append(j.waitingSavepoints, req)
		return
	}
	j.apply(j.coord.RequestSavepoint(time.Now(), req))
}

// savepointCompleted handles the completion of a savepoint: its manifest is
// written. A stop-with-savepoint stops the job there.
func (j *jobActor) savepointCompleted(a coordinator.Action) {
	sp := j.savepoints[a.Savepoint]
	took := time.Since(j.triggeredAt[a.Checkpoint])
	delete(j.triggeredAt, a.Checkpoint)
	j.log.Info("savepoint complete", "savepoint", sp.name, "checkpoint", a.Checkpoint, "bytes", j.pendingBytes, "took", took, "stop", sp.stop)
	j.emit(Event{Kind: EventCheckpointCompleted, Epoch: j.epoch, Checkpoint: a.Checkpoint, Savepoint: sp.name, Bytes: j.pendingBytes,
		Duration: took, Alignment: j.pendingAlign, Upload: j.pendingAsync})
	// The tasks hear of it as of a checkpoint: a source paused by the
	// savepoint produces again, and it is where two-phase-commit sinks
	// will commit.
	m := &messages.CompleteCheckpoint{Epoch: j.epoch, CheckpointId: a.Checkpoint}
	for _, pid := range j.sh.pids {
		j.send(pid, m)
	}
	delete(j.savepoints, a.Savepoint)
	j.savepointEnded(sp.name)
	if !sp.stop {
		return
	}
	if reply := j.requests[a.Savepoint]; reply != nil {
		reply <- checkpointResult{id: a.Checkpoint}
		delete(j.requests, a.Savepoint)
	}
	j.log.Info("job stopped with a savepoint", "savepoint", sp.name, "checkpoint", a.Checkpoint)
	j.finish(fmt.Errorf("%w with savepoint %q (checkpoint %d)", ErrStopped, sp.name, a.Checkpoint))
}

// savepointEnded forgets that savepoint name is being taken.
func (j *jobActor) savepointEnded(name string) { delete(j.spNames, name) }

// cleanSavepoint deletes what an aborted savepoint stored. Uploads still in
// flight may land afterwards: such an incomplete savepoint has no manifest,
// is never restored, and `snapflow savepoints delete` removes it.
func (j *jobActor) cleanSavepoint(name string) {
	sh := j.sh
	sh.goUploadCtx(sh.uploadCtx, func(ctx context.Context) {
		if err := sh.cps.DeleteSavepoint(ctx, name); err != nil && !errors.Is(err, snapshots.ErrNotFound) && ctx.Err() == nil {
			sh.log.Warn("deleting the objects of an aborted savepoint failed", "savepoint", name, "err", err)
		}
	})
}
