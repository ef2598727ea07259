package test

import (
	"testing"
	"time"
)

// TestOpCountsLatency: the mix's latency histogram gives each percentile
// within its 8% bucket, the max exactly, and counts only the whole seconds
// strictly inside the window asked.
func TestOpCountsLatency(t *testing.T) {
	o := &opCounts{bySec: map[int64]int{}}
	sec := time.Unix(1_700_000_000, 0)
	for i := range 98 {
		o.record(sec.Add(time.Duration(i)*time.Millisecond), time.Millisecond)
	}
	o.record(sec.Add(500*time.Millisecond), 5*time.Millisecond)
	o.record(sec.Add(600*time.Millisecond), 100*time.Millisecond)
	o.record(sec.Add(time.Second), time.Hour) // the next second: outside
	within := func(got, want time.Duration) bool {
		return got >= want && float64(got) <= float64(want)*1.08*1.08
	}
	p50, p99, maxd := o.latency(sec.Add(-time.Second), sec.Add(time.Second))
	if !within(p50, time.Millisecond) || !within(p99, 5*time.Millisecond) || maxd != 100*time.Millisecond {
		t.Fatalf("p50 %v, p99 %v, max %v; want about 1ms, about 5ms, 100ms", p50, p99, maxd)
	}
	if got := o.rate(sec.Add(-time.Second), sec.Add(time.Second)); got != 100 {
		t.Fatalf("rate %v, want 100", got)
	}
	if p50, p99, maxd := o.latency(sec, sec.Add(time.Second)); p50 != 0 || p99 != 0 || maxd != 0 {
		t.Fatalf("an empty window: %v %v %v", p50, p99, maxd)
	}
}
