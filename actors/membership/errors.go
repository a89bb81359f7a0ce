package membership

import "errors"

var (
	// ErrInvalid is wrapped by the errors of a malformed registration,
	// configuration, task list or worker list.
	ErrInvalid = errors.New("membership: invalid")
	// ErrLost is wrapped by the error of a registration under an id that was
	// declared lost, and by Worker.Err of a lost worker. A lost worker never
	// comes back under the same id: it drops its tasks and registers again
	// under a new one.
	ErrLost = errors.New("membership: worker lost")
	// ErrConflict is wrapped by the error of a registration under the id of a
	// live worker with a different address or number of slots.
	ErrConflict = errors.New("membership: conflicting registration")
	// ErrNotEnoughSlots is wrapped by Place when the workers offer fewer
	// slots than there are tasks.
	ErrNotEnoughSlots = errors.New("membership: not enough slots")
)
