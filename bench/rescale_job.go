package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/snapflow/snapflow/internal/benchwork"
	"github.com/snapflow/snapflow/topology"
)

// rescaleMaxParallelism is the max parallelism (key groups) of the rescale
// sweep's job: buildJob's for the parallelisms it uses.
const rescaleMaxParallelism = 128

// rescaleGraph is the rescale sweep's job: one source task that emits one
// record per key (keys 0..keys-1) and then idles, the keyed sum at
// parallelism par, which stores blob bytes for each key on its first
// record (sumStage), and a sink that calls filled once every key's record
// has reached it. Started from a savepoint of itself, its source resumes
// past its last record and idles: the restored job does nothing but restore.
func rescaleGraph(job string, par int, keys uint64, blob int, filled func()) *topology.Graph {
	g := topology.New(job, topology.MaxParallelism(rescaleMaxParallelism))
	gen := benchwork.NewGenerator(keys, 16)
	src := topology.FromSource(g, "source", func(int, int) topology.Source[benchwork.Record] {
		return &fillSource{gen: gen}
	}, topology.Parallelism(1))
	sums := sumStage(topology.KeyBy(src, recordKey), "sum", par, rowConfig{StateSize: blob}, &probe{})
	var seen atomic.Uint64
	var once sync.Once
	topology.Sink(sums, "sink", func(benchwork.Output) error {
		if seen.Add(1) == keys && filled != nil {
			once.Do(filled)
		}
		return nil
	})
	return g
}

// fillSource emits records 0..gen.Keys-1 (one per key) and then idles
// forever; its offset is the number of records emitted.
type fillSource struct {
	gen  benchwork.Generator
	next uint64
}

// SetWake is a no-op: once idle, the source never has records again.
func (s *fillSource) SetWake(func()) {}

func (s *fillSource) Open(_ context.Context, off []byte) error {
	s.next = 0
	if off != nil {
		if len(off) != 8 {
			return fmt.Errorf("bench: fill source: offset of %d bytes, want 8", len(off))
		}
		s.next = binary.BigEndian.Uint64(off)
	}
	return nil
}

func (s *fillSource) Read(buf []benchwork.Record) (int, error) {
	if s.next >= s.gen.Keys {
		return 0, topology.ErrSourceIdle
	}
	n := min(uint64(len(buf)), s.gen.Keys-s.next)
	s.gen.Fill(buf[:n], s.next, 0)
	s.next += n
	return int(n), nil
}

func (s *fillSource) Offset() []byte { return binary.BigEndian.AppendUint64(nil, s.next) }

func (s *fillSource) Close() error { return nil }
