package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/snapflow/snapflow/bench/baseline/baselinetest"
)

func TestChannels(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	baselinetest.Run(t, runChannels)
}

// BenchmarkChannels runs 2M 16-byte records per iteration through the
// channels pipeline at parallelism 1, 2 and 4.
func BenchmarkChannels(b *testing.B) {
	baselinetest.Bench(b, runChannels, 2_000_000)
}
