package dataflow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/snapflow/snapflow/messages"
)

// TwoPhaseSink is a transactional sink: one instance per sink task, whose
// writes become visible exactly once, through the checkpoints (two-phase
// commit, as Flink's TwoPhaseCommitSinkFunction). Records go into an open
// transaction; at each checkpoint's barrier the transaction is
// pre-committed and its handle stored in the checkpoint, and a new one
// begins; when the checkpoint completes, every transaction pre-committed up
// to it is committed. A job restored from a checkpoint commits what it
// holds as pre-committed, and the sink aborts everything else of its own.
// The runtime calls the methods from one goroutine at a time.
type TwoPhaseSink[T any] interface {
	// Recover runs when the task starts, before any record. checkpoint is
	// the id of the checkpoint restored (0: none). It commits each
	// transaction of pending (pre-committed as part of that checkpoint,
	// perhaps committed already: Commit is idempotent), and aborts every
	// other transaction the task may have left: open (the restored
	// checkpoint's open transaction, nil for none) and any begun after
	// that checkpoint, which no checkpoint holds. pending is empty when
	// the job starts without state. It must abort only what incarnations
	// older than Incarnation(ctx) left: an older incarnation may still run
	// (a paused process that woke up), and so may, for a short while, a
	// newer one, whose work this one must neither remove nor replace.
	Recover(ctx context.Context, checkpoint uint64, pending [][]byte, open []byte) error
	// Begin opens a transaction and returns its handle, which must tell it
	// from every transaction the task began before, in this run or any
	// earlier one. after is the checkpoint whose barrier the transaction
	// follows: the one restored (0: none) for the first transaction, then
	// each checkpoint whose barrier pre-committed the previous one.
	Begin(ctx context.Context, after uint64) (txn []byte, err error)
	// Write writes records into transaction txn. The sink must not keep
	// the slice.
	Write(ctx context.Context, txn []byte, records []T) error
	// PreCommit makes txn durable, so that Commit cannot fail for want of
	// its data, and returns the handle to store in the checkpoint (often
	// txn). It runs at the checkpoint's barrier.
	PreCommit(ctx context.Context, txn []byte) ([]byte, error)
	// Commit makes a pre-committed transaction visible. It must be
	// idempotent: committing a committed transaction is not an error. A
	// transaction that can no longer be committed (it was aborted, or its
	// data is gone) is an error: its records would be lost.
	Commit(ctx context.Context, txn []byte) error
	// Close releases the sink; it is called on every stop, also after
	// failures. It must not commit.
	Close() error
}

// CommitRetries is how many times a transactional sink's commit is tried
// before the task fails; CommitBackoff is the first pause between tries,
// doubled after each.
const (
	CommitRetries = 4
	CommitBackoff = 10 * time.Millisecond
)

// ErrCommit is wrapped by the error of a task whose transactional sink
// could not commit. The job recovers, and the restore commits the
// transaction again; a commit that can never succeed exhausts the restart
// strategy, and the job fails with it.
var ErrCommit = errors.New("topology: commit failed")

// TwoPhaseCommitSink adds a transactional sink (see TwoPhaseSink): every
// record reaches it exactly once in what it commits, given replayable
// sources and deterministic operators. newSink is called once per task (and
// again after every restore) with the task's subtask index and the
// operator's parallelism. Its state is the task's transactions, which are
// not redistributed: a job restored at another parallelism of the sink is
// refused.
func TwoPhaseCommitSink[T any](s Stream[T], name string, newSink func(subtask, parallelism int) TwoPhaseSink[T], opts ...Option) {
	checkFn(s.g, name, newSink, newSink == nil)
	n := s.g.addNode(name, KindSink, opts, func(ic *InstanceContext) (Instance, error) {
		sink := newSink(ic.Task.Subtask, ic.Task.Parallelism)
		if sink == nil {
			return nil, fmt.Errorf("sink function returned nil")
		}
		ctx := ic.Context
		if ctx == nil {
			ctx = context.Background()
		}
		ctx = WithIncarnation(ctx, ic.Epoch)
		return &twoPhaseInstance[T]{sink: sink, ctx: ctx, in: newInputs[T](), task: ic.Task.ID}, nil
	})
	n.transactional = true
	connect(n, s)
}

// twoPhaseInstance drives a TwoPhaseSink through the checkpoint protocol.
type twoPhaseInstance[T any] struct {
	sink TwoPhaseSink[T]
	ctx  context.Context
	in   inputs[T]
	task string

	pending    []*messages.Transaction // pre-committed, by increasing checkpoint id
	open       []byte                  // the transaction records go into
	restored   []byte                  // the restored checkpoint's open transaction
	checkpoint uint64                  // the checkpoint restored (0: none)
}

func (p *twoPhaseInstance[T]) Restore(st *messages.TaskState) error {
	p.checkpoint = st.GetCheckpointId()
	for _, tx := range st.GetTransactions() {
		if tx.GetCheckpointId() == 0 {
			p.restored = tx.GetHandle()
			continue
		}
		p.pending = append(p.pending, tx)
	}
	return nil
}

// Start commits what the restored checkpoint pre-committed, lets the sink
// abort the rest, and begins the first transaction.
func (p *twoPhaseInstance[T]) Start() error {
	handles := make([][]byte, len(p.pending))
	for i, tx := range p.pending {
		handles[i] = tx.GetHandle()
	}
	if err := p.retry("recover", func() error { return p.sink.Recover(p.ctx, p.checkpoint, handles, p.restored) }); err != nil {
		return err
	}
	p.pending, p.restored = nil, nil
	txn, err := p.sink.Begin(p.ctx, p.checkpoint)
	if err != nil {
		return fmt.Errorf("begin a transaction: %w", err)
	}
	p.open = txn
	return nil
}

func (p *twoPhaseInstance[T]) ProcessBatch(_ int, batch any, _ []int64) error {
	if err := p.sink.Write(p.ctx, p.open, batch.([]T)); err != nil {
		return err
	}
	p.in.release(batch)
	return nil
}

func (p *twoPhaseInstance[T]) Flush()        {}
func (p *twoPhaseInstance[T]) Pending() bool { return false }

// Snapshot pre-commits the open transaction, stores every transaction not
// yet known committed, and begins the next one, which the snapshot holds as
// open (aborted if the job restores this checkpoint).
func (p *twoPhaseInstance[T]) Snapshot(st *messages.TaskState) error {
	handle, err := p.sink.PreCommit(p.ctx, p.open)
	if err != nil {
		return fmt.Errorf("pre-commit: %w", err)
	}
	p.pending = append(p.pending, &messages.Transaction{CheckpointId: st.GetCheckpointId(), Handle: slices.Clone(handle)})
	next, err := p.sink.Begin(p.ctx, st.GetCheckpointId())
	if err != nil {
		return fmt.Errorf("begin a transaction: %w", err)
	}
	p.open = next
	for _, tx := range p.pending {
		st.Transactions = append(st.Transactions, &messages.Transaction{CheckpointId: tx.GetCheckpointId(), Handle: slices.Clone(tx.GetHandle())})
	}
	st.Transactions = append(st.Transactions, &messages.Transaction{Handle: slices.Clone(next)})
	return nil
}

// CheckpointComplete commits, in order, every transaction pre-committed up
// to checkpoint id. A commit is retried (CommitRetries); one that keeps
// failing fails the task with ErrCommit, and the restore commits it again.
func (p *twoPhaseInstance[T]) CheckpointComplete(id uint64, commit bool) error {
	if !commit {
		return nil
	}
	for len(p.pending) > 0 && p.pending[0].GetCheckpointId() <= id {
		tx := p.pending[0]
		if err := p.retry(fmt.Sprintf("commit the transaction of checkpoint %d", tx.GetCheckpointId()),
			func() error { return p.sink.Commit(p.ctx, tx.GetHandle()) }); err != nil {
			return err
		}
		p.pending = p.pending[1:]
	}
	return nil
}

// retry calls f up to CommitRetries times, pausing in between, and returns
// an error wrapping ErrCommit and f's last error if none succeeded.
func (p *twoPhaseInstance[T]) retry(what string, f func() error) error {
	pause := CommitBackoff
	var err error
	for try := 1; ; try++ {
		if err = f(); err == nil {
			return nil
		}
		if try == CommitRetries || p.ctx.Err() != nil {
			break
		}
		select {
		case <-time.After(pause):
		case <-p.ctx.Done():
		}
		pause *= 2
	}
	return fmt.Errorf("%w: task %s: %s (%d tries): %w", ErrCommit, p.task, what, CommitRetries, err)
}

func (p *twoPhaseInstance[T]) EndOfInput() error { return nil }

func (p *twoPhaseInstance[T]) Close() error { return p.sink.Close() }

type incarnationKey struct{}

// WithIncarnation returns ctx carrying epoch as the incarnation of the task
// it runs (see Incarnation). The runtime sets it for the calls of a
// TwoPhaseSink; tests of a sink set it themselves.
func WithIncarnation(ctx context.Context, epoch uint64) context.Context {
	return context.WithValue(ctx, incarnationKey{}, epoch)
}

// Incarnation returns the epoch of the task incarnation that calls a
// TwoPhaseSink with ctx, 0 if unknown. Epochs grow with every restore of
// the job, and across the instances that hold the job one after another, so
// two incarnations of one task that run at once (a paused process that
// wakes up after another took over, a worker that ran a placement already
// replaced) have different epochs, the newer one the higher. A sink fences
// the older one with it: it names what an incarnation writes by its epoch,
// and Recover cleans up only what older incarnations left, never what a
// newer one wrote (see package filesink).
func Incarnation(ctx context.Context) uint64 {
	e, _ := ctx.Value(incarnationKey{}).(uint64)
	return e
}
