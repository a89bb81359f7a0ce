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

func tempName(subtask int, seq uint64) string { return "." + FinalName(subtask, seq) + ".inprogress" }

// parseName returns the subtask and seq of a part file's name, committed
// or in progress.
func parseName(name string) (subtask int, seq uint64, inProgress, ok bool) {
	base := name
	if strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".inprogress") {
		base, inProgress = strings.TrimSuffix(name[1:], ".inprogress"), true
	}
	rest, found := strings.CutPrefix(base, "part-")
	if !found {
		return 0, 0, false, false
	}
	sub, sq, found := strings.Cut(rest, "-")
	if !found {
		return 0, 0, false, false
	}
	s, err1 := strconv.Atoi(sub)
	q, err2 := strconv.ParseUint(sq, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false, false
	}
	return s, q, inProgress, true
}

// A transaction's handle is its seq and the bytes pre-committed.
func handle(seq uint64, size int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, seq), uint64(size))
}

func parseHandle(h []byte) (seq uint64, size int64, err error) {
	if len(h) != 16 {
		return 0, 0, fmt.Errorf("filesink: transaction handle of %d bytes, want 16", len(h))
	}
	return binary.BigEndian.Uint64(h), int64(binary.BigEndian.Uint64(h[8:])), nil
}

// Recover commits the pending transactions, deletes every other in-progress
// file of this task, and numbers the next transactions above every part
// file of this task.
func (s *sink[T]) Recover(ctx context.Context, _ uint64, pending [][]byte, _ []byte) error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("filesink: %w", err)
	}
	for _, h := range pending {
		if err := s.Commit(ctx, h); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("filesink: %w", err)
	}
	removed := false
	for _, e := range entries {
		sub, seq, inProgress, ok := parseName(e.Name())
		if !ok || sub != s.subtask {
			continue
		}
		s.next = max(s.next, seq+1)
		if inProgress { // no checkpoint holds it pre-committed: its records are replayed
			if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("filesink: abort %s: %w", e.Name(), err)
			}
			removed = true
		}
	}
	if removed {
		return syncDir(s.dir)
	}
	return nil
}

// Begin opens transaction next; its file is created with its first record.
func (s *sink[T]) Begin(context.Context, uint64) ([]byte, error) {
	s.seq, s.file, s.w, s.size = s.next, nil, nil, 0
	s.next++
	return handle(s.seq, 0), nil
}

// Write appends the records to the open transaction's in-progress file.
func (s *sink[T]) Write(_ context.Context, txn []byte, records []T) error {
	if seq, _, err := parseHandle(txn); err != nil || seq != s.seq {
		return fmt.Errorf("filesink: write to transaction %x, which is not the open one (%d)", txn, s.seq)
	}
	if s.file == nil {
		f, err := os.OpenFile(filepath.Join(s.dir, tempName(s.subtask, s.seq)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
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
			return fmt.Errorf("filesink: write %s: %w", tempName(s.subtask, s.seq), err)
		}
	}
	return nil
}

// PreCommit flushes, fsyncs and closes the open transaction's file, and
// returns its handle with its size.
func (s *sink[T]) PreCommit(_ context.Context, txn []byte) ([]byte, error) {
	seq, _, err := parseHandle(txn)
	if err != nil || seq != s.seq {
		return nil, fmt.Errorf("filesink: pre-commit transaction %x, which is not the open one (%d)", txn, s.seq)
	}
	if s.file != nil {
		f := s.file
		s.file = nil
		err := errors.Join(s.w.Flush(), f.Sync(), f.Close())
		if err != nil {
			return nil, fmt.Errorf("filesink: pre-commit %s: %w", tempName(s.subtask, s.seq), err)
		}
	}
	return handle(s.seq, s.size), nil
}

// Commit renames the transaction's file to its final name. A transaction
// already committed (its final file there with its size) or without
// records is done; one whose file is in neither place is an error.
func (s *sink[T]) Commit(_ context.Context, txn []byte) error {
	seq, size, err := parseHandle(txn)
	if err != nil {
		return err
	}
	if size == 0 {
		return nil
	}
	final := filepath.Join(s.dir, FinalName(s.subtask, seq))
	err = os.Rename(filepath.Join(s.dir, tempName(s.subtask, seq)), final)
	switch {
	case err == nil:
		return syncDir(s.dir)
	case errors.Is(err, fs.ErrNotExist):
		if fi, serr := os.Stat(final); serr == nil && fi.Size() == size {
			return nil // committed before
		}
		return fmt.Errorf("filesink: commit %s: neither its in-progress file nor its part file of %d bytes is there: its records would be lost", FinalName(s.subtask, seq), size)
	}
	return fmt.Errorf("filesink: commit %s: %w", FinalName(s.subtask, seq), err)
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
