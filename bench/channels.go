package main

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/snapflow/snapflow/bench/baseline"
	"github.com/snapflow/snapflow/internal/benchwork"
)

// runChannels is the Go-channels baseline: the paritysum shape and work of
// baseline.RunProtoactor (one source, cfg.Parallelism keyed workers, one
// sink, batches flushed when full or after the linger) as plain goroutines
// and channels, the practical limit of the runtime.
//
// Each source-to-worker channel holds cfg.Credits batches; the workers share
// one channel of cfg.Parallelism*cfg.Credits batches to the sink, so that as
// many batches are in flight as under per-channel credits. Consumed batches
// go back to their sender through free lists, as credits carry them back in
// the actor pipeline.
//
// It runs until cfg.Records records have reached the sink or, when
// cfg.Records is 0, until ctx is done (the source stops and the pipeline
// drains). Every goroutine has ended when it returns.
func runChannels(ctx context.Context, cfg baseline.Config) (baseline.Result, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return baseline.Result{}, err
	}
	p := cfg.Parallelism
	ins := make([]chan []benchwork.Record, p)
	freeIns := make([]chan []benchwork.Record, p)
	for i := range p {
		ins[i] = make(chan []benchwork.Record, cfg.Credits)
		freeIns[i] = make(chan []benchwork.Record, cfg.Credits+2)
	}
	out := make(chan []benchwork.Output, p*cfg.Credits)
	freeOut := make(chan []benchwork.Output, p*(cfg.Credits+2))
	sums := make([]map[uint64]uint64, p)

	var all, workers sync.WaitGroup
	all.Go(func() { chanSource(ctx, cfg, ins, freeIns) })
	for i := range p {
		sums[i] = make(map[uint64]uint64)
		workers.Go(func() { chanWorker(cfg, sums[i], ins[i], freeIns[i], out, freeOut) })
	}
	all.Go(func() { workers.Wait(); close(out) })

	meter := baseline.NewMeter()
	tss := make([]int64, 0, cfg.BatchSize)
	for b := range out {
		tss = tss[:0]
		for _, o := range b {
			tss = append(tss, o.TS)
		}
		meter.Observe(time.Now().UnixNano(), tss)
		recycle(freeOut, b)
	}
	all.Wait()
	merged := make(map[uint64]uint64)
	for _, s := range sums {
		maps.Copy(merged, s) // the workers' keys are disjoint
	}
	res := meter.Result(merged)
	if cfg.Records > 0 && res.Records < cfg.Records {
		return res, fmt.Errorf("bench: channels: stopped after %d of %d records: %w", res.Records, cfg.Records, context.Cause(ctx))
	}
	return res, nil
}

// chanSource generates records a batch at a time (one clock read per batch),
// partitions them over ins, and closes ins at the end. Partly filled batches
// are sent once the oldest has waited cfg.Linger.
func chanSource(ctx context.Context, cfg baseline.Config, ins []chan []benchwork.Record, free []chan []benchwork.Record) {
	gen := benchwork.NewGenerator(cfg.Keys, cfg.RecordSize)
	buf := make([]benchwork.Record, cfg.BatchSize)
	cur := make([][]benchwork.Record, len(ins))
	for i := range cur {
		cur[i] = take(free[i], cfg.BatchSize)
	}
	var lingerAt int64 // when partly filled batches must go (0: none waits)
	flush := func() {
		for i, b := range cur {
			if len(b) > 0 {
				ins[i] <- b
				cur[i] = take(free[i], cfg.BatchSize)
			}
		}
		lingerAt = 0
	}
	wake := time.NewTimer(time.Hour)
	wake.Stop()
	defer wake.Stop()
	var next uint64
	var t0 int64
	for cfg.Records == 0 || next < uint64(cfg.Records) {
		select {
		case <-ctx.Done():
			flush()
			closeAll(ins)
			return
		default:
		}
		now := time.Now().UnixNano()
		if lingerAt != 0 && now >= lingerAt {
			flush()
		}
		if cfg.Rate > 0 {
			if next == 0 {
				t0 = now
			}
			if due := t0 + int64(float64(next)*1e9/cfg.Rate); now < due {
				if lingerAt != 0 {
					due = min(due, lingerAt)
				}
				wake.Reset(time.Duration(due - now))
				select {
				case <-wake.C:
				case <-ctx.Done():
					wake.Stop()
				}
				continue
			}
		}
		n := uint64(cfg.BatchSize)
		if cfg.Records > 0 {
			n = min(n, uint64(cfg.Records)-next)
		}
		gen.Fill(buf[:n], next, now)
		next += n
		for _, r := range buf[:n] {
			i := benchwork.Partition(r.Key, len(ins))
			cur[i] = append(cur[i], r)
			if len(cur[i]) == cfg.BatchSize {
				ins[i] <- cur[i]
				cur[i] = take(free[i], cfg.BatchSize)
			}
		}
		if lingerAt == 0 && dirty(cur) {
			lingerAt = now + int64(cfg.Linger)
		}
	}
	flush()
	closeAll(ins)
}

// chanWorker adds every record of in into its key's sum and emits the running
// sums to out, until in is closed.
func chanWorker(cfg baseline.Config, sums map[uint64]uint64, in <-chan []benchwork.Record, freeIn chan<- []benchwork.Record,
	out chan<- []benchwork.Output, freeOut chan []benchwork.Output) {
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	defer linger.Stop()
	armed := false
	cur := take(freeOut, cfg.BatchSize)
	for {
		select {
		case b, ok := <-in:
			if !ok {
				if len(cur) > 0 {
					out <- cur
				}
				return
			}
			for _, r := range b {
				sum := benchwork.Add(sums[r.Key], r)
				sums[r.Key] = sum
				cur = append(cur, benchwork.Output{Key: r.Key, Sum: sum, TS: r.TS})
				if len(cur) == cfg.BatchSize {
					out <- cur
					cur = take(freeOut, cfg.BatchSize)
				}
			}
			recycle(freeIn, b)
			if !armed && len(cur) > 0 {
				armed = true
				linger.Reset(cfg.Linger)
			}
		case <-linger.C:
			armed = false
			if len(cur) > 0 {
				out <- cur
				cur = take(freeOut, cfg.BatchSize)
			}
		}
	}
}

// take returns an empty batch from free, or a new one.
func take[T any](free <-chan []T, size int) []T {
	select {
	case b := <-free:
		return b
	default:
		return make([]T, 0, size)
	}
}

// recycle gives b back to its sender, or drops it when the free list is full.
func recycle[T any](free chan<- []T, b []T) {
	select {
	case free <- b[:0]:
	default:
	}
}

func dirty(cur [][]benchwork.Record) bool {
	for _, b := range cur {
		if len(b) > 0 {
			return true
		}
	}
	return false
}

func closeAll(ins []chan []benchwork.Record) {
	for _, in := range ins {
		close(in)
	}
}
