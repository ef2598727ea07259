package fsm

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// The expected values in this file are redis-server 7.0.15's answers to
// the same commands.

// geoadd is GEOADD's OpZAdd: lon, lat, member triples.
func geoadd(key string, triples ...any) Command {
	cmd := c(OpZAdd, key)
	for i := 0; i < len(triples); i += 3 {
		score := GeoScore(toF(triples[i]), toF(triples[i+1]))
		cmd.Args = append(cmd.Args, ScoreArg(score), []byte(triples[i+2].(string)))
	}
	return cmd
}

// geoSearch is OpGeoSearch around lon, lat (or the member steps), of
// radius (or width) and height in meters.
func geoSearch(key string, lon, lat, radius, height float64, f Flags, count int64, steps ...[]byte) Command {
	cmd := Command{Op: OpGeoSearch, Flags: f, Int: count,
		Args: append([][]byte{[]byte(key), GeoArea(lon, lat, radius, height, 1)}, steps...)}
	return cmd
}

// inKm is cmd with its distances in kilometers.
func inKm(cmd Command) Command {
	a := cmd.Args[1]
	f := func(i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(a[8*i:])) }
	cmd.Args[1] = GeoArea(f(0), f(1), f(2), f(3), 1000)
	return cmd
}

func TestGeoScores(t *testing.T) {
	for _, tc := range []struct {
		lon, lat float64
		score    float64
		hash     string
		pos      [2]string
	}{
		{13.361389, 38.115556, 3479099956230698, "sqc8b49rny0", [2]string{"13.36138933897018433", "38.11555639549629859"}},
		{15.087269, 37.502669, 3479447370796909, "sqdtr74hyu0", [2]string{"15.08726745843887329", "37.50266842333162032"}},
		{-180, -85.05112878, 0, "00bh0hbj200", [2]string{"-179.99999731779098511", "-85.05112751263942528"}},
		// The top edge: its offsets are 2^26, a 27th bit each.
		{180, 85.05112878, 13510798882111488, "bp05b5048p0", [2]string{"180", "85.0511287799999991"}},
		{0, 0, 3377699720527872, "s0000000000", [2]string{"0.00000268220901489", "0.00000126736058093"}},
		{179.9999, 0.5, 4128321133537522, "xbpfzgpbtw0", [2]string{"179.99990075826644897", "0.50000036325177888"}},
		{-179.9999, 0.5, 1125921381958232, "8004b500dq0", [2]string{"-179.99990075826644897", "0.50000036325177888"}},
		{-122.27652, 37.805186, 1367952638197536, "9q9p1d0znt0", [2]string{"-122.27652043104171753", "37.80518485897756165"}},
	} {
		got := GeoScore(tc.lon, tc.lat)
		if got != tc.score {
			t.Errorf("GeoScore(%v, %v) = %.0f, want %.0f", tc.lon, tc.lat, got, tc.score)
		}
		if h := string(geohashString(tc.score)); h != tc.hash {
			t.Errorf("geohash of %.0f = %s, want %s", tc.score, h, tc.hash)
		}
		lon, lat := decodeGeoScore(tc.score)
		if p := [2]string{string(formatGeoCoord(lon)), string(formatGeoCoord(lat))}; p != tc.pos {
			t.Errorf("position of %.0f = %v, want %v", tc.score, p, tc.pos)
		}
	}
}

// TestGeoOddScores decodes scores no GEOADD makes (ZADD's), which Redis
// casts to an integer as x86-64's conversion instructions do.
func TestGeoOddScores(t *testing.T) {
	const (
		lo, hi    = "-179.99999731779098511", "180"
		south     = "-85.05112751263942528"
		north     = "85.0511287799999991"
		loHash    = "00bh0hbj200"
		cornerHsh = "bp05b5048p0"
	)
	for _, tc := range []struct {
		score    float64
		lon, lat string
		hash     string
	}{
		{-5, hi, north, cornerHsh},
		{1e20, lo, south, loHash},
		{math.Inf(1), lo, south, loHash},
		{math.Inf(-1), hi, south, loHash},
		{0.5, lo, south, loHash},
		{9223372036854775808, hi, south, loHash},
		{-9.3e18, hi, south, loHash},
		{4503599627370496, lo, north, cornerHsh},
		{18446744073709549568, hi, north, cornerHsh},
	} {
		lon, lat := decodeGeoScore(tc.score)
		if g, w := [2]string{string(formatGeoCoord(lon)), string(formatGeoCoord(lat))}, [2]string{tc.lon, tc.lat}; g != w {
			t.Errorf("position of %g = %v, want %v", tc.score, g, w)
		}
		if h := string(geohashString(tc.score)); h != tc.hash {
			t.Errorf("geohash of %g = %s, want %s", tc.score, h, tc.hash)
		}
	}
}

func TestGeoDistanceFormat(t *testing.T) {
	d := func(a, b [2]float64) float64 {
		lon1, lat1 := decodeGeoScore(GeoScore(a[0], a[1]))
		lon2, lat2 := decodeGeoScore(GeoScore(b[0], b[1]))
		return geoDistance(lon1, lat1, lon2, lat2)
	}
	for _, tc := range []struct {
		a, b [2]float64
		unit float64
		want string
	}{
		{[2]float64{13.361389, 38.115556}, [2]float64{15.087269, 37.502669}, 1, "166274.1516"},
		{[2]float64{13.361389, 38.115556}, [2]float64{15.087269, 37.502669}, 1000, "166.2742"},
		{[2]float64{13.361389, 38.115556}, [2]float64{15.087269, 37.502669}, 1609.34, "103.3182"},
		{[2]float64{13.361389, 38.115556}, [2]float64{15.087269, 37.502669}, 0.3048, "545518.8700"},
		// Across the antimeridian.
		{[2]float64{179.9999, 0.5}, [2]float64{-179.9999, 0.5}, 1, "22.0757"},
		{[2]float64{-180, -85.05112878}, [2]float64{180, 85.05112878}, 1000, "18919.8446"},
		{[2]float64{1, 1}, [2]float64{1, 1}, 1, "0.0000"},
	} {
		if got := string(formatGeoDistance(d(tc.a, tc.b) / tc.unit)); got != tc.want {
			t.Errorf("distance %v %v in %v = %s, want %s", tc.a, tc.b, tc.unit, got, tc.want)
		}
	}
	for f, want := range map[float64]string{0.00004: "0.0000", 0.00005: "0.0000", 0.00015: "0.0001" /* 1.4999999999999998 */, 0.00025: "0.0002", 0.00035: "0.0004", 12: "12.0000", 0.5: "0.5000", math.NaN(): "-922337203685477.5808"} {
		if got := string(formatGeoDistance(f)); got != want {
			t.Errorf("formatGeoDistance(%v) = %s, want %s", f, got, want)
		}
	}
}

// members is the members of a search's reply, with their distances when
// it has them.
func members(r Reply) string {
	var out []string
	for _, e := range r.Array {
		if e.Kind == ReplyBulk {
			out = append(out, string(e.Bulk))
			continue
		}
		s := string(e.Array[0].Bulk)
		for _, x := range e.Array[1:] {
			switch x.Kind {
			case ReplyBulk:
				s += ":" + string(x.Bulk)
			case ReplyArray:
				s += ":" + string(x.Array[0].Bulk) + "," + string(x.Array[1].Bulk)
			}
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func geoTestSet(s *Store) {
	s.Apply(0, t0, []Command{geoadd("p",
		179.9999, 0.5, "east", -179.9999, 0.5, "west", -179.9995, 0.5001, "west2",
		10, 84.9, "n1", -170, 84.9, "n2", 100, 84.95, "n3", 0, -84.9, "s1",
		0, 0, "t1", 0, 0, "t2", 0, 0, "t3", 0, 0, "t0", 0.0001, 0, "u1")})
}

func TestGeoSearchEdges(t *testing.T) {
	bothForms(t, func(t *testing.T, s *Store) {
		geoTestSet(s)
		for _, tc := range []struct {
			name string
			cmd  Command
			want string
		}{
			{"antimeridian circle", geoSearch("p", 179.9999, 0.5, 100, 0, FlagGeoAsc|FlagGeoWithDist, 0),
				"east:0.0935 west:22.1601 west2:67.8122"},
			{"antimeridian box, unsorted", geoSearch("p", -179.9999, 0.5, 200, 200, FlagGeoBox|FlagGeoWithDist, 0),
				"west:0.0935 west2:46.0069 east:22.1601"},
			{"near the north pole", inKm(geoSearch("p", 0, 0, 1000, 0, FlagGeoWithDist, 0, GeoStepMember([]byte("n1")))),
				"n1:0.0000 n3:797.7732"},
			{"over the pole, descending", inKm(geoSearch("p", 0, 0, 2000, 0, FlagGeoWithDist|FlagGeoDesc, 0, GeoStepMember([]byte("n1")))),
				"n2:1134.5083 n3:797.7732 n1:0.0000"},
			{"south, with coordinates", geoSearch("p", 0, -84, 200e3, 0, FlagGeoWithCoord, 0),
				"s1:0.00000268220901489,-84.89999983295615493"},
			{"unsorted", geoSearch("p", 0, 0, 20, 0, 0, 0), "t0 t1 t2 t3 u1"},
			{"count sorts", geoSearch("p", 0, 0, 20, 0, 0, 2), "t0 t1"},
			{"count descending", geoSearch("p", 0, 0, 20, 0, FlagGeoDesc, 2), "u1 t0"},
			{"any", geoSearch("p", 0, 0, 20, 0, FlagGeoAny, 2), "t0 t1"},
			{"missing key", geoSearch("nokey", 0, 0, 20, 0, 0, 0), ""},
		} {
			got := s.Read(t0, tc.cmd)
			if got.Kind != ReplyArray || members(got) != tc.want {
				t.Errorf("%s: got %v, want %s", tc.name, got, tc.want)
			}
		}
	})
}

// TestGeoSearchTies: equal distances come out in redis-server's order,
// which is glibc's merge sort of the boxes' order without COUNT, and
// Redis's pqsort with it (45 points: pqsort's ninther too).
func TestGeoSearchTies(t *testing.T) {
	bothForms(t, func(t *testing.T, s *Store) {
		var triples []any
		for i := range 45 {
			triples = append(triples, []float64{0, 0.0001, 0.0002}[i%3], 0.0, "m"+itoa(i))
		}
		s.Apply(0, t0, []Command{geoadd("q", triples...)})
		for _, tc := range []struct {
			f     Flags
			count int64
			want  string
		}{
			{0, 7, "m9 m15 m18 m21 m24 m27 m3"},
			{FlagGeoDesc, 20, "m14 m5 m44 m41 m38 m35 m32 m29 m26 m23 m20 m2 m11 m17 m8 m40 m1 m10 m13 m16"},
			{0, 41, "m9 m15 m18 m21 m24 m27 m3 m30 m33 m36 m39 m42 m0 m6 m12 m40 m1 m10 m13 m16 m19 m22 m25 m28 m31 m34 m37 m4 m43 m7 m8 m14 m17 m2 m20 m23 m26 m29 m32 m35 m38"},
			{FlagGeoDesc, 0, "m11 m14 m17 m2 m20 m23 m26 m29 m32 m35 m38 m41 m44 m5 m8 m1 m10 m13 m16 m19 m22 m25 m28 m31 m34 m37 m4 m40 m43 m7 m0 m12 m15 m18 m21 m24 m27 m3 m30 m33 m36 m39 m42 m6 m9"},
		} {
			got := members(s.Read(t0, geoSearch("q", 0, 0, 100, 0, tc.f, tc.count)))
			if got != tc.want {
				t.Errorf("flags %#x count %d:\n got %s\nwant %s", tc.f, tc.count, got, tc.want)
			}
		}
	})
}

// TestGeoSteps: the member lookups and errors a search meets, in order,
// after the type check; those that only a present key raises.
func TestGeoSteps(t *testing.T) {
	s := NewStore()
	geoTestSet(s)
	s.Apply(0, t0, []Command{c(OpSet, "str", "x")})
	ifFound := GeoStepError("ERR radius cannot be negative", false)
	always := GeoStepError("ERR syntax error", true)
	missing := GeoStepMember([]byte("nope"))
	run(t, s, []step{
		{t0, geoSearch("str", 0, 0, 1, 0, 0, 0, always), errr(ErrWrongType)},
		{t0, geoSearch("p", 0, 0, 1, 0, 0, 0, missing, always), errr(ErrGeoMember)},
		{t0, geoSearch("nokey", 0, 0, 1, 0, 0, 0, missing, always), errr("ERR syntax error")},
		{t0, geoSearch("p", 0, 0, 1, 0, 0, 0, GeoStepMember([]byte("t1")), ifFound), errr("ERR radius cannot be negative")},
		{t0, geoSearch("nokey", 0, 0, 1, 0, 0, 0, missing, ifFound), arr()},
	})
	// A store that cannot run leaves the destination alone; one that
	// finds nothing deletes it.
	store := func(dst, src string, steps ...[]byte) Command {
		return Command{Op: OpGeoSearchStore, Args: append([][]byte{[]byte(dst), []byte(src), GeoArea(0, 0, 20, 0, 1)}, steps...)}
	}
	run(t, s, []step{
		{t0, store("dst", "p"), in(5)},
		{t0, c(OpZRange, "dst").i(0).i2(-1), bulks("t0", "t1", "t2", "t3", "u1")},
		{t0, store("dst", "p", missing), errr(ErrGeoMember)},
		{t0, c(OpExists, "dst"), in(1)},
		{t0, store("dst", "nokey", missing, ifFound), in(0)},
		{t0, c(OpExists, "dst"), in(0)},
		{t0, store("dst", "p").fl(FlagGeoStoreDist), in(5)},
		{t0, c(OpZScore, "dst", "u1"), dbl("11.039190876810832")},
	})
}

func TestGeoReads(t *testing.T) {
	bothForms(t, func(t *testing.T, s *Store) {
		s.Apply(0, t0, []Command{geoadd("Sicily", 13.361389, 38.115556, "Palermo", 15.087269, 37.502669, "Catania"),
			c(OpSet, "str", "x")})
		pos := func(lon, lat string) Reply { return arr(dbl(lon), dbl(lat)) }
		nilArr := Reply{Kind: ReplyNilArray}
		run(t, s, []step{
			{t0, c(OpGeoPos, "Sicily", "Palermo", "nope"), arr(pos("13.36138933897018433", "38.11555639549629859"), nilArr)},
			{t0, c(OpGeoPos, "nokey", "a"), arr(nilArr)},
			{t0, c(OpGeoPos, "str", "a"), errr(ErrWrongType)},
			{t0, c(OpGeoHash, "Sicily", "Catania", "nope"), arr(bulk("sqdtr74hyu0"), nilr)},
			{t0, c(OpGeoHash, "nokey", "a"), arr(nilr)},
			{t0, c(OpGeoDist, "Sicily", "Palermo", "Catania").f(1000), bulk("166.2742")},
			{t0, c(OpGeoDist, "Sicily", "Palermo", "nope").f(1), nilr},
			{t0, c(OpGeoDist, "nokey", "a", "b").f(1), nilr},
			{t0, c(OpGeoDist, "str", "a", "b").f(1), errr(ErrWrongType)},
		})
	})
}

// TestGeoBoxes checks the nine-box cover near the poles and the
// antimeridian: every point the shape holds is in a box that is searched.
func TestGeoBoxes(t *testing.T) {
	for _, sh := range []geoShape{
		{lon: 179.99, lat: 0, radius: 5000, conversion: 1},
		{lon: -179.99, lat: 45, radius: 50, conversion: 1000},
		{lon: 0, lat: 84.9, radius: 300, conversion: 1000},
		{lon: 30, lat: -84.9, box: true, width: 400, height: 100, conversion: 1000},
		{lon: 0, lat: 0, radius: 0, conversion: 1},
		{lon: 10, lat: 10, radius: math.Inf(1), conversion: 1},
	} {
		boxes := sh.geoBoxes()
		searched := func(score float64) bool {
			for _, b := range boxes {
				if b.isZero() {
					continue
				}
				lo := float64(geohashAlign52Bits(b))
				b.bits++
				if hi := float64(geohashAlign52Bits(b)); score >= lo && score < hi {
					return true
				}
			}
			return false
		}
		for i := range 20000 {
			lon := -180 + 360*float64(i%200)/200 + 0.37
			lat := -85 + 170*float64(i/200)/100 + 0.11
			score := GeoScore(lon, lat)
			plon, plat := decodeGeoScore(score)
			if _, in := sh.within(plon, plat); in && !searched(score) {
				t.Errorf("shape %+v: point %v,%v in it but in no box searched", sh, plon, plat)
				break
			}
		}
	}
}

// TestGeoSearchStoreForms: STOREDIST with COUNT and DESC stores what
// redis-server stores, whatever the form of the source.
func TestGeoSearchStoreForms(t *testing.T) {
	var got []string
	bothForms(t, func(t *testing.T, s *Store) {
		geoTestSet(s)
		cmd := Command{Op: OpGeoSearchStore, Flags: FlagGeoStoreDist | FlagGeoDesc, Int: 3,
			Args: [][]byte{[]byte("d"), []byte("p"), GeoArea(0, 0, 30, 0, 1)}}
		if r := s.Apply(0, t0, []Command{cmd})[0]; r.Int != 3 {
			t.Fatalf("stored %v", r)
		}
		got = append(got, s.Read(t0, c(OpZRange, "d").i(0).i2(-1).fl(FlagZWithScores)).String())
	})
	want := `[["t0" (double) 0.3299589265287915] ["t1" (double) 0.3299589265287915] ["u1" (double) 11.039190876810832]]`
	for _, g := range got {
		if g != want {
			t.Errorf("stored %s, want %s", g, want)
		}
	}
}

// TestGeoEncoding: the geo commands go through the command encoding
// (a forwarded batch's; the store's entry in the log's) and back, with
// level 3; Validate refuses what the server never builds.
func TestGeoEncoding(t *testing.T) {
	good := []Command{
		c(OpGeoPos, "k", "a", "b"),
		c(OpGeoHash, "k"),
		c(OpGeoDist, "k", "a", "b").f(1609.34),
		geoSearch("k", 1, 2, 3, 0, FlagGeoWithDist|FlagGeoDesc, 5, GeoStepMember([]byte("m")), GeoStepError("ERR x", false)),
		{Op: OpGeoSearchStore, Flags: FlagGeoStoreDist | FlagGeoRadius | FlagGeoAny, Int: 2,
			Args: [][]byte{[]byte("d"), []byte("k"), GeoArea(1, 2, 3, 4, 1000)}},
	}
	got, err := DecodeCommands(AppendCommands(nil, good))
	if err != nil || len(got) != len(good) {
		t.Fatalf("decode: %v, %d commands", err, len(got))
	}
	now, entry, err := DecodeEntry(EncodeEntry(nil, t0, good[4:]))
	if err != nil || now != t0 || len(entry) != 1 || entry[0].Op != OpGeoSearchStore {
		t.Fatalf("decode entry: %v, %v at %d", err, entry, now)
	}
	for i := range good {
		if got[i].Op != good[i].Op || got[i].Flags != good[i].Flags || got[i].Int != good[i].Int ||
			got[i].Float != good[i].Float || len(got[i].Args) != len(good[i].Args) {
			t.Errorf("command %d: %+v, want %+v", i, got[i], good[i])
		}
	}
	if l := Level(good); l != 3 {
		t.Errorf("level %d, want 3", l)
	}
	for _, bad := range []Command{
		c(OpGeoDist, "k", "a", "b"), // no unit
		geoSearch("k", 0, 0, 1, 0, FlagGeoAny, 0),
		geoSearch("k", 0, 0, 1, 0, 0, -1),
		geoSearch("k", math.NaN(), 0, 1, 0, 0, 0),
		geoSearch("k", 0, 0, 1, 0, 0, 0, []byte("xstep")),
		{Op: OpGeoSearch, Args: [][]byte{[]byte("k"), []byte("short")}},
		geoSearch("k", 0, 0, 1, 0, FlagGeoStoreDist, 0),
		{Op: OpGeoSearchStore, Flags: FlagGeoWithCoord, Args: [][]byte{[]byte("d"), []byte("k"), GeoArea(1, 2, 3, 4, 1)}},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%v %q flags %#x count %d: valid", bad.Op, bad.Args, bad.Flags, bad.Int)
		}
	}
}
