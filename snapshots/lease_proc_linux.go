//go:build linux

package snapshots

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
)

// processStart returns the start time of process pid, in clock ticks since
// boot (field 22 of /proc/<pid>/stat), which tells a reused pid apart.
func processStart(pid int) (uint64, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 20 { // field 3 is fields[0], so field 22 is fields[19]
		return 0, false
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	return start, err == nil
}

// processAlive reports whether process pid runs and, when start is not 0,
// started at start (it is not another process that reused the pid).
func processAlive(pid int, start uint64) bool {
	got, ok := processStart(pid)
	return ok && (start == 0 || got == start)
}

// machineID names this process's pid namespace on this boot: two
// processes with the same machineID see each other's pids.
var machineID = sync.OnceValue(func() string {
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, _ := os.Readlink("/proc/self/ns/pid")
	if len(boot) == 0 || ns == "" {
		return ""
	}
	host, _ := os.Hostname()
	return host + "/" + strings.TrimSpace(string(boot)) + "/" + ns
})
