//go:build !unix

package main

import (
	"os"
	"syscall"
)

// childAttr has nothing to set on this platform.
func childAttr() *syscall.SysProcAttr { return nil }

// killGroup kills p.
func killGroup(p *os.Process) { _ = p.Kill() }
