//go:build !linux

package test

import "syscall"

// childAttr: only Linux can tie a child's life to its parent's.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// openFileLimit: unknown here (tests that need many files skip).
func openFileLimit() uint64 { return 0 }
