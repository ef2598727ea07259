package test

import "syscall"

// childAttr makes a server die with the test binary, so an interrupted
// `go test` (or a panic) leaves no stray processes holding ports and dirs.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
