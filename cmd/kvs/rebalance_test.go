package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"kvs/fsm"
)

// applyPlan returns owners after moves, checking that each move takes
// slots all of its source group, as the cluster requires.
func applyPlan(t *testing.T, owners []uint16, moves []plannedMove) []uint16 {
	t.Helper()
	out := slices.Clone(owners)
	for _, m := range moves {
		if m.first > m.last || m.first < 0 || m.last >= len(out) || m.from == m.to {
			t.Fatalf("bad move %+v", m)
		}
		for s := m.first; s <= m.last; s++ {
			if int(out[s]) != m.from {
				t.Fatalf("move %+v: slot %d is group %d's", m, s, out[s])
			}
			out[s] = uint16(m.to)
		}
	}
	return out
}

func holdings(owners []uint16, cost []int64) map[int]int64 {
	h := map[int]int64{}
	for s, o := range owners {
		h[int(o)] += cost[s]
	}
	return h
}

// evenOwners is the split a cluster of n groups starts with.
func evenOwners(t *testing.T, n int) []uint16 {
	t.Helper()
	o, err := slotTable(n)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestPlanRebalance(t *testing.T) {
	ones := func() []int64 {
		c := make([]int64, fsm.ClusterSlots)
		for i := range c {
			c[i] = 1
		}
		return c
	}
	weights := func(ids ...int) map[int]float64 {
		w := map[int]float64{}
		for _, id := range ids {
			w[id] = 1
		}
		return w
	}

	t.Run("balanced already", func(t *testing.T) {
		plan := planRebalance(rebalanceGoal{owners: evenOwners(t, 3), weights: weights(1, 2, 3), cost: ones(), threshold: 0.05})
		if len(plan) != 0 {
			t.Errorf("an even split planned %v", plan)
		}
	})

	t.Run("a new empty group gets its share of slots", func(t *testing.T) {
		owners := evenOwners(t, 3) // groups 1-3; group 4 added, empty
		plan := planRebalance(rebalanceGoal{owners: owners, weights: weights(1, 2, 3, 4), cost: ones(), threshold: 0.02})
		h := holdings(applyPlan(t, owners, plan), ones())
		for id := 1; id <= 4; id++ {
			if math.Abs(float64(h[id])-4096) > 0.02*4096+1 {
				t.Errorf("group %d holds %d slots, want about 4096 (%v)", id, h[id], h)
			}
		}
		if len(plan) > 6 {
			t.Errorf("%d moves for three donors: %v", len(plan), plan)
		}
	})

	t.Run("bytes, skewed", func(t *testing.T) {
		owners := evenOwners(t, 3)
		cost := make([]int64, fsm.ClusterSlots)
		r := rand.New(rand.NewPCG(1, 2))
		for s := range cost {
			if owners[s] == 1 {
				cost[s] = 1000 + r.Int64N(2000) // group 1 holds most
			} else if r.IntN(4) == 0 {
				cost[s] = 100 + r.Int64N(200)
			}
		}
		before := holdings(owners, cost)
		plan := planRebalance(rebalanceGoal{owners: owners, weights: weights(1, 2, 3), cost: cost, threshold: 0.05})
		after := holdings(applyPlan(t, owners, plan), cost)
		total := before[1] + before[2] + before[3]
		for id := 1; id <= 3; id++ {
			if d := math.Abs(float64(after[id]) - float64(total)/3); d > 0.05*float64(total)/3 {
				t.Errorf("group %d holds %d after, want %d within 5%% (before %v)", id, after[id], total/3, before)
			}
		}
		if len(plan) > 3 {
			t.Errorf("%d moves where one run to each of two groups would do: %v", len(plan), plan)
		}
		var moved int64
		for _, m := range plan {
			if m.from != 1 {
				t.Errorf("move %+v: only group 1 is over its share", m)
			}
			moved += m.cost
		}
		if want := before[1] - total/3; math.Abs(float64(moved-want)) > 0.05*float64(total)/3 {
			t.Errorf("moved %d, want about %d", moved, want)
		}
	})

	t.Run("weights", func(t *testing.T) {
		owners := evenOwners(t, 2)
		w := map[int]float64{1: 1, 2: 3}
		plan := planRebalance(rebalanceGoal{owners: owners, weights: w, cost: ones(), threshold: 0.01})
		h := holdings(applyPlan(t, owners, plan), ones())
		if math.Abs(float64(h[2])-12288) > 0.01*12288+1 || math.Abs(float64(h[1])-4096) > 0.01*4096+1 {
			t.Errorf("weights 1:3 gave %v", h)
		}
	})

	t.Run("weight 0 empties a group, data and empty slots", func(t *testing.T) {
		owners := evenOwners(t, 3)
		cost := make([]int64, fsm.ClusterSlots)
		for s := range cost {
			if s%3 == 0 {
				cost[s] = 500
			}
		}
		plan := planRebalance(rebalanceGoal{owners: owners, weights: map[int]float64{1: 0, 2: 1, 3: 1}, cost: cost, threshold: 0.05})
		after := applyPlan(t, owners, plan)
		if slices.Contains(after, 1) {
			t.Fatalf("group 1 still owns slots after a plan that empties it: %v", plan)
		}
		h := holdings(after, cost)
		if h[2] == 0 || h[3] == 0 {
			t.Errorf("group 1's data went to one group: %v", h)
		}
		var n2, n3 int
		for _, o := range after {
			if o == 2 {
				n2++
			} else if o == 3 {
				n3++
			}
		}
		if n2 < 6000 || n3 < 6000 {
			t.Errorf("slots after: group 2 %d, group 3 %d", n2, n3)
		}
	})

	t.Run("one huge slot", func(t *testing.T) {
		owners := evenOwners(t, 2)
		cost := make([]int64, fsm.ClusterSlots)
		cost[100] = 1 << 30 // group 1's; nothing else holds much
		cost[9000] = 10
		plan := planRebalance(rebalanceGoal{owners: owners, weights: weights(1, 2), cost: cost, threshold: 0.05})
		// Moving the slot would leave the same imbalance the other way.
		for _, m := range plan {
			if m.first <= 100 && 100 <= m.last {
				t.Errorf("plan moves the one huge slot: %v", plan)
			}
		}
	})
}

func TestParseWeights(t *testing.T) {
	groups := []int{1, 2, 3}
	w, err := parseWeights("", groups)
	if err != nil || len(w) != 3 || w[1] != 1 || w[2] != 1 || w[3] != 1 {
		t.Errorf("no weights: %v, %v", w, err)
	}
	w, err = parseWeights("1=2, 3=0", groups)
	if err != nil || w[1] != 2 || w[2] != 1 || w[3] != 0 {
		t.Errorf("1=2,3=0: %v, %v", w, err)
	}
	for _, bad := range []struct{ in, want string }{
		{"4=1", "no data group 4"},
		{"0=1", "no data group 0"},
		{"1=-1", "not GROUP=WEIGHT"},
		{"1", "not GROUP=WEIGHT"},
		{"x=1", "not GROUP=WEIGHT"},
		{"1=NaN", "not GROUP=WEIGHT"},
		{"1=0,2=0,3=0", "every group weighs 0"},
	} {
		if _, err := parseWeights(bad.in, groups); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want an error saying %q", bad.in, err, bad.want)
		}
	}
}
