package main

import (
	"strings"
	"testing"

	"github.com/snapflow/snapflow/snapshots"
)

func TestVerify(t *testing.T) {
	f := newDirFixture(t, "wc")
	r := runCLI("checkpoints", "verify", "--store", f.url, "2")
	r.want(t, exitOK)
	got := lines(r.stdout)
	want := []string{snapshots.ManifestKey("wc", 2)}
	for _, e := range f.manifests[2].GetTasks() {
		want = append(want, e.GetState().GetKey())
	}
	if len(got) != len(want) {
		t.Fatalf("verify printed\n%s\nwant a line for each of %q", r.stdout, want)
	}
	for i, l := range got {
		if l[0] != "ok" || l[1] != want[i] {
			t.Errorf("line %d is %q, want ok %s", i+1, l, want[i])
		}
	}
	if r.stderr != "" {
		t.Errorf("stderr: %s", r.stderr)
	}
}

func TestVerifyFinds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damage  func(*testing.T, *fixture, string)
		problem string
	}{
		{"garbage", func(t *testing.T, f *fixture, key string) {
			if err := f.store.Put(t.Context(), key, []byte("garbage, not a task state")); err != nil {
				t.Fatal(err)
			}
		}, "corrupt object"},
		{"same-size garbage", func(t *testing.T, f *fixture, key string) {
			data, err := f.store.Get(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)-1] ^= 0xff
			if err := f.store.Put(t.Context(), key, data); err != nil {
				t.Fatal(err)
			}
		}, "crc32c"},
		{"missing", func(t *testing.T, f *fixture, key string) {
			if err := f.store.Delete(t.Context(), key); err != nil {
				t.Fatal(err)
			}
		}, "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newDirFixture(t, "wc")
			bad := f.manifests[2].GetTasks()[1].GetState().GetKey()
			tc.damage(t, f, bad)
			r := runCLI("checkpoints", "verify", "--store", f.url, "2")
			r.want(t, exitFailed, "snapflow: checkpoint 2 of job wc: 1 of 3 task states failed verification")
			fails := 0
			for l := range strings.Lines(r.stdout) {
				switch {
				case strings.HasPrefix(l, "FAIL  "+bad+" ") && strings.Contains(l, tc.problem):
					fails++
				case !strings.HasPrefix(l, "ok    "):
					t.Errorf("unexpected line %q", l)
				}
			}
			if fails != 1 || strings.Count(r.stdout, "\n") != 4 {
				t.Errorf("verify printed\n%s\nwant one FAIL line naming %s with %q, and ok for the rest", r.stdout, bad, tc.problem)
			}
			// The other checkpoint is untouched.
			runCLI("checkpoints", "verify", "--store", f.url, "1").want(t, exitOK)
		})
	}
}

func TestVerifyCorruptManifest(t *testing.T) {
	f := newDirFixture(t, "wc")
	key := snapshots.ManifestKey("wc", 1)
	if err := f.store.Put(t.Context(), key, []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	r := runCLI("checkpoints", "verify", "--store", f.url, "1")
	r.want(t, exitFailed, "the manifest does not verify")
	if !strings.HasPrefix(r.stdout, "FAIL  "+key+": ") {
		t.Errorf("printed %q, want a FAIL line for %s", r.stdout, key)
	}
}

func TestVerifyIncomplete(t *testing.T) {
	f := newDirFixture(t, "wc")
	runCLI("checkpoints", "verify", "--store", f.url, "3").want(t, exitFailed, "checkpoint 3 of job wc is incomplete")
}

func TestVerifyLatest(t *testing.T) {
	f := newDirFixture(t, "wc")
	r := runCLI("checkpoints", "verify", "--store", f.url, "latest")
	r.want(t, exitOK, "snapflow: latest is checkpoint 2 of job wc\n")
	if got := lines(r.stdout); len(got) != 4 || got[0][1] != snapshots.ManifestKey("wc", 2) {
		t.Errorf("verify latest printed\n%s\nwant checkpoint 2's 4 objects", r.stdout)
	}
	// latest is the checkpoint a recovery would restore: past a newest one
	// that does not verify, which verify by id shows.
	key := snapshots.StateKey("wc", 2, "sum#0")
	if err := f.store.Put(t.Context(), key, []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	r = runCLI("checkpoints", "verify", "--store", f.url, "latest")
	r.want(t, exitOK, "latest is checkpoint 1 of job wc, the one a recovery would restore: the newer complete checkpoints up to 2 do not verify")
	r = runCLI("checkpoints", "verify", "--store", f.url, "2")
	r.want(t, exitFailed, "1 of 3 task states failed verification")
	if !strings.Contains(r.stdout, "FAIL  "+key) {
		t.Errorf("verify 2 printed\n%s\nwant a FAIL line for %s", r.stdout, key)
	}
	// None usable: no latest.
	if err := f.store.Put(t.Context(), snapshots.StateKey("wc", 1, "sum#0"), []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	runCLI("checkpoints", "verify", "--store", f.url, "latest").want(t, exitNotFound, "none a recovery could restore, so no latest one")
}
