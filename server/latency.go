package server

import (
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The latency monitor (LATENCY LATEST / HISTORY / RESET / HELP), as Redis
// keeps it: with latency-monitor-threshold set to N ms (0: off), every
// command that takes at least N ms is a sample of the event "command", or
// of "fast-command" for a command Redis flags fast (GET, SET, ...). Each
// event keeps its all-time maximum and the largest sample of each second
// for its last 160 seconds with samples. A command's duration is the one
// SLOWLOG uses (slowlog.go).

// latencyHistoryLen is Redis's LATENCY_TS_LEN.
const latencyHistoryLen = 160

type latencySample struct {
	unix    int64 // seconds
	latency int64 // ms
}

type latencySeries struct {
	idx     int
	max     int64
	samples [latencyHistoryLen]latencySample
}

type latencyMonitor struct {
	// threshold is latency-monitor-threshold in ms (0: off), loaded once
	// per run or batch on the hot path.
	threshold atomic.Int64

	mu     sync.Mutex // guards events
	events map[string]*latencySeries
}

// add records a sample of ms for event at now (Unix seconds), as Redis's
// latencyAddSample does.
func (m *latencyMonitor) add(event string, now, ms int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.events == nil {
		m.events = make(map[string]*latencySeries)
	}
	ts := m.events[event]
	if ts == nil {
		ts = &latencySeries{}
		m.events[event] = ts
	}
	if ms > ts.max {
		ts.max = ms
	}
	prev := &ts.samples[(ts.idx+latencyHistoryLen-1)%latencyHistoryLen]
	if prev.unix == now {
		if ms > prev.latency {
			prev.latency = ms
		}
		return
	}
	ts.samples[ts.idx] = latencySample{now, ms}
	ts.idx = (ts.idx + 1) % latencyHistoryLen
}

// reset forgets the events named (all of them if none), case-insensitively
// as Redis matches them, and returns how many it forgot.
func (m *latencyMonitor) reset(names [][]byte) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(names) == 0 {
		n := len(m.events)
		m.events = nil
		return n
	}
	n := 0
	for _, name := range names {
		for ev := range m.events {
			if strings.EqualFold(ev, string(name)) {
				delete(m.events, ev)
				n++
			}
		}
	}
	return n
}

// checkLatency records a command of statistics index id that took d, if
// the latency monitor is on and d reaches its threshold.
func (c *client) checkLatency(id int, d time.Duration) {
	t := c.s.latency.threshold.Load()
	if t <= 0 {
		return
	}
	ms := d.Milliseconds()
	if ms < t {
		return
	}
	event := "command"
	if st := &c.s.stats.cmds; id != st.unknown {
		if cmd := st.byName[st.names[id]].cmd; cmd != nil && cmd.flags&flagFast != 0 {
			event = "fast-command"
		}
	}
	c.s.latency.add(event, time.Now().Unix(), ms)
}

// runLatency answers LATENCY LATEST / HISTORY event / RESET [event ...] /
// HELP.
func runLatency(c *client, args [][]byte) {
	sub := args[1]
	m := &c.s.latency
	switch {
	case is(sub, "latest"):
		m.mu.Lock()
		names := make([]string, 0, len(m.events))
		for ev := range m.events {
			names = append(names, ev)
		}
		sort.Strings(names)
		b := appendArrayLen(c.out, len(names))
		for _, ev := range names {
			ts := m.events[ev]
			last := ts.samples[(ts.idx+latencyHistoryLen-1)%latencyHistoryLen]
			b = appendArrayLen(b, 4)
			b = appendBulkString(b, ev)
			b = appendInt(b, last.unix)
			b = appendInt(b, last.latency)
			b = appendInt(b, ts.max)
		}
		m.mu.Unlock()
		c.out = b
	case is(sub, "history"):
		m.mu.Lock()
		var samples []latencySample
		if ts := m.events[string(args[2])]; ts != nil {
			for j := 0; j < latencyHistoryLen; j++ {
				if s := ts.samples[(ts.idx+j)%latencyHistoryLen]; s.unix != 0 {
					samples = append(samples, s)
				}
			}
		}
		m.mu.Unlock()
		b := appendArrayLen(c.out, len(samples))
		for _, s := range samples {
			b = appendArrayLen(b, 2)
			b = appendInt(b, s.unix)
			b = appendInt(b, s.latency)
		}
		c.out = b
	case is(sub, "reset"):
		c.out = appendInt(c.out, int64(m.reset(args[2:])))
	default:
		c.out = appendHelp(c.out, latencyHelp)
	}
}

var latencyHelp = []string{
	"LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"HISTORY <event>",
	"    Return time-latency samples for the <event> class.",
	"LATEST",
	"    Return the latest latency samples for all events.",
	"RESET [<event> ...]",
	"    Reset latency data of one or more <event> classes.",
	"    (default: reset all data for all event classes)",
	"HELP",
	"    Prints this help.",
}

func init() {
	commandDocs["latency"] = [2]string{"A container for latency diagnostics commands.", "2.8.13"}
}
