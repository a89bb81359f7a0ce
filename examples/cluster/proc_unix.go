//go:build unix

package main

import (
	"os"
	"syscall"
)

// killGroup sends SIGKILL to p's process group (p leads its own group: see
// childAttr).
func killGroup(p *os.Process) {
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil {
		_ = p.Kill()
	}
}
