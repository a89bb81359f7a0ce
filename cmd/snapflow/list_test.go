package main

import (
	"fmt"
	"slices"
	"testing"

	"github.com/snapflow/snapflow/snapshots"
)

func TestList(t *testing.T) {
	for _, tc := range []struct {
		name string
		new  func(*testing.T, string) *fixture
	}{{"dir", newDirFixture}, {"mem", newMemFixture}} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.new(t, "wc")
			for _, args := range [][]string{
				{"checkpoints", "list", "--store", f.url},                // the only job
				{"checkpoints", "list", "--store", f.url, "--job", "wc"}, // named
				{"checkpoints", "list", "-job=wc", "-store=" + f.url},    // single dash, any order
			} {
				r := runCLI(args...)
				r.want(t, exitOK)
				want := [][]string{
					{"1", "2026-03-01T10:00:01Z", "3", fmt.Sprint(f.bytes(1)), fmt.Sprint(f.bytes(1)), "complete"},
					{"2", "2026-03-01T10:00:02Z", "3", fmt.Sprint(f.bytes(2)), fmt.Sprint(f.bytes(2)), "complete"},
					{"3", "-", "1", "-", "-", "incomplete"},
				}
				if got := rows(t, r.stdout, checkpointsHeader); !slices.EqualFunc(got, want, slices.Equal) {
					t.Errorf("%q printed\n%s\nwant the fields %q", args, r.stdout, want)
				}
				if r.stderr != "" {
					t.Errorf("%q wrote to stderr: %s", args, r.stderr)
				}
			}
		})
	}
}

func TestListAscendingBeyondNine(t *testing.T) {
	f := newDirFixture(t, "wc")
	for _, id := range []uint64{10, 100} {
		f.putState(t, id, "source#0", "source", 0)
	}
	r := runCLI("checkpoints", "list", "--store", f.url)
	r.want(t, exitOK)
	var ids []string
	for _, l := range rows(t, r.stdout, checkpointsHeader) {
		ids = append(ids, l[0])
	}
	if want := []string{"1", "2", "3", "10", "100"}; !slices.Equal(ids, want) {
		t.Errorf("ids %q, want %q", ids, want)
	}
}

func TestListCorruptManifest(t *testing.T) {
	f := newDirFixture(t, "wc")
	key := snapshots.ManifestKey("wc", 2)
	if err := f.store.Put(t.Context(), key, []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	r := runCLI("checkpoints", "list", "--store", f.url)
	r.want(t, exitOK, "snapflow: warning: checkpoint 2: ", key)
	if got := rows(t, r.stdout, checkpointsHeader); len(got) != 3 || !slices.Equal(got[1], []string{"2", "-", "-", "-", "-", "corrupt"}) {
		t.Errorf("printed\n%s\nwant checkpoint 2 listed as corrupt", r.stdout)
	}
}
