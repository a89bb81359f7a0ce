package diskstate

import "syscall"

// machineMemory is the machine's physical memory in bytes (0: unknown).
func machineMemory() int64 {
	var info syscall.Sysinfo_t
	if err := syscall.Sysinfo(&info); err != nil {
		return 0
	}
	return int64(uint64(info.Totalram) * uint64(info.Unit))
}
