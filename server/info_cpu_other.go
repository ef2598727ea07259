//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package server

// readCPUUsage reports zeros where there is no getrusage(2).
func readCPUUsage() cpuUsage { return cpuUsage{} }
