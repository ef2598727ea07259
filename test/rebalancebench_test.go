package test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// BenchmarkRebalance: how long a rebalance takes after `kvs groups add`,
// and what it costs the clients. Three nodes and three groups hold
// -movebench.bytes of data (-movebench.value bytes a key) over all the
// slots, about a third each, and have saved it (SAVE, as in
// BenchmarkSlotMove); `kvs groups add` makes a fourth group (timed
// until every node names its leader), and `kvs rebalance --wait`, the CLI
// as an operator runs it, gives it its share at -movebench.rate: a
// quarter of the data, one move from each of the three groups, run one at
// a time. Timed: the rebalance's plan (from its start until it has read
// every slot's size and recorded its moves) and the whole rebalance until
// every move is done; KVS.SLOTS STATUS, polled every 20 ms, gives each
// move's phases, keys and bytes. Once with nothing else running (idle)
// and once under BenchmarkSlotMove's mix (SET:GET 1:10, 8 connections) on
// keys of the slots that stay where they are, which a `kvs rebalance
// --dry-run` first says. Throughout, as in BenchmarkSlotMove, 4
// connections write keys of the moving slots one timed SET at a time; the
// mix's throughput during the rebalance is set beside its own for 10 s
// before. What each group holds before and after is KVS.SLOTS SIZES
// summed, as kvs rebalance reads it.
//
// Its log is longer than the 10 lines go test keeps of a benchmark's
// without -v: run it with -v.
//
//	make rebalancebench MOVE_BYTES=1gb
//	go test ./test/ -v -run '^$' -bench '^BenchmarkRebalance$' -benchtime 1x -timeout 60m \
//	    -args -movebench.bytes=1gb -movebench.pin
func BenchmarkRebalance(b *testing.B) {
	idleAndMix(b, benchRebalance)
}

// plannedRun is one move of a rebalance: slots first to last from group from
// to group to.
type plannedRun struct {
	first, last, from, to int
}

var (
	// A plan's line in kvs rebalance's output.
	planLine = regexp.MustCompile(`^plan: slots (\d+)-(\d+) \(.*\) from group (\d+) to group (\d+)$`)
	// A move recorded, in kvs rebalance's output (its progress lines go
	// on with a colon and the phase).
	recordedLine = regexp.MustCompile(`^move (\d+): slots (\d+)-(\d+) from group (\d+) to group (\d+)$`)
)

// runOf reads the slot run of a line m matched, from its field i on.
func runOf(m []string, i int) plannedRun {
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	return plannedRun{first: n(m[i]), last: n(m[i+1]), from: n(m[i+2]), to: n(m[i+3])}
}

// holding is what a group's slots hold, as KVS.SLOTS SIZES counts it.
type holding struct{ keys, bytes int64 }

func benchRebalance(b *testing.B, size int64, mix bool) {
	nodes := startCluster(b, 3, append([]string{"--groups", "3", "--slot-move-rate", *flagMoveBenchRate}, strings.Fields(*flagMoveBenchArgs)...)...)
	waitSpread(b, nodes)
	pinBench(b, nodes)
	ctx := context.Background()
	cc := benchClient(nodes)
	defer cc.Close()
	addr := nodes[0].Addr

	// The data, over every slot; the probes' and the mix's keys too, so
	// that what the groups hold does not change once the plan is made:
	// which of them are in moving slots the plan says.
	nkeys := int(size / int64(*flagMoveBenchValue))
	val := strings.Repeat("x", *flagMoveBenchValue)
	start := time.Now()
	fillKeys(b, ctx, cc, "rb", nkeys, val, func(int) bool { return true })
	probeAll := moveKeys("probe", 4000, 0, 16383)
	mixAll := moveKeys("mix", 13334, 0, 16383) // about 10,000 in the slots that stay
	setAll(b, ctx, cc, probeAll, "p")
	setAll(b, ctx, cc, mixAll, mixValue)
	b.Logf("loaded %d keys of %d bytes (%d MiB) over all slots in %v",
		nkeys, len(val), size>>20, time.Since(start).Round(time.Second))
	saveAll(b, ctx, nodes)
	b.Logf("the groups hold %s", holdingsText(groupSizes(b, ctx, nodes)))

	// The new group, timed until every node names its leader.
	addStart := time.Now()
	out, code := runKVS(b, clusterWait, "groups", "add", addr)
	var gid int
	if _, err := fmt.Sscanf(strings.TrimSpace(out), "added group %d", &gid); code != 0 || err != nil {
		b.Fatalf("kvs groups add: exit %d\n%s", code, out)
	}
	addAnswered := time.Since(addStart)
	waitFor(b, fmt.Sprintf("every node to name group %d's leader", gid), func() error {
		leaders, err := groupLeaders(nodes)
		if err == nil && leaders[gid] == "" {
			err = fmt.Errorf("group %d has no leader (%v)", gid, leaders)
		}
		return err
	})
	addTime := time.Since(addStart)
	// Each data group led by its preferred node (the new one's first
	// leader may hand it over), so that the 10 s before the rebalance are
	// quiet; not waited for past 30 s.
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	settled := "did not settle in 30 s"
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		leaders, err := groupLeaders(nodes)
		if err != nil {
			continue
		}
		ok := true
		for id, l := range leaders {
			ok = ok && (id == 0 || l == placement(id, names, 3)[0])
		}
		if ok {
			settled = fmt.Sprintf("settled on the preferred nodes %v after the add began", time.Since(addStart).Round(time.Millisecond))
			break
		}
	}
	b.Logf("kvs groups add: added group %d, answered in %v, led (every node naming its leader) %v after the add began; leaderships %s",
		gid, addAnswered.Round(time.Millisecond), addTime.Round(time.Millisecond), settled)

	// A dry run: the plan, and so which keys the probes and the mix take.
	// It is run again should it fail (a group between leaders, on a busy
	// machine).
	var dry []plannedRun
	var dryTime time.Duration
	for attempt := 1; ; attempt++ {
		waitFor(b, "every group to have a leader", func() error { _, err := groupLeaders(nodes); return err })
		dryStart := time.Now()
		out, code = runKVS(b, 5*time.Minute, "rebalance", "--dry-run", addr)
		dryTime = time.Since(dryStart)
		for _, line := range strings.Split(out, "\n") {
			if m := planLine.FindStringSubmatch(line); m != nil {
				dry = append(dry, runOf(m, 1))
			}
		}
		if code == 0 && len(dry) > 0 {
			break
		}
		if attempt == 3 {
			b.Fatalf("kvs rebalance --dry-run: exit %d, no plan\n%s", code, out)
		}
		b.Logf("kvs rebalance --dry-run: exit %d, no plan, trying again:\n%s", code, out)
	}
	b.Logf("kvs rebalance --dry-run: planned in %v, %s", dryTime.Round(time.Millisecond), runsText(dry))
	moving := moveIndex(dry)
	var probeKeys, mixKeys []string
	for _, k := range probeAll {
		if moving[keySlot(k)] > 0 {
			probeKeys = append(probeKeys, k)
		}
	}
	for _, k := range mixAll {
		if moving[keySlot(k)] == 0 {
			mixKeys = append(mixKeys, k)
		}
	}
	if len(probeKeys) == 0 || len(mixKeys) == 0 {
		b.Fatalf("%d probe keys in the moving slots, %d mix keys in the others", len(probeKeys), len(mixKeys))
	}

	stop := make(chan struct{})
	var lwg sync.WaitGroup
	probes := startProbes(ctx, cc, probeKeys, stop, &lwg)
	mixCount := &opCounts{bySec: map[int64]int{}}
	if mix {
		startMix(ctx, cc, mixKeys, mixCount, stop, &lwg)
	}
	time.Sleep(10 * time.Second) // the mix's own pace, before the rebalance

	// The rebalance, its lines timed as they come and the moves' phases
	// polled.
	pollStop := make(chan struct{})
	var pwg sync.WaitGroup
	phases := map[int64]map[string]time.Time{} // id -> phase -> first seen
	lastCopying := map[int64]time.Time{}       // id -> the copy last seen going on
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, Protocol: 2})
		defer c.Close()
		for {
			ms, err := allMoves(ctx, c)
			now := time.Now()
			if err == nil {
				for _, m := range ms {
					id, _ := m["id"].(int64)
					ph, _ := m["phase"].(string)
					if phases[id] == nil {
						phases[id] = map[string]time.Time{}
					}
					if _, seen := phases[id][ph]; !seen {
						phases[id][ph] = now
					}
					if ph == "copying" {
						lastCopying[id] = now
					}
				}
			}
			select {
			case <-pollStop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var rebStart, planAt, recordedAt time.Time
	var ids []int64
	var runs []plannedRun
	var rebOut strings.Builder
	for attempt := 1; ; attempt++ {
		// Run again should it fail before it records a move (a group
		// between leaders, on a busy machine), timed from the new start.
		rebStart = time.Now()
		planAt = time.Time{}
		rebOut.Reset()
		code = runKVSLines(b, 50*time.Minute, func(at time.Time, line string) {
			rebOut.WriteString(line + "\n")
			if planAt.IsZero() && strings.HasPrefix(line, "plan: ") {
				planAt = at
			}
			if m := recordedLine.FindStringSubmatch(line); m != nil {
				id, _ := strconv.ParseInt(m[1], 10, 64)
				ids = append(ids, id)
				runs = append(runs, runOf(m, 2))
				recordedAt = at
			}
		}, "rebalance", "--wait", addr)
		if code == 0 || len(ids) > 0 || attempt == 3 {
			break
		}
		b.Logf("kvs rebalance --wait: exit %d before it recorded a move, trying again:\n%s", code, rebOut.String())
		waitFor(b, "every group to have a leader", func() error { _, err := groupLeaders(nodes); return err })
	}
	rebEnd := time.Now()
	close(pollStop)
	pwg.Wait()
	time.Sleep(2 * time.Second)
	close(stop)
	lwg.Wait()
	if code != 0 || len(ids) == 0 {
		b.Fatalf("kvs rebalance --wait: exit %d, %d moves\n%s", code, len(ids), rebOut.String())
	}
	if !slices.Equal(runs, dry) {
		b.Logf("the rebalance's plan is not the dry run's, which chose the probes' and the mix's keys: %v, then %v", dry, runs)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, Protocol: 2})
	ms, err := allMoves(ctx, c)
	c.Close()
	if err != nil {
		b.Fatal(err)
	}
	finals := map[int64]map[string]any{}
	for _, m := range ms {
		id, _ := m["id"].(int64)
		finals[id] = m
	}
	var movedBytes, movedKeys int64
	for _, id := range ids {
		if finals[id]["phase"] != "done" {
			b.Fatalf("move %d ended %v", id, finals[id])
		}
		n, _ := finals[id]["bytes"].(int64)
		k, _ := finals[id]["keys"].(int64)
		movedBytes += n
		movedKeys += k
	}

	// What each group holds now, and whether a second rebalance would
	// move anything.
	after := groupSizes(b, ctx, nodes)
	out, code = runKVS(b, 5*time.Minute, "rebalance", "--dry-run", addr)
	if code != 0 {
		b.Errorf("kvs rebalance --dry-run after: exit %d\n%s", code, out)
	}

	total := rebEnd.Sub(rebStart)
	all := probes.all()
	n, p50, p99, maxd, errs := writeStats(all, rebStart, rebEnd)
	bn, bp50, bp99, bmax, _ := writeStats(all, rebStart.Add(-10*time.Second), rebStart)
	b.Logf("rebalance: %d moves, %d keys, %.1f MiB in %v (%.1f MiB/s); sizes read and planned at %v, the moves recorded at %v",
		len(ids), movedKeys, float64(movedBytes)/(1<<20), total.Round(time.Millisecond), float64(movedBytes)/(1<<20)/total.Seconds(),
		planAt.Sub(rebStart).Round(time.Millisecond), recordedAt.Sub(rebStart).Round(time.Millisecond))
	ran := moveIndex(runs)
	var longestHandover time.Duration
	prevDone := rebStart
	for i, id := range ids {
		ph := phases[id]
		r := runs[i]
		// A move waits its turn in begun: its copy begins when the one
		// before is done, if the poll missed it.
		copyStart, ok := ph["copying"]
		if !ok {
			copyStart = prevDone
		}
		fence, ok := ph["fenced"]
		if !ok {
			fence = lastCopying[id]
			if fence.IsZero() {
				fence = copyStart
			}
		}
		flip, ok := ph["released"]
		if !ok {
			flip = ph["flipped"]
			if flip.IsZero() {
				flip = ph["done"]
			}
		}
		done := ph["done"]
		if done.IsZero() {
			done = rebEnd
		}
		prevDone = done
		longestHandover = max(longestHandover, flip.Sub(fence))
		var mine []timedWrite
		for _, w := range all {
			if ran[keySlot(w.key)] == i+1 {
				mine = append(mine, w)
			}
		}
		bytes, _ := finals[id]["bytes"].(int64)
		keys, _ := finals[id]["keys"].(int64)
		hn, hp50, hp99, hmax, herrs := writeStats(mine, fence.Add(-100*time.Millisecond), flip)
		b.Logf("move %d: slots %d-%d from group %d to group %d: %d keys, %.1f MiB, copied from %v to %v (%.1f MiB/s), done at %v; hand-over %v, its writes %d, p50 %v, p99 %v, max %v, %d errors",
			id, r.first, r.last, r.from, r.to, keys, float64(bytes)/(1<<20),
			copyStart.Sub(rebStart).Round(time.Millisecond), fence.Sub(rebStart).Round(time.Millisecond),
			float64(bytes)/(1<<20)/fence.Sub(copyStart).Seconds(), done.Sub(rebStart).Round(time.Millisecond),
			flip.Sub(fence).Round(time.Millisecond), hn, hp50, hp99, hmax, herrs)
	}
	b.Logf("writes to the moving slots during the rebalance: %d, p50 %v, p99 %v, max %v, %d errors", n, p50, p99, maxd, errs)
	for _, w := range all {
		if w.err != nil {
			b.Logf("a write sent %v into the rebalance failed after %v: %v", w.at.Sub(rebStart).Round(time.Millisecond), w.dur.Round(time.Millisecond), w.err)
		}
	}
	b.Logf("writes to the same slots in the 10 s before: %d, p50 %v, p99 %v, max %v", bn, bp50, bp99, bmax)
	second := "balanced: nothing to move"
	if !strings.Contains(out, second) {
		var more []plannedRun
		for _, line := range strings.Split(out, "\n") {
			if m := planLine.FindStringSubmatch(line); m != nil {
				more = append(more, runOf(m, 1))
			}
		}
		second = "would move " + runsText(more)
	}
	b.Logf("the groups hold %s after; a second kvs rebalance --dry-run: %s", holdingsText(after), second)
	b.ReportMetric(addTime.Seconds(), "add-to-leader-s")
	b.ReportMetric(recordedAt.Sub(rebStart).Seconds(), "plan-s")
	b.ReportMetric(total.Seconds(), "rebalance-s")
	b.ReportMetric(float64(len(ids)), "moves")
	b.ReportMetric(float64(movedBytes)/(1<<20), "moved-MiB")
	b.ReportMetric(float64(movedBytes)/(1<<20)/total.Seconds(), "MiB/s")
	for id, h := range after {
		b.ReportMetric(float64(h.bytes)/(1<<20), fmt.Sprintf("g%d-MiB", id))
	}
	b.ReportMetric(float64(p50.Microseconds())/1000, "write-p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "write-p99-ms")
	b.ReportMetric(float64(maxd.Microseconds())/1000, "write-max-ms")
	b.ReportMetric(float64(errs), "write-errors")
	b.ReportMetric(float64(longestHandover.Microseconds())/1000, "handover-max-ms")
	if mix {
		before := mixCount.rate(rebStart.Add(-10*time.Second), rebStart)
		during := mixCount.rate(rebStart, rebEnd)
		b.Logf("the mix on the slots that stay: %.0f ops/s before, %.0f during the rebalance (%.2f)", before, during, during/before)
		b.ReportMetric(during/before, "mix-during/before")
		mixLatency(b, mixCount, rebStart, rebEnd, "the rebalance")
	}
	if errs > 0 {
		// Not b.Errorf, which would drop the metrics of a long run.
		b.Logf("WRITE ERRORS: %d writes to the moving slots failed during the rebalance (listed above)", errs)
	}
}

// groupLeaders is the leader's id of every group (the meta group's too),
// which every one of nodes must name alike.
func groupLeaders(nodes []*Node) (map[int]string, error) {
	leaders := map[int]string{}
	for i, n := range nodes {
		st, err := kvsStatus(n.Addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", n.Name, err)
		}
		for _, row := range st.groups {
			id, err := strconv.Atoi(row[0])
			if err != nil || len(row) < 3 || row[2] == "" {
				return nil, fmt.Errorf("%s knows no leader of group %v", n.Name, row)
			}
			if i > 0 && leaders[id] != row[2] {
				return nil, fmt.Errorf("%s names %s as group %d's leader, %s names %q", n.Name, row[2], id, nodes[0].Name, leaders[id])
			}
			leaders[id] = row[2]
		}
	}
	return leaders, nil
}

// runsText lists runs in a line.
func runsText(runs []plannedRun) string {
	var s []string
	for _, r := range runs {
		s = append(s, fmt.Sprintf("slots %d-%d from group %d to group %d", r.first, r.last, r.from, r.to))
	}
	return fmt.Sprintf("%d moves: %s", len(runs), strings.Join(s, ", "))
}

// moveIndex maps each slot to 1 + the index in runs of the run holding it,
// 0 for a slot in none.
func moveIndex(runs []plannedRun) []int {
	idx := make([]int, 16384)
	for i, r := range runs {
		for s := r.first; s <= r.last; s++ {
			idx[s] = i + 1
		}
	}
	return idx
}

// groupSizes is what each data group holds, KVS.SLOTS SIZES asked of its
// leader over its slots 1,024 at a time (as kvs rebalance asks), once
// every node routes by the same slot map.
func groupSizes(t testing.TB, ctx context.Context, nodes []*Node) map[int]holding {
	t.Helper()
	owners, _ := sameMapEverywhere(t, nodes)
	var out map[int]holding
	waitFor(t, "the groups' sizes", func() error {
		st, err := kvsStatus(nodes[0].Addr)
		if err != nil {
			return err
		}
		clients := map[string]string{} // node id -> client address
		for _, m := range st.members {
			if len(m) > 2 {
				clients[m[0]] = m[2]
			}
		}
		out = map[int]holding{}
		for _, id := range groupIDs(st) {
			row, _ := groupRow(st, id)
			if len(row) < 3 || clients[row[2]] == "" {
				return fmt.Errorf("no leader known of group %d (%v)", id, row)
			}
			c := redis.NewClient(&redis.Options{Addr: clients[row[2]], MaxRetries: -1, Protocol: 2})
			var h holding
			for s := 0; s < len(owners); s++ {
				if owners[s] != id {
					continue
				}
				e := s
				for e+1 < len(owners) && owners[e+1] == id && e+1-s < 1024 {
					e++
				}
				vals, err := c.Do(ctx, "KVS.SLOTS", "SIZES", s, e).Slice()
				if err != nil {
					c.Close()
					return fmt.Errorf("KVS.SLOTS SIZES %d %d of group %d at %s: %v", s, e, id, clients[row[2]], err)
				}
				for i := 0; i+2 < len(vals); i += 3 {
					k, _ := vals[i+1].(int64)
					n, _ := vals[i+2].(int64)
					h.keys += k
					h.bytes += n
				}
				s = e
			}
			c.Close()
			out[id] = h
		}
		return nil
	})
	return out
}

// holdingsText is each group's keys and MiB, and its share of the bytes.
func holdingsText(hs map[int]holding) string {
	var total int64
	for _, h := range hs {
		total += h.bytes
	}
	var s []string
	for _, id := range slices.Sorted(maps.Keys(hs)) {
		h := hs[id]
		share := 0.0
		if total > 0 {
			share = 100 * float64(h.bytes) / float64(total)
		}
		s = append(s, fmt.Sprintf("group %d %d keys %.1f MiB (%.1f%%)", id, h.keys, float64(h.bytes)/(1<<20), share))
	}
	return strings.Join(s, ", ")
}

// runKVSLines runs a one-shot kvs invocation, handing each line of its
// output (stdout and stderr) to line with the time it was read, and
// returns its exit code. It fails t if the process does not end within
// the deadline.
func runKVSLines(t testing.TB, timeout time.Duration, line func(at time.Time, line string), args ...string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, requireKVS(t), args...)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = childAttr()
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line(time.Now(), sc.Text())
	}
	r.Close()
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("kvs %v still running after %v", args, timeout)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("kvs %v: %v", args, err)
	}
	return 0
}
