package fsm

// rankRange turns a start and stop index, as LRANGE, LTRIM and ZRANGE take
// them (negative counts from the end), into the inclusive range [from, to]
// of a sequence of n elements, clamped as Redis clamps it; ok is false when
// the range holds nothing.
func rankRange(start, stop, n int64) (from, to int64, ok bool) {
	if start < 0 {
		start += n
	}
	if stop < 0 {
		stop += n
	}
	start = max(start, 0)
	if start > stop || start >= n {
		return 0, 0, false
	}
	return start, min(stop, n-1), true
}
