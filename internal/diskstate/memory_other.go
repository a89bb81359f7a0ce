//go:build !linux

package diskstate

// machineMemory is the machine's physical memory in bytes: 0, unknown,
// outside Linux.
func machineMemory() int64 { return 0 }
