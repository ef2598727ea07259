package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// typeStats are one row of the summary: every client's opStats for one
// command (or for both, in Totals) merged.
type typeStats struct {
	hist                      *hdrhistogram.Histogram
	ops, hits, misses, errors int64
	latNs, txBytes, rxBytes   int64
	minLatNs, maxLatNs        int64
	hasLat, hasHits           bool // hasHits: a GET row, where hits and misses mean something
	duration                  time.Duration
}

func newTypeStats(hasHits bool) *typeStats {
	return &typeStats{hist: hdrhistogram.New(1, histMaxMicros, histSigFigs), hasHits: hasHits}
}

func (t *typeStats) add(s *opStats) {
	t.hist.Merge(s.hist)
	t.ops += s.ops
	t.hits += s.hits
	t.misses += s.misses
	t.errors += s.errors
	t.latNs += s.latNs
	t.txBytes += s.txBytes
	t.rxBytes += s.rxBytes
	if s.hasLat {
		if !t.hasLat || s.minLatNs < t.minLatNs {
			t.minLatNs = s.minLatNs
		}
		t.maxLatNs = max(t.maxLatNs, s.maxLatNs)
		t.hasLat = true
	}
}

func (t *typeStats) perSec(n int64) float64 {
	if t.duration <= 0 {
		return 0
	}
	return float64(n) / t.duration.Seconds()
}

// avgMs is the exact mean latency in milliseconds.
func (t *typeStats) avgMs() float64 {
	if t.ops == 0 {
		return 0
	}
	return float64(t.latNs) / float64(t.ops) / 1e6
}

// percentileMs is the latency at percentile p (0-100) in milliseconds, to
// the histogram's three significant digits.
func (t *typeStats) percentileMs(p float64) float64 {
	switch {
	case t.ops == 0:
		return 0
	case p <= 0:
		return float64(t.hist.Min()) / 1e3
	}
	return float64(t.hist.ValueAtPercentile(p)) / 1e3
}

// kbPerSec counts both directions, requests and replies, as memtier does.
func (t *typeStats) kbPerSec() float64 {
	return t.perSec(t.txBytes+t.rxBytes) / 1024
}

// benchResult is a finished run.
type benchResult struct {
	Config             benchConfig
	Start, Finish      time.Time
	Sets, Gets, Totals *typeStats
	ConnErrors         int64
	FirstError         string
}

// collect merges every client's statistics into the result.
func (r *benchResult) collect(clients []*benchClient) {
	r.Sets, r.Gets, r.Totals = newTypeStats(false), newTypeStats(true), newTypeStats(true)
	for _, c := range clients {
		r.Sets.add(&c.stats[opSet])
		r.Gets.add(&c.stats[opGet])
		r.Totals.add(&c.stats[opSet])
		r.Totals.add(&c.stats[opGet])
		if c.connErr != nil {
			r.ConnErrors++
		}
		if r.FirstError == "" {
			r.FirstError = c.firstErr
		}
	}
	d := r.Finish.Sub(r.Start)
	r.Sets.duration, r.Gets.duration, r.Totals.duration = d, d, d
}

// errors counts error replies and failed connections.
func (r *benchResult) errors() int64 { return r.Totals.errors + r.ConnErrors }

// writeSummary prints memtier's ALL STATS table and, with histogram, each
// command's latency at a ladder of percentiles.
func (r *benchResult) writeSummary(w io.Writer, histogram bool) {
	rule := strings.Repeat("=", 140)
	fmt.Fprintf(w, "\nALL STATS\n%s\n", rule)
	fmt.Fprintf(w, "%-6s %12s %12s %12s %15s %15s %15s %15s %12s\n",
		"Type", "Ops/sec", "Hits/sec", "Misses/sec", "Avg. Latency", "p50 Latency", "p99 Latency", "p99.9 Latency", "KB/sec")
	fmt.Fprintln(w, strings.Repeat("-", 140))
	for _, row := range []struct {
		name string
		t    *typeStats
	}{{"Sets", r.Sets}, {"Gets", r.Gets}, {"Totals", r.Totals}} {
		hits, misses := "---", "---"
		if row.t.hasHits {
			hits = fmt.Sprintf("%.2f", row.t.perSec(row.t.hits))
			misses = fmt.Sprintf("%.2f", row.t.perSec(row.t.misses))
		}
		fmt.Fprintf(w, "%-6s %12.2f %12s %12s %15.3f %15.3f %15.3f %15.3f %12.2f\n",
			row.name, row.t.perSec(row.t.ops), hits, misses, row.t.avgMs(),
			row.t.percentileMs(50), row.t.percentileMs(99), row.t.percentileMs(99.9), row.t.kbPerSec())
	}
	if n := r.errors(); n > 0 {
		fmt.Fprintf(w, "Errors: %d (first: %s)\n", n, r.FirstError)
	}
	if !histogram {
		return
	}
	fmt.Fprintf(w, "\nRequest Latency Distribution\n%-6s %15s %10s\n%s\n", "Type", "<= msec", "Percent", strings.Repeat("-", 33))
	for _, row := range []struct {
		name string
		t    *typeStats
	}{{"SET", r.Sets}, {"GET", r.Gets}} {
		if row.t.ops == 0 {
			continue
		}
		for _, p := range []float64{0, 50, 75, 90, 95, 99, 99.9, 99.99, 100} {
			fmt.Fprintf(w, "%-6s %15.3f %10.3f\n", row.name, row.t.percentileMs(p), p)
		}
		fmt.Fprintln(w, strings.Repeat("-", 33))
	}
}

// The JSON file (--json-out-file) follows memtier_benchmark's, so that a
// result reads the same whichever of the two produced it:
//
//	{
//	  "configuration": {...},          the run's flags, memtier's names
//	  "ALL STATS": {
//	    "Sets":   {...},               one benchJSONType each
//	    "Gets":   {...},
//	    "Totals": {...},               Sets and Gets together
//	    "Runtime": {
//	      "Start time":     ms since the Unix epoch, when the measured run began
//	      "Finish time":    ms since the Unix epoch, when its last reply arrived
//	      "Total duration": ms between the two; the rates divide by it
//	      "Time unit":      "MILLISECONDS"
//	    }
//	  },
//	  "Errors": error replies plus failed connections (0 on a clean run),
//	  "First error": the first error's text, absent on a clean run
//	}
type benchJSON struct {
	Configuration benchJSONConfig `json:"configuration"`
	AllStats      benchJSONStats  `json:"ALL STATS"`
	Errors        int64           `json:"Errors"`
	FirstError    string          `json:"First error,omitempty"`
}

type benchJSONConfig struct {
	Server     string `json:"server"`
	Port       int    `json:"port"`
	UnixSocket string `json:"unix socket"`
	Protocol   string `json:"protocol"` // always "redis" (RESP2)
	Threads    int    `json:"threads"`
	Clients    int    `json:"clients"`   // per thread
	Requests   int    `json:"requests"`  // per client; 0 when test_time decides
	TestTime   int    `json:"test_time"` // seconds; 0 when requests decides
	Ratio      string `json:"ratio"`     // SET:GET
	DataSize   int    `json:"data_size"` // bytes
	Pipeline   int    `json:"pipeline"`
	KeyPrefix  string `json:"key_prefix"`
	KeyMinimum uint64 `json:"key_minimum"`
	KeyMaximum uint64 `json:"key_maximum"`
	KeyPattern string `json:"key_pattern"` // SET:GET, R or S each
	Prefill    bool   `json:"prefill"`     // every key written once before the run (not in memtier)
}

type benchJSONStats struct {
	Sets    benchJSONType    `json:"Sets"`
	Gets    benchJSONType    `json:"Gets"`
	Totals  benchJSONType    `json:"Totals"`
	Runtime benchJSONRuntime `json:"Runtime"`
}

// benchJSONType is one command's row. Latencies are in milliseconds;
// rates are per second of the run's total duration.
type benchJSONType struct {
	Count      int64   `json:"Count"`      // replies, error replies excluded
	OpsSec     float64 `json:"Ops/sec"`    // Count per second
	HitsSec    float64 `json:"Hits/sec"`   // GETs that returned a value, per second (0 for Sets)
	MissesSec  float64 `json:"Misses/sec"` // GETs that returned nil, per second (0 for Sets)
	Latency    float64 `json:"Latency"`    // mean latency (memtier's older name)
	AvgLatency float64 `json:"Average Latency"`
	MinLatency float64 `json:"Min Latency"`
	MaxLatency float64 `json:"Max Latency"`
	KBSec      float64 `json:"KB/sec"` // request and reply bytes, KiB per second
	Errors     int64   `json:"Errors"` // error replies
	// Percentiles of the latency histogram, three significant digits.
	Percentiles benchJSONPercentiles `json:"Percentile Latencies"`
}

type benchJSONPercentiles struct {
	P50  float64 `json:"p50.00"`
	P99  float64 `json:"p99.00"`
	P999 float64 `json:"p99.90"`
}

type benchJSONRuntime struct {
	Start    int64  `json:"Start time"`
	Finish   int64  `json:"Finish time"`
	Duration int64  `json:"Total duration"`
	TimeUnit string `json:"Time unit"`
}

func (t *typeStats) json() benchJSONType {
	avg := t.avgMs()
	return benchJSONType{
		Count:      t.ops,
		OpsSec:     t.perSec(t.ops),
		HitsSec:    t.perSec(t.hits),
		MissesSec:  t.perSec(t.misses),
		Latency:    avg,
		AvgLatency: avg,
		MinLatency: float64(t.minLatNs) / 1e6,
		MaxLatency: float64(t.maxLatNs) / 1e6,
		KBSec:      t.kbPerSec(),
		Errors:     t.errors,
		Percentiles: benchJSONPercentiles{
			P50: t.percentileMs(50), P99: t.percentileMs(99), P999: t.percentileMs(99.9),
		},
	}
}

func (r *benchResult) json() benchJSON {
	c := r.Config
	pat := func(p keyPattern) string { return string(rune(p)) }
	return benchJSON{
		Configuration: benchJSONConfig{
			Server: c.Server, Port: c.Port, UnixSocket: c.UnixSocket, Protocol: "redis",
			Threads: c.Threads, Clients: c.Clients, Requests: c.Requests,
			TestTime: int(c.TestTime / time.Second),
			Ratio:    fmt.Sprintf("%d:%d", c.SetRatio, c.GetRatio),
			DataSize: c.DataSize, Pipeline: c.Pipeline, KeyPrefix: c.KeyPrefix,
			KeyMinimum: c.KeyMin, KeyMaximum: c.KeyMax,
			KeyPattern: pat(c.SetPattern) + ":" + pat(c.GetPattern),
			Prefill:    c.Prefill,
		},
		AllStats: benchJSONStats{
			Sets: r.Sets.json(), Gets: r.Gets.json(), Totals: r.Totals.json(),
			Runtime: benchJSONRuntime{
				Start:    r.Start.UnixMilli(),
				Finish:   r.Finish.UnixMilli(),
				Duration: r.Finish.Sub(r.Start).Milliseconds(),
				TimeUnit: "MILLISECONDS",
			},
		},
		Errors:     r.errors(),
		FirstError: r.FirstError,
	}
}

func (r *benchResult) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r.json())
}

func (r *benchResult) writeJSONFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := r.writeJSON(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}
