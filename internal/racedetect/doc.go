// Package racedetect reports whether the binary was built with the race
// detector.
//
// One process running several cluster nodes (coordinator and workers in
// one test binary) trips data races inside protoactor-go's remote package
// (grpclog.SetLoggerV2 written by every Remote.Start, the endpoint
// manager's unsynchronised stopped flag at shutdown). Tests that run
// several nodes in one process check Enabled; the cluster is tested under
// the race detector as separate processes.
package racedetect
