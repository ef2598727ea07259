//go:build !linux

package fsm

// threadCPU is not measured off Linux.
func threadCPU() int64 { return 0 }
