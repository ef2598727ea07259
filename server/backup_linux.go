package server

import "golang.org/x/sys/unix"

// dupFD duplicates an event loop's socket for a backup stream.
func dupFD(fd int) (int, error) { return unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0) }
