package server

import (
	"bufio"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
)

// INFO memory's peak and system fields. used_memory is the Go heap's live
// bytes (HeapAlloc); used_memory_peak is the largest of it seen by the
// server's cron (every 100 ms, as Redis's cron samples it) or by INFO.
// Like Redis 7.0, CONFIG RESETSTAT does not reset it.

// memPeak is the largest used_memory seen.
type memPeak struct{ v atomic.Uint64 }

func (p *memPeak) note(n uint64) uint64 {
	for {
		old := p.v.Load()
		if n <= old {
			return old
		}
		if p.v.CompareAndSwap(old, n) {
			return n
		}
	}
}

// heapSample is the metric equal to runtime.MemStats.HeapAlloc, read
// without stopping the world.
var heapSample = "/memory/classes/heap/objects:bytes"

// sampleMemPeak records the heap's live bytes in the peak; the cron calls it.
func (s *Server) sampleMemPeak() {
	sm := []metrics.Sample{{Name: heapSample}}
	metrics.Read(sm)
	if sm[0].Value.Kind() == metrics.KindUint64 {
		s.memPeak.note(sm[0].Value.Uint64())
	}
}

// peakPerc is used_memory_peak_perc: used as a percentage of peak.
func peakPerc(used, peak uint64) string {
	p := 0.0
	if peak > 0 {
		p = float64(used) * 100 / float64(peak)
	}
	return strconv.FormatFloat(p, 'f', 2, 64) + "%"
}

// totalSystemMemory is the machine's memory (MemTotal in /proc/meminfo),
// or 0 where it cannot be read, as Redis reports it.
func totalSystemMemory() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}
