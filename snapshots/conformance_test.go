package snapshots_test

import (
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/snapshots/snapshotstest"
)

func TestDir(t *testing.T) {
	snapshotstest.Run(t, func(t *testing.T) snapshots.Store {
		s, err := snapshots.NewDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestMem(t *testing.T) {
	snapshotstest.Run(t, func(*testing.T) snapshots.Store { return snapshots.NewMem() })
}

// TestOpenConformance runs the suite on stores opened by URL.
func TestOpenConformance(t *testing.T) {
	for _, scheme := range []string{"file://", "mem://"} {
		t.Run(scheme, func(t *testing.T) {
			snapshotstest.Run(t, func(t *testing.T) snapshots.Store {
				u := (&url.URL{Scheme: "file", Path: t.TempDir()}).String()
				if scheme == "mem://" {
					u = fmt.Sprintf("mem://%s-%d", sanitize(t.Name()), memSeq.Add(1)) // unique, so empty
				}
				s, err := snapshots.Open(t.Context(), u)
				if err != nil {
					t.Fatal(err)
				}
				return s
			})
		})
	}
}

// memSeq makes named memory stores unique across -count runs.
var memSeq atomic.Int64

func sanitize(name string) string {
	b := []byte(name)
	for i, c := range b {
		if c == '/' || c == '?' || c == '#' {
			b[i] = '_'
		}
	}
	return string(b)
}
