// Package proctest runs an example's binary in the example's process tests.
// Build, from TestMain, builds the package in the current directory once
// (with the race detector when the tests have it); Start runs the binary
// with its stdout and stderr kept line by line, kills it when the test
// ends, and prints what it printed when the test fails. Every wait is
// bounded by WaitFor, generous for a loaded machine: the tests assert what
// the processes print, never how fast.
//
// examples/cluster keeps a process runner of its own (its child.go), which
// its demo uses outside the tests.
package proctest
