package group

import (
	"fmt"
	"math"

	"kvs/fsm"
)

// MaxGroups is the most groups EvenSlots splits the slots over. Each group
// costs every node that holds it goroutines and heartbeats even when idle
// (cluster's BenchmarkIdleGroups), so a cluster of more than a thousand is
// beyond what kvs is built for; and redis-cli's float32 running sum, which
// EvenSlots follows, drifts with thousands of masters until, past 7541,
// its last ranges overlap and run off the end.
const MaxGroups = 1024

// EvenSlots splits the 16384 hash slots over n groups the way
// `redis-cli --cluster create` splits them over n masters: group i gets
// one contiguous range, groups in id order, each about 16384/n slots long.
// It returns the slot map, slot -> group id. The ranges are redis-cli's to
// the slot (three groups get 0-5460, 5461-10922 and 10923-16383), so that
// CLUSTER SLOTS of a new kvs cluster reads as that of a new Redis Cluster
// of as many masters: redis-cli rounds each range's end from a float32
// running sum, which this reproduces, float32 arithmetic included (Go
// rounds every float32 operation as C does on amd64 and arm64). One group
// owns every slot. n must be in [1, MaxGroups].
func EvenSlots(n int) ([]uint32, error) {
	if n < 1 || n > MaxGroups {
		return nil, fmt.Errorf("group: %d groups: the slots split over 1 to %d", n, MaxGroups)
	}
	slots := make([]uint32, fsm.ClusterSlots)
	per := float32(fsm.ClusterSlots) / float32(n)
	var cursor float32
	first := 0
	for i := range n {
		// redis-cli.c, clusterManagerCommandCreate: lround(cursor +
		// slots_per_node - 1), clamped, the last master taking the rest.
		last := int(math.Round(float64(float32(cursor+per) - 1)))
		if last > fsm.ClusterSlots || i == n-1 {
			last = fsm.ClusterSlots - 1
		}
		last = max(last, first)
		for s := first; s <= last; s++ {
			slots[s] = uint32(i)
		}
		first = last + 1
		cursor = float32(cursor + per)
	}
	return slots, nil
}
