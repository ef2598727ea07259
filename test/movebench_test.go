package test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// BenchmarkSlotMove: what a move of slots costs the clients. Three nodes
// and three groups; slots 0-5460 (group 1) are filled with
// -movebench.bytes of data (-movebench.value bytes a key), then moved to
// group 2 (KVS.SLOTS MOVE) at the default pace, once with nothing else
// running (idle) and once under the mix (the memtier shape, SET:GET 1:10,
// 8 connections) on keys of the slots not moving. Throughout, 4
// connections write keys of the moving slots one SET at a time, each
// timed: their latencies during the move, and those of the writes that
// met the hand-over (sent between the move's fence and the flip of the
// map, as KVS.SLOTS STATUS shows the phases, polled every 20 ms), are the
// write pause clients see. The mix's throughput during the copy is set
// beside its own for 10 s before.
//
//	go test ./test/ -run '^$' -bench SlotMove -benchtime 1x -timeout 60m \
//	    -args -movebench.bytes=1gb -movebench.pin
//
// With -movebench.pin the nodes run on CPU 0 and the benchmark (loads and
// probes) on CPU 1.
var (
	flagMoveBenchBytes   = flag.String("movebench.bytes", "64mb", "BenchmarkSlotMove: bytes of data in the moving slots; BenchmarkRebalance: in the whole cluster")
	flagMoveBenchValue   = flag.Int("movebench.value", 1000, "BenchmarkSlotMove, BenchmarkRebalance: bytes of each key's value")
	flagMoveBenchRate    = flag.String("movebench.rate", "4mb", "BenchmarkSlotMove, BenchmarkRebalance: --slot-move-rate of the nodes (4mb, its default)")
	flagMoveBenchPin     = flag.Bool("movebench.pin", false, "BenchmarkSlotMove, BenchmarkRebalance: nodes on CPU 0, the benchmark on CPU 1 (taskset)")
	flagMoveBenchControl = flag.Duration("movebench.control", 0, "BenchmarkSlotMove: make no move, and compare the mix over this long with the 10 s before (what the windows change by themselves)")
	flagMoveBenchProf    = flag.String("movebench.profile", "", "BenchmarkSlotMove: a directory to write each node's CPU profile of the copy's first 5 s to")
	flagMoveBenchArgs    = flag.String("movebench.args", "", "BenchmarkSlotMove, BenchmarkRebalance: more kvs serve flags for every node, space-separated")
)

func BenchmarkSlotMove(b *testing.B) {
	idleAndMix(b, benchMove)
}

// idleAndMix runs bench on -movebench.bytes as sub-benchmarks idle and
// mix (under the mix on the slots that stay).
func idleAndMix(b *testing.B, bench func(b *testing.B, size int64, mix bool)) {
	size, err := parseBytes(*flagMoveBenchBytes)
	if err != nil {
		b.Fatal(err)
	}
	for _, mix := range []bool{false, true} {
		name := "idle"
		if mix {
			name = "mix"
		}
		b.Run(name, func(b *testing.B) { bench(b, size, mix) })
	}
}

func parseBytes(s string) (int64, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}, {"b", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.n
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	return n * mult, nil
}

// timedWrite is one probe SET: its key, when it was sent and how long it
// took.
type timedWrite struct {
	key string
	at  time.Time
	dur time.Duration
	err error
}

func benchMove(b *testing.B, size int64, mix bool) {
	args := append([]string{"--groups", "3", "--slot-move-rate", *flagMoveBenchRate}, strings.Fields(*flagMoveBenchArgs)...)
	var nodes []*Node
	var metrics []string
	if *flagMoveBenchProf == "" {
		nodes = startCluster(b, 3, args...)
	} else {
		for i := 1; i <= 3; i++ {
			m := freeAddr(b)
			metrics = append(metrics, m)
			extra := append(slices.Clone(args), "--metrics-addr", m, "--pprof")
			if i == 1 {
				extra = append(extra, "--bootstrap")
			}
			n := newClusterNode(b, fmt.Sprintf("n%d", i), extra...)
			n.Start()
			if i > 1 {
				if out, code := runKVS(b, clusterWait, "join", nodes[0].Addr, n.Addr); code != 0 {
					b.Fatalf("kvs join: exit %d\n%s", code, out)
				}
			}
			nodes = append(nodes, n)
		}
		waitMembers(b, nodes, 3)
	}
	waitSpread(b, nodes)
	pinBench(b, nodes)
	ctx := context.Background()
	cc := benchClient(nodes)
	defer cc.Close()

	// The data: keys of slots 0-5460, group 1's.
	const first, last = 0, 5460
	nkeys := int(size / int64(*flagMoveBenchValue))
	val := strings.Repeat("x", *flagMoveBenchValue)
	start := time.Now()
	fillKeys(b, ctx, cc, "mb", nkeys, val, func(s int) bool { return s >= first && s <= last })
	b.Logf("loaded %d keys of %d bytes (%d MiB) into slots %d-%d in %v", nkeys, len(val), size>>20, first, last, time.Since(start).Round(time.Second))
	saveAll(b, ctx, nodes)

	stop := make(chan struct{})
	var lwg sync.WaitGroup
	// The probes: SETs to keys of the moving slots, one at a time, timed.
	probes := startProbes(ctx, cc, moveKeys("probe", 1000, first, last), stop, &lwg)
	// The mix on the slots that stay: ops counted by second.
	mixCount := &opCounts{bySec: map[int64]int{}}
	if mix {
		mixKeys := moveKeys("mix", 10000, last+1, 16383)
		setAll(b, ctx, cc, mixKeys, mixValue)
		startMix(ctx, cc, mixKeys, mixCount, stop, &lwg)
	}
	time.Sleep(10 * time.Second) // the mix's own pace, before the move
	// The move, its phases polled.
	moveStart := time.Now()
	if *flagMoveBenchControl > 0 {
		// No move: the same windows, for what they change by themselves.
		time.Sleep(*flagMoveBenchControl)
		close(stop)
		lwg.Wait()
		before := mixCount.rate(moveStart.Add(-10*time.Second), moveStart)
		during := mixCount.rate(moveStart, moveStart.Add(*flagMoveBenchControl))
		b.Logf("control, no move: the mix did %.0f ops/s in the 10 s before, %.0f in the %v after (%.2f)",
			before, during, *flagMoveBenchControl, during/before)
		return
	}
	id, err := cc.Do(ctx, "KVS.SLOTS", "MOVE", first, last, 2).Int64()
	if err != nil {
		b.Fatal(err)
	}
	var pwg sync.WaitGroup
	for i, m := range metrics {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			name := fmt.Sprintf("%s/%s-%s.pprof", *flagMoveBenchProf, map[bool]string{false: "idle", true: "mix"}[mix], nodes[i].Name)
			out, err := exec.Command("curl", "-s", "-o", name, "http://"+m+"/debug/pprof/profile?seconds=5").CombinedOutput()
			if err != nil {
				b.Errorf("profiling %s: %v\n%s", nodes[i].Name, err, out)
			}
		}()
	}
	defer pwg.Wait()
	phases := map[string]time.Time{} // when each phase was first seen
	var lastCopying time.Time        // when the copy was last seen going on
	var final map[string]any
	for {
		m, err := moveStatus(ctx, nodes[0].Addr, id)
		if err == nil {
			ph, _ := m["phase"].(string)
			if _, seen := phases[ph]; !seen {
				phases[ph] = time.Now()
			}
			if ph == "copying" || ph == "begun" {
				lastCopying = time.Now()
			}
			if ph == "done" || ph == "cancelled" {
				final = m
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	moveEnd := time.Now()
	time.Sleep(2 * time.Second)
	close(stop)
	lwg.Wait()
	if final["phase"] != "done" {
		b.Fatalf("move %d ended %v", id, final)
	}

	all := probes.all()
	lat := func(from, to time.Time) (n int, p50, p99, maxd time.Duration, errs int) {
		return writeStats(all, from, to)
	}
	// The hand-over: from the fence (or, if the poll missed it, the
	// copy last seen going on) to the flip of the map, with the writes
	// sent just before the fence that it held.
	fence, ok := phases["fenced"]
	if !ok {
		fence = lastCopying
	}
	flip, ok := phases["released"]
	if !ok {
		flip = phases["flipped"]
		if flip.IsZero() {
			flip = phases["done"]
		}
	}
	bytes, _ := final["bytes"].(int64)
	keysCopied, _ := final["keys"].(int64)
	copyEnd := fence
	copyTime := copyEnd.Sub(moveStart)
	n, p50, p99, maxd, errs := lat(moveStart, moveEnd)
	b.Logf("move %d: %d keys, %d MiB in %v (%.1f MiB/s over the copy of %v); phases %s",
		id, keysCopied, bytes>>20, moveEnd.Sub(moveStart).Round(time.Millisecond), float64(bytes)/(1<<20)/copyTime.Seconds(),
		copyTime.Round(time.Millisecond), phaseTimes(phases, moveStart))
	b.Logf("writes to the moving slots during the move: %d, p50 %v, p99 %v, max %v, %d errors", n, p50, p99, maxd, errs)
	for _, w := range all {
		if w.err != nil {
			b.Logf("a write sent %v into the move failed after %v: %v", w.at.Sub(moveStart).Round(time.Millisecond), w.dur.Round(time.Millisecond), w.err)
		}
	}
	hn, hp50, hp99, hmax, herrs := lat(fence.Add(-100*time.Millisecond), flip)
	b.Logf("writes sent from 100 ms before the fence to the flip (%v): %d, p50 %v, p99 %v, max %v, %d errors",
		flip.Sub(fence).Round(time.Millisecond), hn, hp50, hp99, hmax, herrs)
	bn, bp50, bp99, bmax, _ := lat(moveStart.Add(-10*time.Second), moveStart)
	b.Logf("writes to the same slots in the 10 s before: %d, p50 %v, p99 %v, max %v", bn, bp50, bp99, bmax)
	b.ReportMetric(float64(p99.Microseconds())/1000, "move-write-p99-ms")
	b.ReportMetric(float64(maxd.Microseconds())/1000, "move-write-max-ms")
	b.ReportMetric(float64(hp50.Microseconds())/1000, "handover-p50-ms")
	b.ReportMetric(float64(hp99.Microseconds())/1000, "handover-p99-ms")
	b.ReportMetric(float64(bytes)/(1<<20)/copyTime.Seconds(), "copy-MiB/s")
	if mix {
		before := mixCount.rate(moveStart.Add(-10*time.Second), moveStart)
		during := mixCount.rate(moveStart, copyEnd)
		b.Logf("the mix on the other slots: %.0f ops/s before, %.0f during the copy (%.2f)", before, during, during/before)
		b.ReportMetric(during/before, "mix-during/before")
		mixLatency(b, mixCount, moveStart, copyEnd, "the copy")
	}
}

// perSecond is the mean of counts (ops by unix second) over the whole
// seconds strictly between from and to.
func perSecond(counts map[int64]int, from, to time.Time) float64 {
	var sum, secs int
	for s := from.Unix() + 1; s < to.Unix(); s++ {
		sum += counts[s]
		secs++
	}
	if secs == 0 {
		return 0
	}
	return float64(sum) / float64(secs)
}

// phaseTimes lists the phases seen, each with when it was first seen
// after the move began.
func phaseTimes(phases map[string]time.Time, from time.Time) string {
	type pt struct {
		name string
		at   time.Duration
	}
	var ps []pt
	for name, at := range phases {
		ps = append(ps, pt{name, at.Sub(from)})
	}
	slices.SortFunc(ps, func(a, b pt) int { return int(a.at - b.at) })
	var s []string
	for _, p := range ps {
		s = append(s, fmt.Sprintf("%s at %v", p.name, p.at.Round(time.Millisecond)))
	}
	return strings.Join(s, ", ")
}

// pinBench puts nodes on CPU 0 and the benchmark on CPU 1 under
// -movebench.pin.
func pinBench(b *testing.B, nodes []*Node) {
	b.Helper()
	if !*flagMoveBenchPin {
		return
	}
	for _, n := range nodes {
		if out, err := exec.Command("taskset", "-a", "-p", "-c", "0", strconv.Itoa(n.Pid())).CombinedOutput(); err != nil {
			b.Fatalf("taskset %s: %v\n%s", n.Name, err, out)
		}
	}
	if out, err := exec.Command("taskset", "-a", "-p", "-c", "1", strconv.Itoa(os.Getpid())).CombinedOutput(); err != nil {
		b.Fatalf("taskset the benchmark: %v\n%s", err, out)
	}
}

// benchClient is the benchmarks' ClusterClient over nodes.
func benchClient(nodes []*Node) *redis.ClusterClient {
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
	}
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16, PoolSize: 64})
}

// fillKeys writes nkeys keys prefix:0, prefix:1, ... whose slot keep
// takes, each set to val, in pipelines of 200 over 8 connections.
func fillKeys(b *testing.B, ctx context.Context, cc *redis.ClusterClient, prefix string, nkeys int, val string, keep func(slot int) bool) {
	b.Helper()
	keys := make(chan []string, 16)
	go func() {
		defer close(keys)
		batch := make([]string, 0, 200)
		n := 0
		for i := 0; n < nkeys; i++ {
			k := prefix + ":" + strconv.Itoa(i)
			if !keep(keySlot(k)) {
				continue
			}
			batch = append(batch, k)
			n++
			if len(batch) == cap(batch) {
				keys <- batch
				batch = make([]string, 0, 200)
			}
		}
		if len(batch) > 0 {
			keys <- batch
		}
	}()
	var wg sync.WaitGroup
	var loadErr error
	var mu sync.Mutex
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range keys {
				pipe := cc.Pipeline()
				for _, k := range batch {
					pipe.Set(ctx, k, val, 0)
				}
				if _, err := pipe.Exec(ctx); err != nil {
					mu.Lock()
					loadErr = err
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if loadErr != nil {
		b.Fatalf("loading: %v", loadErr)
	}
}

// saveAll has every node save every group (SAVE). A cluster that has held
// its data a while has snapshotted it: so that the snapshot the fill calls
// for does not fall in the windows measured, the benchmarks save after
// the fill.
func saveAll(b *testing.B, ctx context.Context, nodes []*Node) {
	b.Helper()
	start := time.Now()
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr, ReadTimeout: 5 * time.Minute})
		err := c.Do(ctx, "SAVE").Err()
		c.Close()
		if err != nil {
			b.Fatalf("SAVE on %s: %v", n.Name, err)
		}
	}
	b.Logf("every node snapshotted its groups (SAVE) in %v", time.Since(start).Round(100*time.Millisecond))
}

// setAll sets every one of keys to val, in one pipeline.
func setAll(b *testing.B, ctx context.Context, cc *redis.ClusterClient, keys []string, val string) {
	b.Helper()
	pipe := cc.Pipeline()
	for _, k := range keys {
		pipe.Set(ctx, k, val, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
}

// probeSet is the timed writes of the probes, one slice per connection.
type probeSet [4][]timedWrite

func (p *probeSet) all() []timedWrite {
	var all []timedWrite
	for _, ws := range p {
		all = append(all, ws...)
	}
	return all
}

// startProbes starts 4 connections each writing a key of keys at random,
// one SET at a time with a millisecond between, each timed, until stop is
// closed; read what they wrote once wg is done.
func startProbes(ctx context.Context, cc *redis.ClusterClient, keys []string, stop chan struct{}, wg *sync.WaitGroup) *probeSet {
	probes := &probeSet{}
	for i := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(i)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := keys[rng.Intn(len(keys))]
				t0 := time.Now()
				err := cc.Set(ctx, k, "p", 0).Err()
				probes[i] = append(probes[i], timedWrite{key: k, at: t0, dur: time.Since(t0), err: err})
				time.Sleep(time.Millisecond)
			}
		}()
	}
	return probes
}

// mixValue is what the mix writes (and its keys hold before it starts).
const mixValue = "0123456789abcdef0123456789abcdef"

// opCounts is ops counted by the unix second they ended in, with their
// latencies in a histogram a second (latBuckets).
type opCounts struct {
	mu    sync.Mutex
	bySec map[int64]int
	lat   map[int64]*latHist
}

// latHist counts latencies in buckets 8% wide from 10 µs (the last bucket
// takes the rest), and keeps the largest.
type latHist struct {
	n   [latBuckets]int32
	max time.Duration
}

const latBuckets = 240

// latBucket is d's bucket: the i with 10µs·1.08^i <= d < 10µs·1.08^(i+1).
func latBucket(d time.Duration) int {
	if d < 10*time.Microsecond {
		return 0
	}
	return min(int(math.Log(float64(d)/float64(10*time.Microsecond))/math.Log(1.08)), latBuckets-1)
}

// record counts an op that ended at end after d.
func (o *opCounts) record(end time.Time, d time.Duration) {
	sec := end.Unix()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.bySec[sec]++
	if o.lat == nil {
		o.lat = map[int64]*latHist{}
	}
	h := o.lat[sec]
	if h == nil {
		h = &latHist{}
		o.lat[sec] = h
	}
	h.n[latBucket(d)]++
	h.max = max(h.max, d)
}

// latency is the p50 and p99 (each the top of its bucket, within 8%) and
// the max of the ops that ended in the whole seconds strictly between
// from and to.
func (o *opCounts) latency(from, to time.Time) (p50, p99, maxd time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var sum [latBuckets]int64
	var n int64
	for sec := from.Unix() + 1; sec < to.Unix(); sec++ {
		h := o.lat[sec]
		if h == nil {
			continue
		}
		for i, c := range h.n {
			sum[i] += int64(c)
			n += int64(c)
		}
		maxd = max(maxd, h.max)
	}
	at := func(q float64) time.Duration {
		want, seen := int64(math.Ceil(q*float64(n))), int64(0)
		for i, c := range sum {
			if seen += c; seen >= want && c > 0 {
				return time.Duration(float64(10*time.Microsecond) * math.Pow(1.08, float64(i+1)))
			}
		}
		return maxd
	}
	if n == 0 {
		return 0, 0, 0
	}
	return at(0.5), at(0.99), maxd
}

// rate is the mean ops a second over the whole seconds strictly between
// from and to.
func (o *opCounts) rate(from, to time.Time) float64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return perSecond(o.bySec, from, to)
}

// mixLatency logs the mix's latency in the 10 s before start and from
// start to end (during what), and reports its p99 then.
func mixLatency(b *testing.B, counts *opCounts, start, end time.Time, what string) {
	b.Helper()
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	p50b, p99b, maxb := counts.latency(start.Add(-10*time.Second), start)
	p50d, p99d, maxd := counts.latency(start, end)
	b.Logf("the mix's latency, p50 / p99 / max: %v / %v / %v in the 10 s before, %v / %v / %v during %s",
		r(p50b), r(p99b), r(maxb), r(p50d), r(p99d), r(maxd), what)
	b.ReportMetric(float64(p99d)/1e6, "mix-p99-ms")
}

// startMix starts the mix (the memtier shape, SET:GET 1:10, on 8
// connections) on keys, which must hold mixValue, counting the ops that
// succeed into counts, until stop is closed.
func startMix(ctx context.Context, cc *redis.ClusterClient, keys []string, counts *opCounts, stop chan struct{}, wg *sync.WaitGroup) {
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(100 + i)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := keys[rng.Intn(len(keys))]
				var err error
				t0 := time.Now()
				if rng.Intn(11) == 0 {
					err = cc.Set(ctx, k, mixValue, 0).Err()
				} else {
					err = cc.Get(ctx, k).Err()
				}
				if err == nil {
					end := time.Now()
					counts.record(end, end.Sub(t0))
				}
			}
		}()
	}
}

// writeStats is the count, p50, p99 and max latency, and the errors, of
// the writes of ws sent from from (inclusive) to to.
func writeStats(ws []timedWrite, from, to time.Time) (n int, p50, p99, maxd time.Duration, errs int) {
	var ds []time.Duration
	for _, w := range ws {
		if w.at.Before(from) || !w.at.Before(to) {
			continue
		}
		if w.err != nil {
			errs++
		}
		ds = append(ds, w.dur)
	}
	if len(ds) == 0 {
		return 0, 0, 0, 0, errs
	}
	slices.Sort(ds)
	return len(ds), ds[len(ds)/2], ds[len(ds)*99/100], ds[len(ds)-1], errs
}
