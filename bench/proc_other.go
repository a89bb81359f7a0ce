//go:build !linux

package main

import (
	"os"
	"syscall"
)

// childAttr sets nothing here: a worker whose coordinator dies stops when
// its stdin closes.
func childAttr() *syscall.SysProcAttr { return nil }

// killGroup kills p.
func killGroup(p *os.Process) { _ = p.Kill() }
