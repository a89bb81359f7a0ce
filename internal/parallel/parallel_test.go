package parallel

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// TestForBoundsAndStops: every index runs once, never more than width at
// once; the first error is returned and no call starts after it.
func TestForBoundsAndStops(t *testing.T) {
	var in, peak atomic.Int32
	seen := make([]atomic.Int32, 100)
	err := For(t.Context(), 100, 3, func(ctx context.Context, i int) error {
		n := in.Add(1)
		defer in.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		seen[i].Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range seen {
		if seen[i].Load() != 1 {
			t.Fatalf("index %d ran %d times", i, seen[i].Load())
		}
	}
	if peak.Load() > 3 {
		t.Errorf("%d calls at once, want at most 3", peak.Load())
	}
	boom := errors.New("boom")
	var calls atomic.Int32
	err = For(t.Context(), 1000, 1, func(ctx context.Context, i int) error {
		calls.Add(1)
		if i == 5 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls.Load() != 6 {
		t.Errorf("For = %v after %d calls, want boom after 6", err, calls.Load())
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := For(ctx, 10, 2, func(context.Context, int) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("For with a done context = %v, want context.Canceled", err)
	}
}
