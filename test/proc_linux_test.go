package test

import "syscall"

// childAttr makes a server die with the test binary, so an interrupted
// `go test` (or a panic) leaves no stray processes holding ports and dirs.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// openFileLimit is the test process's limit on open files.
func openFileLimit() uint64 {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
		return 0
	}
	return lim.Cur
}
