package parallel

import (
	"context"
	"sync"
)

// For calls fn for 0..n-1, at most width at once (at least 1), and returns
// the first error fn returned, after which it starts no more calls and
// cancels the context the others got; or ctx's error if it ended first.
func For(ctx context.Context, n, width int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for range min(n, max(width, 1)) {
		wg.Go(func() {
			for i := range next {
				if ctx.Err() != nil {
					continue // drain: a call failed, or ctx ended
				}
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					cancel()
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
