//go:build !linux

package main

import (
	"os"
	"syscall"
	"time"
)

// childAttr sets nothing here: a worker whose coordinator dies stops when
// its stdin closes.
func childAttr() *syscall.SysProcAttr { return nil }

// killGroup kills p.
func killGroup(p *os.Process) { _ = p.Kill() }

// processCPU is not measured here.
func processCPU() (time.Duration, bool) { return 0, false }
