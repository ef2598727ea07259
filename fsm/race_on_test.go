//go:build race

package fsm

// raceEnabled: the race detector makes sync.Pool drop what it is given at
// random, so tests that count allocations skip under it.
const raceEnabled = true
