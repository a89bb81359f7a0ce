package filesink

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/snapflow/snapflow/topology"
)

// Encoder appends the bytes of one record to dst.
type Encoder[T any] func(dst []byte, v T) ([]byte, error)

// Lines returns an Encoder that writes format(v) and a newline per record.
func Lines[T any](format func(T) string) Encoder[T] {
	return func(dst []byte, v T) ([]byte, error) {
		return append(append(dst, format(v)...), '\n'), nil
	}
}

// New returns the constructor of the sink's tasks, for
// topology.TwoPhaseCommitSink, writing part files in dir (created if
// missing) with encode.
func New[T any](dir string, encode Encoder[T]) func(subtask, parallelism int) topology.TwoPhaseSink[T] {
	return func(subtask, _ int) topology.TwoPhaseSink[T] {
		return &sink[T]{dir: dir, encode: encode, subtask: subtask}
	}
}

// sink is one task's file sink.
type sink[T any] struct {
	dir     string
	encode  Encoder[T]
	subtask int
	next    uint64 // the seq of the next transaction
	epoch   uint64 // the task's incarnation (topology.Incarnation), from Recover

	// The open transaction: its seq, its in-progress file (nil until the
	// first record) and the bytes written.
	seq  uint64
	file *os.File
	w    *bufio.Writer
	size int64
	buf  []byte
}

// FinalName is the name of the part file of transaction seq of task
// subtask, once committed.
func FinalName(subtask int, seq uint64) string { return fmt.Sprintf("part-%05d-%010d", subtask, seq) }

// tempName is the name of the in-progress file of transaction seq that the
// incarnation epoch of task subtask writes: ".part-<subtask>-<seq>.e<epoch>.inprogress"
// (".part-<subtask>-<seq>.inprogress" for epoch 0, as earlier versions named
// every in-progress file).
func tempName(subtask int, seq, epoch uint64) string {
	if epoch == 0 {
		return "." + FinalName(subtask, seq) + ".inprogress"
	}
	return "." + FinalName(subtask, seq) + ".e" + strconv.FormatUint(epoch, 10) + ".inprogress"
}

// parseName returns the subtask and seq of a part file's name, committed
// or in progress, and for an in-progress file the epoch of the
// incarnation that wrote it.
func parseName(name string) (subtask int, seq, epoch uint64, inProgress, ok bool) {
	base := name
	if strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".inprogress") {
		base, inProgress = strings.TrimSuffix(name[1:], ".inprogress"), true
		if b, e, found := strings.Cut(base, ".e"); found {
			n, err := strconv.ParseUint(e, 10, 64)
			if err != nil || n == 0 {
				return 0, 0, 0, false, false
			}
			base, epoch = b, n
		}
	}
	rest, found := strings.CutPrefix(base, "part-")
	if !found {
		return 0, 0, 0, false, false
	}
	sub, sq, found := strings.Cut(rest, "-")
	if !found {
		return 0, 0, 0, false, false
	}
	s, err1 := strconv.Atoi(sub)
	q, err2 := strconv.ParseUint(sq, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, 0, false, false
	}
	return s, q, epoch, inProgress, true
}

// txn is a transaction, as its handle names it: its seq, the bytes
// pre-committed and the epoch of the incarnation that wrote it.
type txn struct {
	seq   uint64
	size  int64
	epoch uint64
}

// A transaction's handle is its seq, the bytes pre-committed and its
// incarnation's epoch (24 bytes; earlier versions wrote 16, without the
// epoch).
func (x txn) handle() []byte {
	h := binary.BigEndian.AppendUint64(nil, x.seq)
	h = binary.BigEndian.AppendUint64(h, uint64(x.size))
	return binary.BigEndian.AppendUint64(h, x.epoch)
}

func parseHandle(h []byte) (txn, error) {
	switch len(h) {
	case 16:
		return txn{seq: binary.BigEndian.Uint64(h), size: int64(binary.BigEndian.Uint64(h[8:]))}, nil
	case 24:
		return txn{seq: binary.BigEndian.Uint64(h), size: int64(binary.BigEndian.Uint64(h[8:])), epoch: binary.BigEndian.Uint64(h[16:])}, nil
	}
	return txn{}, fmt.Errorf("filesink: transaction handle of %d bytes, want 24", len(h))
}

// ErrSuperseded is wrapped by the error of Recover when a newer
// incarnation of the same task writes into the directory: this one is
// stale (its process was paused while the job moved on), and must not run.
var ErrSuperseded = errors.New("filesink: a newer incarnation of the task writes here")

// Recover commits the pending transactions, deletes the in-progress files
// that older incarnations of this task left, and numbers the next
// transactions above every part file of this task. It refuses to run,
// touching nothing, when a newer incarnation of the task has written an
// in-progress file (ErrSuperseded).
func (s *sink[T]) Recover(ctx context.Context, _ uint64, pending [][]byte, _ []byte) error {
	s.epoch = topology.Incarnation(ctx)
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("filesink: %w", err)
	}
	stale, err := s.scan()
	if err != nil {
		return err
	}
	for _, h := range pending {
		if err := s.Commit(ctx, h); err != nil {
			return err
		}
	}
	for _, name := range stale { // no checkpoint holds them pre-committed: their records are replayed
		if err := os.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("filesink: abort %s: %w", name, err)
		}
	}
	if len(stale) > 0 {
		return syncDir(s.dir)
	}
	return nil
}

// scan numbers the next transaction above every part file of this task, and
// returns the in-progress files of its older incarnations, oldest first
// (all of them when the incarnation is unknown). A pending transaction's
// file is among them: Commit renames it before Recover deletes the rest.
func (s *sink[T]) scan() (stale []string, err error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("filesink: %w", err)
	}
	for _, e := range entries {
		sub, seq, epoch, inProgress, ok := parseName(e.Name())
		if !ok || sub != s.subtask {
			continue
		}
		s.next = max(s.next, seq+1)
		switch {
		case !inProgress:
		case s.epoch != 0 && epoch > s.epoch:
			return nil, fmt.Errorf("%w: %s is of epoch %d, this task runs epoch %d: this incarnation is stale, and leaves the directory alone",
				ErrSuperseded, e.Name(), epoch, s.epoch)
		default:
			stale = append(stale, e.Name())
		}
	}
	return stale, nil
}

// Begin opens transaction next; its file is created with its first record.
func (s *sink[T]) Begin(context.Context, uint64) ([]byte, error) {
	s.seq, s.file, s.w, s.size = s.next, nil, nil, 0
	s.next++
	return txn{seq: s.seq, epoch: s.epoch}.handle(), nil
}

// Write appends the records to the open transaction's in-progress file.
func (s *sink[T]) Write(_ context.Context, h []byte, records []T) error {
	if x, err := parseHandle(h); err != nil || x.seq != s.seq {
		return fmt.Errorf("filesink: write to transaction %x, which is not the open one (%d)", h, s.seq)
	}
	if s.file == nil {
		f, err := os.OpenFile(filepath.Join(s.dir, tempName(s.subtask, s.seq, s.epoch)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("filesink: %w", err)
		}
		s.file, s.w = f, bufio.NewWriterSize(f, 1<<16)
	}
	for _, v := range records {
		var err error
		if s.buf, err = s.encode(s.buf[:0], v); err != nil {
			return fmt.Errorf("filesink: encode a record: %w", err)
		}
		n, err := s.w.Write(s.buf)
		s.size += int64(n)
		if err != nil {
			return fmt.Errorf("filesink: write %s: %w", tempName(s.subtask, s.seq, s.epoch), err)
		}
	}
	return nil
}

// PreCommit flushes, fsyncs and closes the open transaction's file, and
// returns its handle with its size.
func (s *sink[T]) PreCommit(_ context.Context, h []byte) ([]byte, error) {
	x, err := parseHandle(h)
	if err != nil || x.seq != s.seq {
		return nil, fmt.Errorf("filesink: pre-commit transaction %x, which is not the open one (%d)", h, s.seq)
	}
	if s.file != nil {
		f := s.file
		s.file = nil
		err := errors.Join(s.w.Flush(), f.Sync(), f.Close())
		if err != nil {
			return nil, fmt.Errorf("filesink: pre-commit %s: %w", tempName(s.subtask, s.seq, s.epoch), err)
		}
	}
	return txn{seq: s.seq, size: s.size, epoch: s.epoch}.handle(), nil
}

// Commit gives the transaction's file its final name, which it never takes
// from another file: it links the in-progress file there, and removes the
// in-progress name after. A transaction already committed (its final file
// there with its size) or without records is done; one whose file is in
// neither place, or whose final name another file of another size holds
// (an incarnation that ran at the same time, and was fenced), is an error.
func (s *sink[T]) Commit(_ context.Context, h []byte) error {
	x, err := parseHandle(h)
	if err != nil {
		return err
	}
	if x.size == 0 {
		return nil
	}
	name := FinalName(s.subtask, x.seq)
	final, temp := filepath.Join(s.dir, name), filepath.Join(s.dir, tempName(s.subtask, x.seq, x.epoch))
	err = os.Link(temp, final)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrExist):
		if fi, serr := os.Stat(final); serr != nil || fi.Size() != x.size {
			return fmt.Errorf("filesink: commit %s: another file of another size holds its name: another incarnation of the task wrote it", name)
		}
	case errors.Is(err, fs.ErrNotExist):
		if fi, serr := os.Stat(final); serr == nil && fi.Size() == x.size {
			return nil // committed before
		}
		return fmt.Errorf("filesink: commit %s: neither its in-progress file nor its part file of %d bytes is there: its records would be lost", name, x.size)
	default:
		return fmt.Errorf("filesink: commit %s: %w", name, err)
	}
	if err := os.Remove(temp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("filesink: commit %s: %w", name, err)
	}
	return syncDir(s.dir)
}

// Close closes the open transaction's file, if any, without committing it:
// the next Recover deletes it.
func (s *sink[T]) Close() error {
	if s.file == nil {
		return nil
	}
	f := s.file
	s.file = nil
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("filesink: %w", err)
	}
	return errors.Join(d.Sync(), d.Close())
}
