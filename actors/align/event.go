package align

import "fmt"

// EventKind says what an input delivered.
type EventKind uint8

const (
	// Data is an opaque value (a batch of records) delivered on an input.
	Data EventKind = iota + 1
	// Barrier is checkpoint barrier Event.Checkpoint delivered on an input.
	Barrier
	// End means the input has ended: nothing more follows on it.
	End
)

// String returns the EventKind's lowercase name, for logs.
func (k EventKind) String() string {
	switch k {
	case Data:
		return "data"
	case Barrier:
		return "barrier"
	case End:
		return "end"
	default:
		return fmt.Sprintf("EventKind(%d)", uint8(k))
	}
}

// Event is one item delivered, in FIFO order, on input channel Input.
// Checkpoint is set for a Barrier (ids are > 0) and Data for a Data event.
type Event[M any] struct {
	Kind       EventKind
	Input      int
	Checkpoint uint64
	Data       M
	// Aligned makes a barrier align in an at-least-once Aligner (see
	// NewAtLeastOnce): a savepoint's barrier.
	Aligned bool
}

// ActionKind says what the task must do next.
type ActionKind uint8

const (
	// Process: process Action.Data, which arrived on Action.Input, now.
	Process ActionKind = iota + 1
	// Snapshot: every open input has delivered barrier Action.Checkpoint.
	// Snapshot the state, flush the outputs and emit the barrier
	// downstream. Data released from the alignment buffers follows in later
	// actions.
	Snapshot
	// Abort: this task will not snapshot checkpoint Action.Checkpoint
	// (a newer barrier overtook it, or AbortCheckpoint was called).
	Abort
	// EndOfInput: input Action.Input has ended (informational).
	EndOfInput
	// AllEnded: every input has ended. The task should flush and end its
	// outputs. Emitted exactly once, as the last action.
	AllEnded
	// Persisted (unaligned checkpoints, see NewUnaligned): barrier
	// Action.Checkpoint has now arrived on every open input, so the data
	// recorded for it (the Process actions with InFlight) is complete.
	Persisted
)

// String returns the ActionKind's lowercase name, for logs.
func (k ActionKind) String() string {
	switch k {
	case Process:
		return "process"
	case Snapshot:
		return "snapshot"
	case Abort:
		return "abort"
	case EndOfInput:
		return "end-of-input"
	case AllEnded:
		return "all-ended"
	case Persisted:
		return "persisted"
	default:
		return fmt.Sprintf("ActionKind(%d)", uint8(k))
	}
}

// Action is one thing the task must do, in the order returned.
//
// Input is meaningful for Process and EndOfInput and is -1 otherwise.
// Checkpoint is meaningful for Snapshot and Abort. Data is set for Process
// only.
type Action[M any] struct {
	Kind       ActionKind
	Input      int
	Checkpoint uint64
	Data       M
	// InFlight marks a Process action of an unaligned Aligner whose data
	// preceded barrier Checkpoint on its input but came after the
	// snapshot: the task processes it and records it as that
	// checkpoint's channel state.
	InFlight bool
	// Unaligned marks the Snapshot of an unaligned checkpoint: it comes
	// with the first barrier, ahead of what the task has not processed
	// yet (which it records as channel state), and the barrier goes
	// downstream ahead of the task's queued output.
	Unaligned bool
}

// String renders the action without its Data, e.g. "process in=0" or
// "snapshot id=3".
func (a Action[M]) String() string {
	switch a.Kind {
	case Process, EndOfInput:
		if a.InFlight {
			return fmt.Sprintf("%s in=%d in-flight=%d", a.Kind, a.Input, a.Checkpoint)
		}
		return fmt.Sprintf("%s in=%d", a.Kind, a.Input)
	case Snapshot, Abort, Persisted:
		if a.Unaligned {
			return fmt.Sprintf("%s id=%d unaligned", a.Kind, a.Checkpoint)
		}
		return fmt.Sprintf("%s id=%d", a.Kind, a.Checkpoint)
	default:
		return a.Kind.String()
	}
}
