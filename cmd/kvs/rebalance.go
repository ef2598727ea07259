package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"kvs/fsm"
)

// kvs rebalance ADDR: moves slots between a cluster's data groups until
// each holds about its share of the data (the same share each, or as
// --weights says), as redis-cli --cluster rebalance does with slot counts.
//
// It weighs each slot by the memory its keys hold (KVS.SLOTS SIZES, asked
// of each group's leader, MEMORY USAGE's estimate summed), works out a
// plan with planRebalance, records one move per range (KVS.SLOTS MOVE, the
// moves `kvs slots move` makes, run one at a time by the cluster in id
// order), and with --wait follows them to their end. Leaderships follow on
// their own: every node spreads the groups it leads as always. A cluster
// with no keys at all is balanced by slot counts instead.

// sizeChunk is how many slots one KVS.SLOTS SIZES asks for: each answer
// walks the keys of its slots under the store's read lock, so a group of
// a million keys is read in steps instead of one long hold.
const sizeChunk = 1024

// plannedMove is one move of a rebalance: slots first to last, all of
// group from, to group to, holding cost (bytes, or slots when the cluster
// holds no keys).
type plannedMove struct {
	first, last int
	from, to    int
	cost        int64
}

// rebalanceGoal is what planRebalance works from: the slot map (slot ->
// group), the data groups and their weights (>= 0, one at least > 0), and
// each slot's cost.
type rebalanceGoal struct {
	owners  []uint16
	weights map[int]float64
	cost    []int64
	// threshold is the share of its target by which a group may be off
	// and still count as balanced (0.05: 5%). A group of weight 0 is
	// emptied whatever it holds.
	threshold float64
}

// planRebalance returns the moves that bring each group to about its
// share: total cost times its weight over the weights' sum. Groups over
// their share by more than the threshold give slots to groups under
// theirs, the largest surplus first, each to the group lacking most. A
// group gives one run of slots to each, from its highest slot down, so
// what it gives and what it keeps stay contiguous: the run ends at the
// slot that would overshoot the amount wanted by more than it helps, and
// begins below any slot too large to give at all. A group of weight 0
// gives every slot it has: what holds data as above, then each run of
// slots holding nothing to a group next to it.
func planRebalance(g rebalanceGoal) []plannedMove {
	owners := slices.Clone(g.owners)
	var groups []int
	var wsum float64
	for id, w := range g.weights {
		groups = append(groups, id)
		wsum += w
	}
	sort.Ints(groups)
	have := map[int]int64{}
	var total int64
	for slot, o := range owners {
		if _, ok := g.weights[int(o)]; ok {
			have[int(o)] += g.cost[slot]
			total += g.cost[slot]
		}
	}
	target := map[int]float64{}
	for _, id := range groups {
		target[id] = float64(total) * g.weights[id] / wsum
	}
	// off is how far a group is from its share, positive when over.
	off := func(id int) float64 { return float64(have[id]) - target[id] }
	balanced := func(id int) bool {
		if g.weights[id] == 0 {
			return have[id] == 0
		}
		return math.Abs(off(id)) <= g.threshold*target[id]
	}
	var donors []int
	for _, id := range groups {
		if off(id) > 0 && !balanced(id) {
			donors = append(donors, id)
		}
	}
	sort.SliceStable(donors, func(i, j int) bool { return off(donors[i]) > off(donors[j]) })
	// neediest is the group furthest under its share, -1 for none.
	neediest := func() int {
		best := -1
		for _, id := range groups {
			if g.weights[id] > 0 && off(id) < 0 && (best < 0 || off(id) < off(best)) {
				best = id
			}
		}
		return best
	}
	var moves []plannedMove
	give := func(from, to int, slots []int) {
		// slots descend; each run of consecutive slots is one move.
		for i := 0; i < len(slots); {
			j := i
			for j+1 < len(slots) && slots[j+1] == slots[j]-1 {
				j++
			}
			m := plannedMove{first: slots[j], last: slots[i], from: from, to: to}
			for s := m.first; s <= m.last; s++ {
				m.cost += g.cost[s]
				owners[s] = uint16(to)
			}
			have[from] -= m.cost
			have[to] += m.cost
			moves = append(moves, m)
			i = j + 1
		}
	}
	for _, d := range donors {
		for !balanced(d) && off(d) > 0 {
			r := neediest()
			if r < 0 {
				break
			}
			want := min(off(d), -off(r))
			var taken []int
			var sum float64
			for s := len(owners) - 1; s >= 0 && sum < want; s-- {
				if int(owners[s]) != d {
					if sum > 0 {
						break // one run of the donor's slots per move
					}
					taken = taken[:0]
					continue
				}
				c := float64(g.cost[s])
				if c > 0 && sum+c/2 > want && g.weights[d] != 0 {
					if sum > 0 {
						break // the next slot would overshoot more than it helps
					}
					// Too large to give at all: start below it.
					taken = taken[:0]
					continue
				}
				taken = append(taken, s)
				sum += c
			}
			// Slots holding nothing on the way were taken along; keep
			// those only between taken slots of cost, so a donor keeps its
			// empty slots below what it gives.
			for len(taken) > 0 && g.cost[taken[len(taken)-1]] == 0 {
				taken = taken[:len(taken)-1]
			}
			if len(taken) == 0 {
				break // nothing small enough: as near as slots go
			}
			give(d, r, taken)
		}
	}
	// A group of weight 0 gives what is left, slots holding nothing: each
	// run to the group owning the slot next to it, so the runs join what
	// was given above them.
	for _, d := range groups {
		if g.weights[d] != 0 {
			continue
		}
		for s := len(owners) - 1; s >= 0; s-- {
			if int(owners[s]) != d {
				continue
			}
			hi := s
			for s > 0 && int(owners[s-1]) == d {
				s--
			}
			to := -1
			for _, n := range []int{hi + 1, s - 1} {
				if n >= 0 && n < len(owners) && g.weights[int(owners[n])] > 0 {
					to = int(owners[n])
					break
				}
			}
			if to < 0 {
				to = neediest()
			}
			if to < 0 {
				for _, id := range groups {
					if g.weights[id] > 0 {
						to = id
						break
					}
				}
			}
			run := make([]int, 0, hi-s+1)
			for x := hi; x >= s; x-- {
				run = append(run, x)
			}
			give(d, to, run)
		}
	}
	return moves
}

// parseWeights reads --weights: GROUP=WEIGHT pairs, comma-separated, for
// data groups of groups; the others weigh 1.
func parseWeights(s string, groups []int) (map[int]float64, error) {
	w := map[int]float64{}
	for _, id := range groups {
		w[id] = 1
	}
	if s == "" {
		return w, nil
	}
	for _, pair := range strings.Split(s, ",") {
		a, b, ok := strings.Cut(strings.TrimSpace(pair), "=")
		id, err1 := strconv.Atoi(a)
		v, err2 := strconv.ParseFloat(b, 64)
		if !ok || err1 != nil || err2 != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, fmt.Errorf("--weights: %q is not GROUP=WEIGHT (a data group and a weight >= 0)", pair)
		}
		if _, ok := w[id]; !ok {
			return nil, fmt.Errorf("--weights: the cluster has no data group %d (its data groups: %s)", id, joinInts(groups))
		}
		w[id] = v
	}
	var sum float64
	for _, v := range w {
		sum += v
	}
	if sum == 0 {
		return nil, fmt.Errorf("--weights: every group weighs 0: some group must keep the slots")
	}
	return w, nil
}

// rebalanceView is what a rebalance reads of the cluster.
type rebalanceView struct {
	owners  []uint16
	groups  []int          // the data groups
	leaders map[int]string // data group -> its leader's client address
}

// fetchRebalanceView reads the cluster's slot map, data groups and their
// leaders from the node at addr's KVS.STATUS.
func fetchRebalanceView(ctx context.Context, addr string) (rebalanceView, error) {
	st, err := fetchStatus(ctx, addr)
	if err != nil {
		return rebalanceView{}, err
	}
	if len(st.dataGroupIDs()) < 2 {
		return rebalanceView{}, fmt.Errorf("the cluster at %s has one data group: there is nothing to balance (a cluster of several is started with --groups, or given more with kvs groups add)", addr)
	}
	v := rebalanceView{owners: statusSlots(st), leaders: map[int]string{}}
	clients := map[string]string{}
	for _, m := range st.members {
		if len(m) > 2 {
			clients[m[0]] = m[2]
		}
	}
	for _, id := range st.dataGroupIDs() {
		v.groups = append(v.groups, int(id))
		if row := groupRow(st.groups, strconv.FormatUint(uint64(id), 10)); len(row) > 2 && clients[row[2]] != "" {
			v.leaders[int(id)] = clients[row[2]]
		}
	}
	return v, nil
}

// slotCosts asks each data group's leader what each of its slots holds:
// bytes per slot, and the keys in all.
func slotCosts(ctx context.Context, v rebalanceView) (cost []int64, keys int64, err error) {
	cost = make([]int64, fsm.ClusterSlots)
	for _, id := range v.groups {
		var runs [][2]int
		for s := 0; s < len(v.owners); s++ {
			if int(v.owners[s]) != id {
				continue
			}
			e := s
			for e+1 < len(v.owners) && int(v.owners[e+1]) == id && e+1-s < sizeChunk {
				e++
			}
			runs = append(runs, [2]int{s, e})
			s = e
		}
		if len(runs) == 0 {
			continue
		}
		addr := v.leaders[id]
		if addr == "" {
			return nil, 0, fmt.Errorf("CLUSTERDOWN data group %d has no leader known yet", id)
		}
		c := adminClient(addr)
		for _, r := range runs {
			var vals []any
			vals, err = c.Do(ctx, "KVS.SLOTS", "SIZES", r[0], r[1]).Slice()
			if err != nil {
				c.Close()
				return nil, 0, fmt.Errorf("asking group %d's leader at %s what slots %d-%d hold: %w", id, addr, r[0], r[1], err)
			}
			for i := 0; i+2 < len(vals); i += 3 {
				slot, _ := vals[i].(int64)
				n, _ := vals[i+1].(int64)
				b, _ := vals[i+2].(int64)
				if slot < int64(r[0]) || slot > int64(r[1]) {
					c.Close()
					return nil, 0, fmt.Errorf("group %d's leader at %s answered slot %d for slots %d-%d", id, addr, slot, r[0], r[1])
				}
				cost[slot] = b
				keys += n
			}
		}
		c.Close()
	}
	return cost, keys, nil
}

func rebalanceCmd(args []string, stdout, stderr io.Writer) int {
	var weights string
	var dryRun, wait bool
	var threshold float64
	fs, timeout, code := parseAdmin("rebalance", "[--weights G=W,...] [--threshold PCT] [--dry-run] [--wait] ADDR",
		"Moves slots between the data groups of the cluster the node at ADDR belongs to\n"+
			"until each holds about the same bytes of data, or its share by --weights (a\n"+
			"group left out weighs 1; weight 0 empties a group). It prints the plan and\n"+
			"records its moves, which the cluster runs one at a time; with --wait it prints\n"+
			"their progress until they are over (exit 0 when all are done, 1 if one was\n"+
			"cancelled). A cluster with no keys is balanced by slot counts.",
		1, args, stderr, func(fs *flag.FlagSet) {
			fs.StringVar(&weights, "weights", "", "GROUP=WEIGHT pairs, comma-separated")
			fs.Float64Var(&threshold, "threshold", 5, "percent of its share a group may be off and count as balanced")
			fs.BoolVar(&dryRun, "dry-run", false, "print the plan, move nothing")
			fs.BoolVar(&wait, "wait", false, "print the moves' progress until they are over")
		})
	if fs == nil {
		return code
	}
	if threshold < 0 || math.IsNaN(threshold) {
		fmt.Fprintf(stderr, "kvs rebalance: --threshold %v: want a percent >= 0\n", threshold)
		return 2
	}
	addr := fs.Arg(0)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	fail := func(err error) int {
		fmt.Fprintf(stderr, "kvs rebalance: %v\n", err)
		return 1
	}
	// The view and what each slot holds, again while a group is between
	// leaders (as just after kvs groups add on a busy cluster), up to
	// --timeout.
	var v rebalanceView
	var cost []int64
	var keys int64
	err := retryAdmin(*timeout, func() error {
		var err error
		if v, err = fetchRebalanceView(ctx, addr); err != nil {
			return err
		}
		cost, keys, err = slotCosts(ctx, v)
		return err
	})
	if err != nil {
		return fail(err)
	}
	w, err := parseWeights(weights, v.groups)
	if err != nil {
		fmt.Fprintf(stderr, "kvs rebalance: %v\n", err)
		return 2
	}
	moves, err := fetchMoves(addr)
	if err != nil {
		return fail(err)
	}
	for _, m := range moves {
		if m.phase != phaseDone && m.phase != phaseCancelled {
			return fail(fmt.Errorf("move %d (slots %s) is in flight: rebalance once it is over (kvs slots status), or cancel it", m.id, m.slots))
		}
	}
	unit := sizeText
	if keys == 0 {
		for i := range cost {
			cost[i] = 1
		}
		unit = func(n int64) string { return strconv.FormatInt(n, 10) + " slots" }
		fmt.Fprintln(stdout, "the cluster holds no keys: balancing slot counts")
	}
	plan := planRebalance(rebalanceGoal{owners: v.owners, weights: w, cost: cost, threshold: threshold / 100})
	printRebalance(stdout, v, w, cost, plan, unit)
	if len(plan) == 0 {
		fmt.Fprintln(stdout, "balanced: nothing to move")
		return 0
	}
	if dryRun {
		return 0
	}
	var ids []uint64
	for _, m := range plan {
		id, err := recordMove(addr, *timeout, m.first, m.last, m.to)
		if err != nil {
			if len(ids) > 0 {
				err = fmt.Errorf("%v (moves %s are recorded and go on)", err, joinInts(ids))
			}
			return fail(err)
		}
		ids = append(ids, id)
		fmt.Fprintf(stdout, "move %d: slots %d-%d from group %d to group %d\n", id, m.first, m.last, m.from, m.to)
	}
	if !wait {
		return 0
	}
	return waitMoves(addr, ids, stdout, stderr)
}

// printRebalance writes each group's share before and after the plan, and
// the plan's moves.
func printRebalance(w io.Writer, v rebalanceView, weights map[int]float64, cost []int64, plan []plannedMove, unit func(int64) string) {
	now := map[int]int64{}
	slots := map[int]int{}
	var total int64
	for s, o := range v.owners {
		now[int(o)] += cost[s]
		slots[int(o)]++
		total += cost[s]
	}
	after := map[int]int64{}
	for id, c := range now {
		after[id] = c
	}
	for _, m := range plan {
		after[m.from] -= m.cost
		after[m.to] += m.cost
		slots[m.from] -= m.last - m.first + 1
		slots[m.to] += m.last - m.first + 1
	}
	var wsum float64
	for _, x := range weights {
		wsum += x
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tWEIGHT\tHOLDS\tSHARE\tAFTER\tSLOTS AFTER")
	for _, id := range v.groups {
		share := int64(float64(total) * weights[id] / wsum)
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\n", id, strconv.FormatFloat(weights[id], 'g', -1, 64),
			unit(now[id]), unit(share), unit(after[id]), slots[id])
	}
	tw.Flush()
	for _, m := range plan {
		fmt.Fprintf(w, "plan: slots %d-%d (%s) from group %d to group %d\n", m.first, m.last, unit(m.cost), m.from, m.to)
	}
}

// recordMove asks the node at addr to move slots first to last to group
// target, retrying while the meta group has no leader, and returns the
// move's id. An unknown outcome is not retried: a second move of the same
// slots would be recorded if the first was.
func recordMove(addr string, timeout time.Duration, first, last, target int) (uint64, error) {
	var id int64
	err := retryAdmin(timeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		c := adminClient(addr)
		defer c.Close()
		var err error
		id, err = c.Do(ctx, "KVS.SLOTS", "MOVE", first, last, target).Int64()
		if err != nil && strings.HasPrefix(err.Error(), "UNCERTAIN") {
			return fmt.Errorf("the move may or may not have been recorded (kvs slots status lists it if it was): %v", err)
		}
		return err
	})
	return uint64(id), err
}

// waitMoves prints the progress of the moves ids as it changes until every
// one is over: 0 when all are done, 1 when one was cancelled or the
// cluster stopped answering for a minute.
func waitMoves(addr string, ids []uint64, stdout, stderr io.Writer) int {
	last := map[int64]string{}
	failing := time.Time{}
	for {
		ms, err := fetchMoves(addr)
		if err != nil {
			// A node changing leaders, or restarting: keep asking a while.
			if failing.IsZero() {
				failing = time.Now()
			} else if time.Since(failing) > time.Minute {
				fmt.Fprintf(stderr, "kvs rebalance: %v\n", err)
				return 1
			}
			time.Sleep(250 * time.Millisecond)
			continue
		}
		failing = time.Time{}
		over, cancelled := 0, 0
		for _, id := range ids {
			i := slices.IndexFunc(ms, func(m shownMove) bool { return m.id == int64(id) })
			if i < 0 {
				fmt.Fprintf(stderr, "kvs rebalance: the cluster lists no move %d\n", id)
				return 1
			}
			m := ms[i]
			if line := moveLine(m); line != last[m.id] {
				fmt.Fprintln(stdout, line)
				last[m.id] = line
			}
			switch m.phase {
			case phaseDone:
				over++
			case phaseCancelled:
				over++
				cancelled++
			}
		}
		if over == len(ids) {
			if cancelled > 0 {
				fmt.Fprintf(stderr, "kvs rebalance: %d of %d moves were cancelled\n", cancelled, len(ids))
				return 1
			}
			return 0
		}
		time.Sleep(250 * time.Millisecond)
	}
}
