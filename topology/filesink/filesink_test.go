package filesink

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func newTestSink(t *testing.T, dir string, subtask int) *sink[int] {
	t.Helper()
	return New(dir, Lines(strconv.Itoa))(subtask, 2).(*sink[int])
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestTransactionLifecycle: records are in a hidden in-progress file until
// the commit renames it; a commit is idempotent; an empty transaction
// leaves no file.
func TestTransactionLifecycle(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newTestSink(t, dir, 1)
	if err := s.Recover(ctx, 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	txn, _ := s.Begin(ctx, 0)
	if err := s.Write(ctx, txn, []int{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	h, err := s.PreCommit(ctx, txn)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{".part-00001-0000000000.inprogress"}) {
		t.Fatalf("after pre-commit: %v", got)
	}
	for range 2 { // idempotent
		if err := s.Commit(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, FinalName(1, 0)))
	if err != nil || string(data) != "1\n2\n3\n" {
		t.Fatalf("committed part: %q, %v", data, err)
	}
	empty, _ := s.Begin(ctx, 0)
	he, err := s.PreCommit(ctx, empty)
	if err != nil || s.Commit(ctx, he) != nil {
		t.Fatalf("an empty transaction: %v", err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{FinalName(1, 0)}) {
		t.Errorf("after an empty transaction: %v", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRecover: a restored task commits what its checkpoint pre-committed,
// deletes its other in-progress files (not other tasks'), and numbers its
// next transactions above every part file of its own.
func TestRecover(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newTestSink(t, dir, 0)
	if err := s.Recover(ctx, 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	var handles [][]byte
	for i := range 3 {
		txn, _ := s.Begin(ctx, 0)
		if err := s.Write(ctx, txn, []int{i}); err != nil {
			t.Fatal(err)
		}
		h, err := s.PreCommit(ctx, txn)
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, h)
	}
	open, _ := s.Begin(ctx, 0)
	if err := s.Write(ctx, open, []int{9}); err != nil {
		t.Fatal(err)
	}
	other := newTestSink(t, dir, 1)
	if err := other.Recover(ctx, 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	otxn, _ := other.Begin(ctx, 0)
	if err := other.Write(ctx, otxn, []int{7}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.PreCommit(ctx, otxn); err != nil {
		t.Fatal(err)
	}
	s.Close() // the task fails: transaction 0 committed, 1 pre-committed in the checkpoint, 2 after it, 3 open
	if err := s.Commit(ctx, handles[0]); err != nil {
		t.Fatal(err)
	}

	again := newTestSink(t, dir, 0)
	if err := again.Recover(ctx, 1, handles[:2], open); err != nil {
		t.Fatal(err)
	}
	got := names(t, dir)
	want := []string{".part-00001-0000000000.inprogress", FinalName(0, 0), FinalName(0, 1)}
	if !slices.Equal(got, want) {
		t.Fatalf("after recovery: %v, want %v", got, want)
	}
	if txn, _ := again.Begin(ctx, 0); txn == nil || again.seq != 4 {
		t.Errorf("next transaction %d, want 4: above every part file of the task", again.seq)
	}
}

// TestCommitOfALostTransaction: a pre-committed transaction whose file is
// gone is an error that says its records would be lost.
func TestCommitOfALostTransaction(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newTestSink(t, dir, 0)
	if err := s.Recover(ctx, 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	txn, _ := s.Begin(ctx, 0)
	if err := s.Write(ctx, txn, []int{1}); err != nil {
		t.Fatal(err)
	}
	h, err := s.PreCommit(ctx, txn)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, tempName(0, 0))); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, h); err == nil || !strings.Contains(err.Error(), "its records would be lost") {
		t.Errorf("commit of a lost transaction: %v", err)
	}
	if err := newTestSink(t, dir, 0).Recover(ctx, 1, [][]byte{h}, nil); err == nil {
		t.Error("recovering a lost transaction succeeded")
	}
}
