package fsm

import (
	"fmt"
	"math/rand"
	"testing"
)

// BenchmarkGeoSearch: GEOSEARCH FROMLONLAT 15 40 BYRADIUS 20 km ASC COUNT
// 10 over 100k members spread over 10 by 10 degrees (make compare's row).
func BenchmarkGeoSearch(b *testing.B) {
	s := NewStore()
	r := rand.New(rand.NewSource(7))
	for i := 0; i < 100000; i += 100 {
		var t []any
		for j := i; j < i+100; j++ {
			t = append(t, 10+r.Float64()*10, 35+r.Float64()*10, fmt.Sprintf("m%d", j))
		}
		s.Apply(0, 1, []Command{geoadd("geo", t...)})
	}
	for _, bc := range []struct {
		name  string
		flags Flags
		count int64
	}{{"asc-count10", FlagGeoAsc, 10}, {"all", 0, 0}} {
		cmd := inKm(geoSearch("geo", 15, 40, 20, 0, bc.flags, bc.count))
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				s.Read(0, cmd)
			}
		})
	}
}
