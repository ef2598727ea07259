//go:build !linux

package wal

// pollSyncs has nothing to poll where fsyncs are plain system calls.
func pollSyncs() {}

// fsyncMethod names how Sync makes an OS file durable in this process.
func fsyncMethod() string { return "fsync" }
