//go:build !linux

package wal

// pollSyncs has nothing to poll where fsyncs are plain system calls.
func pollSyncs() {}
