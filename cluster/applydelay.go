package cluster

import (
	"slices"
	"sync"
	"time"
)

// How stale a node's store is. raft stamps each entry with the time the
// leader appended it (raft.Log.AppendedAt, replicated with the entry);
// when the FSM has applied a batch, the delay from that stamp to now is
// how long the batch's last write took to become visible here. On the
// leader that is the commit round; on a follower it is the commit round
// plus the time to learn of the commit and apply, so the difference
// between a follower's figures and the leader's is the follower's lag.
// Across machines it includes their clock difference.
//
// Entries the node already held when it opened are left out: replayed at
// start, their stamps are old.

// ApplyDelayBuckets are the histogram's upper bounds, in seconds.
var ApplyDelayBuckets = [...]float64{.0001, .00025, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// applyDelayWindow is how many recent batches the quantiles cover.
const applyDelayWindow = 1024

type applyDelays struct {
	mu     sync.Mutex // guards the fields below
	recent [applyDelayWindow]time.Duration
	n      uint64 // batches recorded; recent[n%window] is the next slot
	counts [len(ApplyDelayBuckets) + 1]uint64
	sum    time.Duration
}

func (d *applyDelays) record(x time.Duration) {
	if x < 0 {
		x = 0 // a leader's clock behind this node's
	}
	i, _ := slices.BinarySearch(ApplyDelayBuckets[:], x.Seconds())
	d.mu.Lock()
	d.recent[d.n%applyDelayWindow] = x
	d.n++
	d.counts[i]++
	d.sum += x
	d.mu.Unlock()
}

// ApplyDelay is a node's apply delays: quantiles over the last batches
// (zero when none was recorded) and a histogram since the node opened.
type ApplyDelay struct {
	P50, P99, Max time.Duration // over the last Samples batches
	Samples       int
	// Counts[i] is how many batches took at most ApplyDelayBuckets[i] (and
	// more than the bound before); the last element counts the rest.
	Counts []uint64
	Sum    time.Duration
}

func (d *applyDelays) snapshot() ApplyDelay {
	d.mu.Lock()
	n := int(min(d.n, applyDelayWindow))
	xs := slices.Clone(d.recent[:n])
	out := ApplyDelay{Samples: n, Counts: slices.Clone(d.counts[:]), Sum: d.sum}
	d.mu.Unlock()
	if n > 0 {
		slices.Sort(xs)
		out.P50, out.P99, out.Max = xs[(n-1)/2], xs[(n-1)*99/100], xs[n-1]
	}
	return out
}

// ApplyDelay reports how long the node's recent writes took from the
// leader's append to this node's store (see applydelay.go).
func (n *Node) ApplyDelay() ApplyDelay { return n.delays.snapshot() }
