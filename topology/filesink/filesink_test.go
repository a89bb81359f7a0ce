package filesink

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/topology"
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
	if err := os.Remove(filepath.Join(dir, tempName(0, 0, 0))); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, h); err == nil || !strings.Contains(err.Error(), "its records would be lost") {
		t.Errorf("commit of a lost transaction: %v", err)
	}
	if err := newTestSink(t, dir, 0).Recover(ctx, 1, [][]byte{h}, nil); err == nil {
		t.Error("recovering a lost transaction succeeded")
	}
}

// TestIncarnations: what an incarnation writes is named by its epoch; a
// stale incarnation (a lower epoch than one that wrote here) refuses to
// recover and touches nothing; a newer one commits what its checkpoint
// pre-committed and deletes only older incarnations' in-progress files.
func TestIncarnations(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := newTestSink(t, dir, 0)
	e2 := topology.WithIncarnation(ctx, 2)
	if err := live.Recover(e2, 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	txn, _ := live.Begin(e2, 0)
	if err := live.Write(e2, txn, []int{1, 2}); err != nil {
		t.Fatal(err)
	}
	pre, err := live.PreCommit(e2, txn)
	if err != nil {
		t.Fatal(err)
	}
	open, _ := live.Begin(e2, 1)
	if err := live.Write(e2, open, []int{3}); err != nil {
		t.Fatal(err)
	}
	if _, err := live.PreCommit(e2, open); err != nil { // closes its file
		t.Fatal(err)
	}
	before := names(t, dir)
	want := []string{".part-00000-0000000000.e2.inprogress", ".part-00000-0000000001.e2.inprogress"}
	if !slices.Equal(before, want) {
		t.Fatalf("in-progress files %v, want %v", before, want)
	}

	stale := newTestSink(t, dir, 0)
	if err := stale.Recover(topology.WithIncarnation(ctx, 1), 0, nil, nil); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("a stale incarnation's Recover: %v, want ErrSuperseded", err)
	}
	if got := names(t, dir); !slices.Equal(got, want) {
		t.Fatalf("a stale incarnation changed the directory: %v, want %v", got, want)
	}

	next := newTestSink(t, dir, 0)
	if err := next.Recover(topology.WithIncarnation(ctx, 3), 1, [][]byte{pre}, open); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{FinalName(0, 0)}) {
		t.Fatalf("after the newer incarnation's Recover: %v", got)
	}
	data, err := os.ReadFile(filepath.Join(dir, FinalName(0, 0)))
	if err != nil || string(data) != "1\n2\n" {
		t.Fatalf("committed part: %q, %v", data, err)
	}
	h, _ := next.Begin(topology.WithIncarnation(ctx, 3), 1)
	if x, _ := parseHandle(h); x.seq != 2 || x.epoch != 3 {
		t.Errorf("next transaction %+v, want seq 2 of epoch 3", x)
	}
}

// TestCommitNeverReplaces: a commit never takes a part file's name from a
// file of another size; one of a handle of an earlier version (16 bytes,
// no epoch) commits its unnumbered in-progress file.
func TestCommitNeverReplaces(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newTestSink(t, dir, 0)
	if err := os.WriteFile(filepath.Join(dir, tempName(0, 4, 0)), []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	legacy := txn{seq: 4, size: 2}.handle()[:16]
	if err := s.Commit(ctx, legacy); err != nil {
		t.Fatalf("commit of a 16-byte handle: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, FinalName(0, 4))); err != nil || string(data) != "7\n" {
		t.Fatalf("committed part: %q, %v", data, err)
	}
	if err := os.WriteFile(filepath.Join(dir, tempName(0, 4, 5)), []byte("other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := s.Commit(ctx, txn{seq: 4, size: 6, epoch: 5}.handle())
	if err == nil || !strings.Contains(err.Error(), "another incarnation") {
		t.Fatalf("commit onto another file's name: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, FinalName(0, 4))); string(data) != "7\n" {
		t.Fatalf("the part file was replaced: %q", data)
	}
}
