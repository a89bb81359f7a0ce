//go:build !linux

package dataflow

import "testing"

// threadCPU reports no thread CPU time outside Linux.
func threadCPU(*testing.B) (stop func() (nanos int64, ok bool)) {
	return func() (int64, bool) { return 0, false }
}

// processCPU reports no CPU time outside Linux.
func processCPU() (int64, bool) { return 0, false }
