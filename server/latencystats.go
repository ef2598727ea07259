package server

import (
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// INFO latencystats: each command's latency percentiles
// (latency_percentiles_usec_get:p50=...,p99=...,p99.9=...), at the
// percentiles latency-tracking-info-percentiles names, recorded while
// latency-tracking is yes, as Redis reports them from its per-command HDR
// histogram. kvs keeps a log-linear histogram per command (16 buckets per
// power of two from 1 µs to about 2 s, so within 6.25% of the true value,
// which INFO reports as the bucket's upper end) beside the counters of
// metrics.go, updated with them once per run of a command in a pipeline
// (each command of a run counted at the run's mean; see metrics.go).

const (
	fineSub      = 16 // buckets per power of two
	fineMinShift = 10 // the first power of two: 1024 ns
	fineMaxShift = 31 // the last: about 2.1 s; slower is clamped
	fineBuckets  = (fineMaxShift - fineMinShift + 1) * fineSub
	fineSubBits  = 4 // log2(fineSub)
	fineMinValue = 1 << fineMinShift
)

// fineBucket returns the histogram bucket of d.
func fineBucket(d time.Duration) int {
	v := uint64(max(d, fineMinValue))
	shift := bits.Len64(v) - 1
	if shift > fineMaxShift {
		return fineBuckets - 1
	}
	sub := int(v>>(shift-fineSubBits)) & (fineSub - 1)
	return (shift-fineMinShift)*fineSub + sub
}

// fineUpper returns the largest duration, in ns, bucket i holds.
func fineUpper(i int) uint64 {
	shift := i/fineSub + fineMinShift
	sub := uint64(i % fineSub)
	return (fineSub+sub+1)<<(shift-fineSubBits) - 1
}

// percentile returns the value, in µs, at percentile p (0-100) of the
// histogram counts, as hdr_value_at_percentile does: the upper end of the
// bucket where the cumulative count reaches p% of the total.
func percentile(counts []int64, total int64, p float64) float64 {
	target := int64(math.Ceil(p / 100 * float64(total)))
	if target < 1 {
		target = 1
	}
	var cum int64
	for i, n := range counts {
		cum += n
		if cum >= target {
			return float64(fineUpper(i)) / 1000
		}
	}
	return float64(fineUpper(len(counts)-1)) / 1000
}

// latencyStatsInfo is INFO latencystats.
func (s *Server) latencyStatsInfo() []InfoField {
	var ps []float64
	var labels []string
	for _, f := range strings.Fields(s.params.Get("latency-tracking-info-percentiles")) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			continue
		}
		ps = append(ps, v)
		labels = append(labels, strconv.FormatFloat(v, 'f', -1, 64))
	}
	st := s.commandStats()
	var fs []InfoField
	counts := make([]int64, fineBuckets)
	for i := range st.counts {
		if st.names[i] == unknownCommand {
			continue
		}
		k := &st.counts[i]
		var total int64
		for j := range counts {
			counts[j] = k.fine[j].Load()
			total += counts[j]
		}
		if total == 0 {
			continue
		}
		var b strings.Builder
		for j, p := range ps {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString("p" + labels[j] + "=")
			b.WriteString(strconv.FormatFloat(percentile(counts, total, p), 'f', 3, 64))
		}
		fs = append(fs, InfoField{"latency_percentiles_usec_" + st.names[i], b.String()})
	}
	return fs
}
