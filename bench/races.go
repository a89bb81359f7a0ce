package main

import (
	"os"

	"github.com/snapflow/snapflow/internal/racedetect"
)

// Under the race detector (go test -race), protoactor-go's remote package
// races with itself when a node shuts down, and every cluster process would
// exit 66. So a cluster row's processes run with racedetect.TolerantEnv,
// and their output is checked with racedetect.Foreign instead.

// clusterEnv is the environment of a cluster row's coordinator child (its
// workers inherit it), or nil to inherit this process's.
func clusterEnv(rc rowConfig) []string {
	if !racedetect.Enabled || rc.Mode != "cluster" {
		return nil
	}
	return append(os.Environ(), racedetect.TolerantEnv)
}
