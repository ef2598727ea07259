package server

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Per-command statistics: calls, errors and a latency histogram for every
// command of the table, which INFO commandstats reports and
// Server.CommandStats hands to metrics exporters.
//
// Cost on the hot path: the counters are atomics in an array indexed by the
// command's position in the table (no map, no lock), and a connection
// updates them once per run of consecutive commands of one name in a
// pipeline, not once per command. A command's latency is the time from the
// moment the server turned to it (the pipeline was read, or the previous
// reply was queued) to its reply being queued:
//
//   - Commands answered at once (reads, PING, INFO, errors) are timed as
//     runs: the clock is read when the run ends, and each command of the
//     run is recorded with the run's mean. A lone command is its own run.
//   - The writes of a batch (and the replies queued behind them) wait for
//     one proposal: each is recorded with the batch's time, from the
//     parse of its first command to its replies being queued.
//   - A blocking command is timed from its last wake-up, and a command a
//     client pause held from its release: as in Redis, the time a client
//     waits blocked or paused is not the command's.
//
// SLOWLOG, LATENCY (slowlog.go, latency.go) and INFO latencystats
// (latencystats.go) take the same durations.
//
// Names come from the command table only: a name the table does not hold
// is counted as "unknown", so a client cannot create counters.

// unknownCommand is the name unknown commands are counted under.
const unknownCommand = "unknown"

// latencyBounds are the upper bounds (inclusive) of the latency histogram's
// buckets, in Prometheus's 1-2.5-5 steps from 5µs to 10s; a last bucket
// holds what is slower.
var latencyBounds = [...]time.Duration{
	5 * time.Microsecond, 10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// LatencyBounds returns the upper bounds of CommandStat.Buckets, in order;
// Buckets has one more element, for durations above the last bound.
func LatencyBounds() []time.Duration { return latencyBounds[:] }

// latencyBucket returns the index of the bucket d falls in.
func latencyBucket(d time.Duration) int {
	// Binary search: fewer branches than a scan for the slow buckets, and
	// as few as five comparisons for any duration.
	lo, hi := 0, len(latencyBounds)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if d > latencyBounds[m] {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// cmdCounters are one command's counters.
type cmdCounters struct {
	calls    atomic.Int64 // executed: every command not rejected
	rejected atomic.Int64 // refused before execution: unknown name, arity
	failed   atomic.Int64 // executed and answered with an error
	nanos    atomic.Int64 // latency, all commands
	buckets  [len(latencyBounds) + 1]atomic.Int64
	fine     [fineBuckets]atomic.Int64 // INFO latencystats (latencystats.go)
}

func (k *cmdCounters) reset() {
	k.calls.Store(0)
	k.rejected.Store(0)
	k.failed.Store(0)
	k.nanos.Store(0)
	for i := range k.buckets {
		k.buckets[i].Store(0)
	}
	for i := range k.fine {
		k.fine[i].Store(0)
	}
}

// commandStats holds the counters of every command, indexed like names.
// It is built once, on first use, from the server's command table.
type commandStats struct {
	once   sync.Once
	byName map[string]commandRef // the command table with each command's index
	// subs indexes the subcommands kvs answers ("config|get"), which
	// count apart from their container, as in Redis's INFO commandstats;
	// never looked up as a command name.
	subs    map[string]int
	names   []string // sorted; the last is unknownCommand
	unknown int      // index of unknownCommand
	counts  []cmdCounters
	// noTracking is latency-tracking no: no latencystats are recorded.
	noTracking atomic.Bool
}

// commandRef is a command and the index of its counters.
type commandRef struct {
	cmd *command
	id  int
}

// commandStats returns the server's per-command counters, built on first
// use (New does not know about them).
func (s *Server) commandStats() *commandStats {
	st := &s.stats.cmds
	st.once.Do(func() {
		for name := range s.commands {
			st.names = append(st.names, name)
		}
		for _, cmd := range s.commands {
			for _, sub := range cmd.subcommands {
				st.names = append(st.names, sub.name)
			}
		}
		sort.Strings(st.names)
		st.byName = make(map[string]commandRef, len(s.commands))
		st.subs = make(map[string]int)
		for i, name := range st.names {
			if cmd := s.commands[name]; cmd != nil {
				st.byName[name] = commandRef{cmd, i}
			} else {
				st.subs[name] = i
			}
		}
		st.unknown = len(st.names)
		st.names = append(st.names, unknownCommand)
		st.counts = make([]cmdCounters, len(st.names))
	})
	return st
}

// cmdRun is a run of consecutive commands of one name whose counts a
// connection adds to the shared counters at once.
type cmdRun struct {
	id                  int
	n, rejected, failed int64
	unlogged            bool // a command refused before it ran, alone in its run
}

func (r *cmdRun) add(rejected, failed bool) {
	r.n++
	if rejected {
		r.rejected++
	} else if failed {
		r.failed++
	}
}

// record adds run to the counters. Each of its commands took d when each
// is set (a batch), or d is the run's total, shared evenly among them.
func (st *commandStats) record(run *cmdRun, d time.Duration, each bool) {
	if run.n == 0 {
		return
	}
	k := &st.counts[run.id]
	per, total := d, d*time.Duration(run.n)
	if !each {
		per, total = d/time.Duration(run.n), d
	}
	if calls := run.n - run.rejected; calls != 0 {
		k.calls.Add(calls)
	}
	if run.rejected != 0 {
		k.rejected.Add(run.rejected)
	}
	if run.failed != 0 {
		k.failed.Add(run.failed)
	}
	k.nanos.Add(int64(total))
	k.buckets[latencyBucket(per)].Add(run.n)
	if !st.noTracking.Load() {
		k.fine[fineBucket(per)].Add(run.n)
	}
	*run = cmdRun{}
}

func (st *commandStats) reset() {
	for i := range st.counts {
		st.counts[i].reset()
	}
}

// beginTiming starts timing a pipeline read at start.
func (c *client) beginTiming(start time.Time) {
	c.pipeStart = start
	c.mark = 0
}

// answered counts a command whose reply was just queued at c.out[at:],
// outside any batch: it joins the run of commands answered at once.
func (c *client) answered(id int, rejected bool, at int) {
	failed := c.replyFailed(at)
	// A command refused before it ran is a run of its own, which SLOWLOG
	// and LATENCY do not see, as Redis does not.
	if c.run.n > 0 && (c.run.id != id || rejected || c.run.unlogged) {
		c.endRun()
	}
	if c.run.n == 0 {
		c.runFirst = c.pipeAt
	}
	c.run.id = id
	c.run.unlogged = rejected
	c.run.add(rejected, failed)
	if c.replyMode != 0 {
		c.suppressReply(at)
	}
}

// endRun records the run of commands answered at once, which took the time
// since mark; it is called when a command of another name comes, before a
// batch starts, and when the pipeline ends.
func (c *client) endRun() {
	if c.run.n == 0 {
		return
	}
	now := time.Since(c.pipeStart)
	d := now - c.mark
	if !c.run.unlogged {
		c.logSlowRun(c.run.id, c.run.n, d/time.Duration(c.run.n))
	}
	c.s.stats.cmds.record(&c.run, d, false)
	c.mark = now
}

// restartTiming moves mark to now, so that time spent on something else
// (writing replies to the socket mid-pipeline) is not counted.
func (c *client) restartTiming() {
	c.endRun()
	c.mark = time.Since(c.pipeStart)
}

// lapBatch returns the time a batch took, from mark (set when its first
// command was queued) to end, and moves mark to end.
func (c *client) lapBatch(end time.Time) time.Duration {
	now := end.Sub(c.pipeStart)
	d := now - c.mark
	c.mark = now
	return d
}

// replyFailed reports whether the reply queued at c.out[at:] is an error,
// and counts it in INFO errorstats if so.
func (c *client) replyFailed(at int) bool {
	if at >= len(c.out) || c.out[at] != '-' {
		return false
	}
	c.s.stats.errors.count(c.out[at+1:])
	return true
}

// maxErrorPrefixes bounds the distinct error prefixes counted, as Redis
// bounds errorstats (128): past it, new prefixes are not tracked.
const maxErrorPrefixes = 128

// errorStats counts error replies by their first word (ERR, WRONGTYPE,
// MOVED, ...), as INFO errorstats reports them. Every error text is the
// server's own or the leader's, so the prefixes are few; the bound guards
// against a leader relaying something odd.
type errorStats struct {
	total atomic.Int64 // every error reply, tracked or not

	mu       sync.RWMutex // guards byPrefix (the map, not the counters)
	byPrefix map[string]*atomic.Int64
}

// count counts the error reply that starts at text (after its '-').
func (e *errorStats) count(text []byte) {
	e.total.Add(1)
	n := 0
	for n < len(text) && text[n] != ' ' && text[n] != '\r' && n < 64 {
		n++
	}
	prefix := text[:n]
	e.mu.RLock()
	k := e.byPrefix[string(prefix)]
	e.mu.RUnlock()
	if k == nil {
		e.mu.Lock()
		if k = e.byPrefix[string(prefix)]; k == nil {
			if len(e.byPrefix) >= maxErrorPrefixes {
				e.mu.Unlock()
				return
			}
			if e.byPrefix == nil {
				e.byPrefix = make(map[string]*atomic.Int64)
			}
			k = new(atomic.Int64)
			e.byPrefix[string(prefix)] = k
		}
		e.mu.Unlock()
	}
	k.Add(1)
}

func (e *errorStats) reset() {
	e.total.Store(0)
	e.mu.Lock()
	e.byPrefix = nil
	e.mu.Unlock()
}

// ErrorStat is the count of error replies with one prefix.
type ErrorStat struct {
	Prefix string // the error's first word: "ERR", "WRONGTYPE", ...
	Count  int64
}

// snapshot returns the counts by prefix, sorted.
func (e *errorStats) snapshot() []ErrorStat {
	e.mu.RLock()
	out := make([]ErrorStat, 0, len(e.byPrefix))
	for p, k := range e.byPrefix {
		out = append(out, ErrorStat{p, k.Load()})
	}
	e.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Prefix < out[j].Prefix })
	return out
}

// ErrorStats returns the error replies counted by prefix, as INFO
// errorstats reports them (since start or CONFIG RESETSTAT).
func (s *Server) ErrorStats() []ErrorStat { return s.stats.errors.snapshot() }

// CommandStat is one command's counters, since start or CONFIG RESETSTAT.
type CommandStat struct {
	Name string // lowercase, as in the command table; "unknown" for names not in it

	// Calls counts the commands executed (Redis's calls); Rejected those
	// refused before execution (unknown name, wrong number of arguments);
	// Failed those executed and answered with an error. Calls+Rejected is
	// every command received under this name.
	Calls, Rejected, Failed int64

	// Duration is the total latency of all Calls+Rejected commands; Buckets
	// counts them by latency, Buckets[i] those above LatencyBounds()[i-1]
	// and at most LatencyBounds()[i] (not cumulative), the last those above
	// every bound.
	Duration time.Duration
	Buckets  []int64
}

// CommandStats returns the counters of every command that has been
// received at least once, by name, "unknown" included. It is meant for a
// metrics scrape: it reads every counter, with no lock the hot path takes.
func (s *Server) CommandStats() []CommandStat {
	st := s.commandStats()
	var out []CommandStat
	for i := range st.counts {
		k := &st.counts[i]
		calls, rejected := k.calls.Load(), k.rejected.Load()
		if calls == 0 && rejected == 0 {
			continue
		}
		cs := CommandStat{
			Name:     st.names[i],
			Calls:    calls,
			Rejected: rejected,
			Failed:   k.failed.Load(),
			Duration: time.Duration(k.nanos.Load()),
			Buckets:  make([]int64, len(k.buckets)),
		}
		for j := range k.buckets {
			cs.Buckets[j] = k.buckets[j].Load()
		}
		out = append(out, cs)
	}
	return out
}
