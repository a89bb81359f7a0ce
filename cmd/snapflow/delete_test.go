package main

import (
	"slices"
	"testing"

	"github.com/snapflow/snapflow/snapshots"
)

// ids returns the ids that list prints.
func ids(t *testing.T, f *fixture) []string {
	t.Helper()
	r := runCLI("checkpoints", "list", "--store", f.url)
	r.want(t, exitOK)
	var out []string
	for _, l := range lines(r.stdout) {
		out = append(out, l[0])
	}
	return out
}

func TestDelete(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		left []string
		out  string
	}{
		{"old", []string{"1"}, []string{"2", "3"}, "deleted checkpoint 1 of job wc (4 objects)\n"},
		{"incomplete", []string{"3"}, []string{"1", "2"}, "deleted checkpoint 3 of job wc (1 objects)\n"},
		{"newest complete forced", []string{"--force", "2"}, []string{"1", "3"}, "deleted checkpoint 2 of job wc (4 objects)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newDirFixture(t, "wc")
			r := runCLI(append([]string{"checkpoints", "delete", "--store", f.url, "--job", "wc"}, tc.args...)...)
			r.want(t, exitOK)
			if r.stdout != tc.out || r.stderr != "" {
				t.Errorf("printed %q, stderr %q; want %q", r.stdout, r.stderr, tc.out)
			}
			if got := ids(t, f); !slices.Equal(got, tc.left) {
				t.Errorf("left %q, want %q", got, tc.left)
			}
		})
	}
}

func TestDeleteRefusesNewestComplete(t *testing.T) {
	f := newDirFixture(t, "wc")
	r := runCLI("checkpoints", "delete", "--store", f.url, "2")
	r.want(t, exitFailed,
		"snapflow: refusing to delete checkpoint 2 of job wc: it is the newest complete checkpoint, the one recovery would restore",
		"recovery would fall back to the older checkpoint 1", "--force")
	if len(f.keys(t, 2)) != 4 {
		t.Errorf("checkpoint 2 lost objects: %q", f.keys(t, 2))
	}
	// With 1 gone there is nothing to fall back to.
	runCLI("checkpoints", "delete", "--store", f.url, "1").want(t, exitOK)
	runCLI("checkpoints", "delete", "--store", f.url, "2").want(t, exitFailed, "recovery would start the job from scratch")
}

// When the newest manifest is corrupt, recovery falls back to the one
// before, so that one is kept too; the corrupt one can be deleted with
// --force.
func TestDeleteKeepsTheFallbackOfACorruptNewest(t *testing.T) {
	f := newDirFixture(t, "wc")
	if err := f.store.Put(t.Context(), snapshots.ManifestKey("wc", 2), []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	runCLI("checkpoints", "delete", "--store", f.url, "1").want(t, exitFailed,
		"refusing to delete checkpoint 1 of job wc: recovery would restore it, because every newer complete checkpoint has a corrupt manifest")
	runCLI("checkpoints", "delete", "--store", f.url, "2").want(t, exitFailed, "newest complete")
	runCLI("checkpoints", "delete", "--store", f.url, "--force", "2").want(t, exitOK)
	if got := ids(t, f); !slices.Equal(got, []string{"1", "3"}) {
		t.Errorf("left %q", got)
	}
}
