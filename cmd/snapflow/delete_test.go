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
	for _, l := range rows(t, r.stdout, checkpointsHeader) {
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
		{"incomplete", []string{"3"}, []string{"1", "2"}, "deleted incomplete checkpoint 3 of job wc (1 object)\n"},
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
		"refusing to delete checkpoint 1 of job wc: recovery would restore it, because no newer complete checkpoint is usable")
	runCLI("checkpoints", "delete", "--store", f.url, "2").want(t, exitFailed, "newest complete")
	runCLI("checkpoints", "delete", "--store", f.url, "--force", "2").want(t, exitOK)
	if got := ids(t, f); !slices.Equal(got, []string{"1", "3"}) {
		t.Errorf("left %q", got)
	}
}

// A newer checkpoint whose manifest reads but whose state does not verify
// is unusable too: recovery would fall back to checkpoint 1, so deleting
// it is refused.
func TestDeleteKeepsTheFallbackOfAnUnusableNewest(t *testing.T) {
	f := newDirFixture(t, "wc")
	if err := f.store.Put(t.Context(), snapshots.StateKey("wc", 2, "sum#1"), []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	runCLI("checkpoints", "delete", "--store", f.url, "1").want(t, exitFailed,
		"refusing to delete checkpoint 1 of job wc: recovery would restore it, because no newer complete checkpoint is usable",
		"recovery would start the job from scratch")
	runCLI("checkpoints", "delete", "--store", f.url, "2").want(t, exitFailed, "newest complete",
		"recovery would fall back to the older checkpoint 1")
	if got := ids(t, f); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Errorf("left %q", got)
	}
}

// TestDeleteLatest checks that latest names the newest complete
// checkpoint, which is refused without --force like any other.
func TestDeleteLatest(t *testing.T) {
	f := newDirFixture(t, "wc")
	r := runCLI("checkpoints", "delete", "--store", f.url, "latest")
	r.want(t, exitFailed, "snapflow: latest is checkpoint 2 of job wc\n",
		"refusing to delete checkpoint 2 of job wc: it is the newest complete checkpoint")
	r = runCLI("checkpoints", "delete", "--store", f.url, "--force", "latest")
	r.want(t, exitOK, "snapflow: latest is checkpoint 2 of job wc\n")
	if r.stdout != "deleted checkpoint 2 of job wc (4 objects)\n" {
		t.Errorf("printed %q", r.stdout)
	}
	if got := ids(t, f); !slices.Equal(got, []string{"1", "3"}) {
		t.Errorf("left %q", got)
	}
	// Now latest is checkpoint 1, the incomplete 3 notwithstanding.
	runCLI("checkpoints", "delete", "--store", f.url, "--force", "latest").want(t, exitOK, "latest is checkpoint 1 of job wc")
	runCLI("checkpoints", "delete", "--store", f.url, "--force", "latest").want(t, exitNotFound,
		"snapflow: job wc has no complete checkpoint, so no latest one")
	if got := ids(t, f); !slices.Equal(got, []string{"3"}) {
		t.Errorf("left %q", got)
	}
}
