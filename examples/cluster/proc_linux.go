package main

import "syscall"

// childAttr puts a child in a process group of its own, and has the kernel
// kill it if this process dies first (even by SIGKILL).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
