package actors

import (
	"github.com/snapflow/snapflow/actors/internal/engine"
	"github.com/snapflow/snapflow/internal/dataflow"
)

// SendToTask delivers msg to the actor of task, for tests of bad input.
func SendToTask(j *Job, task string, msg any) { engine.SendToTask(j, task, msg) }

// PoisonJobActor sends a PoisonPill to the job's job actor.
func PoisonJobActor(j *Job) { engine.PoisonJobActor(j) }

// PlanOf is j's physical plan.
func PlanOf(j *Job) *dataflow.Plan { return engine.PlanOf(j) }
