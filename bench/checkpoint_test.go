package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/miniotest"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// stateValue is the size of one keyed value in the checkpoint benchmark.
const stateValue = 64 << 10

// BenchmarkCheckpointSize measures checkpoint duration against total state
// size (spread over 4 tasks) on MinIO on loopback, and in the same run the
// raw minio-go PutObject time for the same bytes as 4 parallel objects: with
// minio-go's defaults (the payload signed with SHA-256 over plain HTTP), and
// with the options the MinIO store uses (unsigned payload, trailing CRC-32C).
// Metrics: p50-ms, p99-ms and MB/s (at p50).
func BenchmarkCheckpointSize(b *testing.B) {
	srv := miniotest.Start(b)
	srv.MakeBucket(b, "bench")
	for _, mib := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("snapflow/%dMiB", mib), func(b *testing.B) {
			benchCheckpoints(b, srv.Store(b, "bench", fmt.Sprintf("ckpt-%d", mib)), mib<<20)
		})
		b.Run(fmt.Sprintf("raw-putobject/%dMiB", mib), func(b *testing.B) {
			benchRawPut(b, srv, mib<<20, minio.PutObjectOptions{})
		})
		b.Run(fmt.Sprintf("raw-putobject-unsigned/%dMiB", mib), func(b *testing.B) {
			benchRawPut(b, srv, mib<<20, minio.PutObjectOptions{DisableContentSha256: true})
		})
	}
}

func benchCheckpoints(b *testing.B, store snapshots.Store, total int) {
	keys := int64(total / stateValue)
	gate := testsrc.NewGate(keys)
	g := topology.New("ckpt-size", topology.MaxParallelism(4))
	src := topology.FromSource(g, "source", func(int, int) topology.Source[int64] { return &testsrc.Gated{N: keys + 1, Gate: gate} })
	keyed := topology.KeyByHash(src, func(v int64) int64 { return v }, func(k int64) uint64 { return uint64(k) })
	blobs := topology.Process(keyed, "blobs", func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
		blob := topology.Value[string](s, "blob")
		return func(ctx *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
			blob.Set(string(bytes.Repeat([]byte{byte(v)}, stateValue)))
			out.Emit(v)
			return nil
		}
	}, topology.Parallelism(4))
	topology.Sink(blobs, "sink", func(int64) error { return nil })
	j, err := actors.Start(context.Background(), g, actors.WithStore(store), actors.WithCheckpointInterval(0), actors.WithCheckpointTimeout(5*time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	defer j.Stop()
	gate.WaitReached(b, keys)
	// One checkpoint before timing: the state has reached every task.
	if _, err := j.Checkpoint(context.Background()); err != nil {
		b.Fatal(err)
	}
	var d []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := j.Checkpoint(context.Background()); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(t0))
	}
	report(b, d, total)
}

func benchRawPut(b *testing.B, srv *miniotest.Server, total int, opts minio.PutObjectOptions) {
	c, err := minio.New(srv.Endpoint(), &minio.Options{Creds: credentials.NewStaticV4(srv.AccessKey(), srv.SecretKey(), "")})
	if err != nil {
		b.Fatal(err)
	}
	part := bytes.Repeat([]byte{7}, total/4)
	var d []time.Duration
	n := 0
	for b.Loop() {
		n++
		t0 := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range 4 {
			wg.Go(func() {
				_, errs[i] = c.PutObject(context.Background(), "bench", fmt.Sprintf("raw/%d/%d", n, i),
					bytes.NewReader(part), int64(len(part)), opts)
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		d = append(d, time.Since(t0))
	}
	report(b, d, total)
}

func report(b *testing.B, d []time.Duration, bytes int) {
	if len(d) == 0 {
		return
	}
	s := slices.Clone(d)
	slices.Sort(s)
	p50 := s[len(s)/2]
	p99 := s[min(len(s)-1, len(s)*99/100)]
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(bytes)/1e6/p50.Seconds(), "MB/s")
}
