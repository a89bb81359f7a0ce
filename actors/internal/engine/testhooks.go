package engine

// SendToTask delivers msg to the actor of task, for tests of bad input.
func SendToTask(j *Job, task string, msg any) {
	j.system.Root.Send(j.sh.pids[j.sh.plan.Task(task).Index], msg)
}

// PoisonJobActor sends a PoisonPill to the job's job actor, as a peer could
// before nodes were authenticated, for tests.
func PoisonJobActor(j *Job) { j.system.Root.Poison(j.pid) }
