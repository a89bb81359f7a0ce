package dataflow

import (
	"runtime"
	"syscall"
	"testing"
)

// threadCPU measures the CPU time of the calling goroutine, locked to its
// thread until stop: unlike wall time it hardly moves when other processes
// compete for the cores.
func threadCPU(b *testing.B) (stop func() (nanos int64, ok bool)) {
	b.Helper()
	runtime.LockOSThread()
	start, ok := threadRusage()
	return func() (int64, bool) {
		defer runtime.UnlockOSThread()
		end, ok2 := threadRusage()
		return end - start, ok && ok2
	}
}

func threadRusage() (int64, bool) {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), true
}

// processCPU is the CPU time the process has used so far, in nanoseconds:
// every goroutine's, pebble's flushes and compactions among them.
func processCPU() (int64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), true
}
