package main

import (
	"runtime"
	"testing"
)

func TestEnsureProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	ensureProcs()
	if got := runtime.GOMAXPROCS(0); got < minProcs {
		t.Fatalf("GOMAXPROCS after ensureProcs = %d, want at least %d", got, minProcs)
	}
	runtime.GOMAXPROCS(minProcs + 1)
	ensureProcs()
	if got := runtime.GOMAXPROCS(0); got != minProcs+1 {
		t.Fatalf("ensureProcs lowered GOMAXPROCS from %d to %d", minProcs+1, got)
	}
}
