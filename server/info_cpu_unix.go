//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package server

import (
	"time"

	"golang.org/x/sys/unix"
)

func readCPUUsage() cpuUsage {
	var self, children unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &self) != nil {
		return cpuUsage{}
	}
	if unix.Getrusage(unix.RUSAGE_CHILDREN, &children) != nil {
		children = unix.Rusage{}
	}
	d := func(tv unix.Timeval) time.Duration { return time.Duration(tv.Nano()) }
	return cpuUsage{sys: d(self.Stime), user: d(self.Utime), childSys: d(children.Stime), childUser: d(children.Utime)}
}
