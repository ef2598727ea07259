package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// The Go runtime lets the heap grow to twice what is live before it
// collects (GOGC=100). For a store whose data is nearly all of the heap that
// doubles the memory kvs needs to hold a dataset: 1M small strings, 120 MB
// live, took 210 MB of RSS. gcTuner keeps the slack to what a collection
// every so often needs instead: after each GC it sets the percentage so that
// the next goal is the live heap plus gcSlackMin or gcSlackFraction of it,
// whichever is larger. A small heap keeps GOGC=100 (a few MB of slack cost
// nothing); a large one collects a little more often, with GC work still
// proportional to allocation, not to the data held.
//
// A GOGC set in the environment is the operator's choice: the tuner then
// does nothing.
const (
	gcSlackMin      = 64 << 20
	gcSlackFraction = 0.25
)

type gcTuner struct {
	stopped atomic.Bool
	sample  []metrics.Sample
}

// startGCTuner starts tuning and returns the function that stops it.
func startGCTuner() (stop func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	t := &gcTuner{sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.arm()
	return func() { t.stopped.Store(true) }
}

// arm sets a finalizer on a fresh object, which runs after the next GC has
// found it unreachable: once per cycle, with no goroutine of its own.
func (t *gcTuner) arm() {
	sentinel := new([16]byte)
	runtime.SetFinalizer(sentinel, func(*[16]byte) {
		if t.stopped.Load() {
			return
		}
		t.tune()
		t.arm()
	})
}

func (t *gcTuner) tune() {
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	debug.SetGCPercent(gcPercent(t.sample[0].Value.Uint64()))
}

// gcPercent is the GOGC that gives a live heap of live bytes its slack.
func gcPercent(live uint64) int {
	if live == 0 {
		return 100
	}
	slack := max(float64(gcSlackMin), gcSlackFraction*float64(live))
	return int(min(100, max(float64(gcSlackFraction*100), 100*slack/float64(live))))
}
