package main

import "testing"

func TestGCPercent(t *testing.T) {
	cases := []struct {
		live uint64
		want int
	}{
		{0, 100},
		{10 << 20, 100}, // small heaps keep GOGC=100
		{64 << 20, 100}, // slack 64 MB = 100%
		{128 << 20, 50}, // 64 MB of 128
		{256 << 20, 25}, // 64 MB of 256 = 25%
		{1 << 30, 25},   // 25% of a large heap, never less
		{16 << 30, 25},
	}
	for _, c := range cases {
		if got := gcPercent(c.live); got != c.want {
			t.Errorf("gcPercent(%d MB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
}
