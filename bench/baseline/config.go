package baseline

import (
	"errors"
	"fmt"
	"time"

	"github.com/snapflow/snapflow/internal/benchwork"
)

// Defaults of Config.
const (
	DefaultParallelism = 2
	DefaultKeys        = 1024
	DefaultRecordSize  = 16
	DefaultBatchSize   = 256
	DefaultCredits     = 8
	DefaultLinger      = time.Millisecond
)

// ErrConfig is returned for a Config that cannot run.
var ErrConfig = errors.New("baseline: invalid config")

// Config describes one run of a baseline pipeline. Zero fields take their
// defaults.
type Config struct {
	Parallelism int           // keyed workers (default 2)
	Keys        uint64        // distinct keys (default 1024)
	RecordSize  int           // bytes per record, at least 16 (default 16)
	BatchSize   int           // records per batch (default 256)
	Credits     int           // batches in flight per channel (default 8)
	Linger      time.Duration // how long a partly filled batch may wait (default 1ms)
	Records     int64         // stop after this many records (0: run until ctx is done)
	Rate        float64       // records/s the source is limited to (0: as fast as possible)
}

// WithDefaults returns c with its zero fields set to their defaults, or an
// error wrapping ErrConfig when a field is out of range.
func (c Config) WithDefaults() (Config, error) {
	switch {
	case c.Parallelism < 0:
		return c, fmt.Errorf("%w: parallelism %d is negative", ErrConfig, c.Parallelism)
	case c.RecordSize < 0 || (c.RecordSize > 0 && c.RecordSize < 16):
		return c, fmt.Errorf("%w: record size %d must be at least 16 bytes", ErrConfig, c.RecordSize)
	case c.BatchSize < 0:
		return c, fmt.Errorf("%w: batch size %d is negative", ErrConfig, c.BatchSize)
	case c.Credits < 0:
		return c, fmt.Errorf("%w: credits %d is negative", ErrConfig, c.Credits)
	case c.Linger < 0:
		return c, fmt.Errorf("%w: linger %v is negative", ErrConfig, c.Linger)
	case c.Records < 0:
		return c, fmt.Errorf("%w: records %d is negative", ErrConfig, c.Records)
	case c.Rate < 0:
		return c, fmt.Errorf("%w: rate %v is negative", ErrConfig, c.Rate)
	}
	c.Parallelism = or(c.Parallelism, DefaultParallelism)
	c.Keys = or(c.Keys, DefaultKeys)
	c.RecordSize = or(c.RecordSize, DefaultRecordSize)
	c.BatchSize = or(c.BatchSize, DefaultBatchSize)
	c.Credits = or(c.Credits, DefaultCredits)
	c.Linger = or(c.Linger, DefaultLinger)
	return c, nil
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Result is what a run measured.
type Result struct {
	Records int64                // records the sink received
	Elapsed time.Duration        // from the first record generated to the sink's last record
	Latency *benchwork.Histogram // end-to-end latency of every record
	Sums    map[uint64]uint64    // every worker's final sums, merged
}

// RecordsPerSec is the throughput of the run (0 when nothing ran).
func (r Result) RecordsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Records) / r.Elapsed.Seconds()
}

// ExpectedSums is the Sums of a run over records records and keys keys:
// record i has key i%keys and every record adds one to its key.
func ExpectedSums(records int64, keys uint64) map[uint64]uint64 {
	keys = max(1, keys)
	n := uint64(records)
	sums := make(map[uint64]uint64, min(n, keys))
	for k := range min(n, keys) {
		sums[k] = n / keys
		if k < n%keys {
			sums[k]++
		}
	}
	return sums
}
