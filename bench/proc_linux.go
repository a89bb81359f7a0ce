package main

import (
	"os"
	"syscall"
)

// childAttr puts a cluster worker in a process group of its own, and has
// the kernel kill it if this process dies first, even by SIGKILL.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup kills p's process group (p leads it: see childAttr).
func killGroup(p *os.Process) {
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil {
		_ = p.Kill()
	}
}
