package test

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The geo commands in the differential test. A geo set is a sorted set, so
// TYPE calls it zset and the sorted sets' dump compares it: the type is
// registered under a name no key has, and its dump is never called. The
// commands use the shared keys and sorted-set members, so they meet keys
// of other types, sets that ZADD made (whose scores decode to odd
// places), and ZRANGE and ZADD meet what GEOADD and the STOREs wrote.
//
// Redis leaves no geo reply's order undefined: a search without ASC or
// DESC answers in the order of its nine boxes and of the set within each,
// which kvs follows, so every reply is compared byte for byte, with one
// exception. A distance is computed with sin, cos and asin, which kvs
// rounds correctly and glibc, under redis-server, does but about one time
// in a thousand: the distances STOREDIST stores, printed to 17 digits,
// may differ in their last bit. They are stored in keys of their own,
// gdist0 and gdist1, whose scores are compared to 14 digits, in replies
// and in the keyspace (the sorted sets' dump); their members and order,
// and every other reply, exactly.
func init() {
	registerDiffType(diffType{
		name:   "geo",
		weight: 24,
		gen:    (*cmdGen).geoCommand,
		dump:   func(c *rawConn, key string) string { return "" },
		same: func(cmd []string, ref, got Value) (bool, bool) {
			if len(cmd) > 1 && isGeoDistKey(cmd[1]) {
				return nearlySame(ref, got), true
			}
			return false, false
		},
	})
}

var geoDistKeys = []string{"gdist0", "gdist1"}

func isGeoDistKey(k string) bool { return strings.HasPrefix(k, "gdist") }

// nearlySame compares two replies as they are, but for numbers (bulk
// strings or doubles) within a relative 1e-14.
func nearlySame(a, b Value) bool {
	if a.Kind != b.Kind || a.Null != b.Null || len(a.Elems) != len(b.Elems) {
		return false
	}
	for i := range a.Elems {
		if !nearlySame(a.Elems[i], b.Elems[i]) {
			return false
		}
	}
	if a.Str == b.Str {
		return true
	}
	x, err1 := strconv.ParseFloat(a.Str, 64)
	y, err2 := strconv.ParseFloat(b.Str, 64)
	return err1 == nil && err2 == nil && math.Abs(x-y) <= 1e-14*math.Max(math.Abs(x), math.Abs(y))
}

// geoDistDump is the sorted sets' dump of a STOREDIST key: its members in
// order with their scores to 14 digits.
func geoDistDump(c *rawConn, key string) string {
	v := c.Do("ZRANGE", key, "0", "-1", "WITHSCORES")
	var b strings.Builder
	add := func(m, s Value) {
		f, _ := strconv.ParseFloat(s.Str, 64)
		fmt.Fprintf(&b, "%q %.14g ", m.Str, f)
	}
	for i := 0; i < len(v.Elems); i++ {
		if e := v.Elems[i]; len(e.Elems) == 2 { // RESP3's pairs
			add(e.Elems[0], e.Elems[1])
		} else if i+1 < len(v.Elems) {
			add(e, v.Elems[i+1])
			i++
		}
	}
	return b.String()
}

// geoLon and geoLat are coordinates: mostly in a small area, so that
// searches find several points, and sometimes at the edges of the range,
// past them, or not numbers.
func (g *cmdGen) geoLon() string {
	switch {
	case g.chance(0.85):
		return strconv.FormatFloat(11+g.r.Float64()*2, 'f', 1+g.r.Intn(6), 64)
	case g.chance(0.8):
		return g.pick("180", "-180", "179.9999", "-179.9999", "0", "-0")
	}
	return g.pick("180.0001", "-181", "abc", "", "inf", "nan", "1e3", "0x10", " 1")
}

func (g *cmdGen) geoLat() string {
	switch {
	case g.chance(0.85):
		return strconv.FormatFloat(41+g.r.Float64()*2, 'f', 1+g.r.Intn(6), 64)
	case g.chance(0.8):
		return g.pick("85.05112878", "-85.05112878", "84.9", "-84.9", "0", "60")
	}
	return g.pick("85.05112879", "-90", "90", "abc", "-inf", "1e2")
}

func (g *cmdGen) geoUnit() string {
	if g.chance(0.95) {
		return g.pick("m", "km", "km", "km", "ft", "mi", "KM", "Mi")
	}
	return g.pick("yd", "")
}

// geoRadius is a distance: most often one that holds part of the area.
func (g *cmdGen) geoRadius() string {
	if g.chance(0.95) {
		return g.pick("0", "1", "10", "50", "100", "150", "250", "1000", "200000", "5000", "0.5")
	}
	return g.pick("-1", "abc", "inf", "", "1e400", "-0")
}

func (g *cmdGen) geoMember() string {
	if g.chance(0.8) {
		return "p" + strconv.Itoa(g.r.Intn(12))
	}
	return g.zmember()
}

// geoOptions are a search's options, with STORE and STOREDIST when store.
func (g *cmdGen) geoOptions(store bool) []string {
	var opts []string
	for n := g.r.Intn(4); n > 0; n-- {
		switch g.r.Intn(12) {
		case 0:
			opts = append(opts, g.pick("WITHDIST", "withdist"))
		case 1:
			opts = append(opts, "WITHCOORD")
		case 2:
			opts = append(opts, "WITHHASH")
		case 3:
			opts = append(opts, g.pick("ASC", "DESC", "desc"))
		case 4, 5:
			n := strconv.Itoa(1 + g.r.Intn(6))
			if g.chance(0.1) {
				n = g.pick("0", "-1", "abc")
			}
			opts = append(opts, "COUNT", n)
			if g.chance(0.3) {
				opts = append(opts, "ANY")
			}
		case 6:
			if g.chance(0.3) {
				opts = append(opts, "ANY")
			}
		case 7:
			if store && g.chance(0.5) {
				opts = append(opts, "STORE", g.key())
			} else if store {
				opts = append(opts, "STOREDIST", g.pick(geoDistKeys...))
			}
		case 8:
			if g.chance(0.2) {
				opts = append(opts, g.pick("COUNT", "STORE", "FOO"))
			}
		}
	}
	return opts
}

// geoFrom and geoBy are GEOSEARCH's centre and shape, sometimes both
// forms, none, or a wrong one.
func (g *cmdGen) geoFrom() []string {
	switch g.r.Intn(20) {
	case 0:
		return nil
	case 1:
		return []string{"FROMMEMBER", g.geoMember(), "FROMLONLAT", g.geoLon(), g.geoLat()}
	case 2, 3, 4, 5, 6, 7:
		return []string{"FROMMEMBER", g.geoMember()}
	}
	return []string{g.pick("FROMLONLAT", "fromlonlat"), g.geoLon(), g.geoLat()}
}

func (g *cmdGen) geoBy() []string {
	switch g.r.Intn(20) {
	case 0:
		return nil
	case 1:
		return []string{"BYRADIUS", g.geoRadius(), g.geoUnit(), "BYBOX", g.geoRadius(), g.geoRadius(), g.geoUnit()}
	case 2, 3, 4, 5, 6, 7, 8, 9:
		return []string{"BYBOX", g.geoRadius(), g.geoRadius(), g.geoUnit()}
	}
	return []string{g.pick("BYRADIUS", "byradius"), g.geoRadius(), g.geoUnit()}
}

func (g *cmdGen) geoCommand() []string {
	k := g.zkey()
	switch g.r.Intn(20) {
	case 0, 1, 2, 3:
		cmd := []string{"GEOADD", k}
		for n := g.r.Intn(3); n > 0; n-- {
			cmd = append(cmd, g.pick("NX", "XX", "CH", "ch", "GT"))
		}
		for n := 1 + g.r.Intn(4); n > 0; n-- {
			cmd = append(cmd, g.geoLon(), g.geoLat(), g.geoMember())
		}
		if g.chance(0.03) {
			cmd = cmd[:len(cmd)-1]
		}
		return cmd
	case 4:
		// Enough points to take the set past the packed limits.
		cmd := []string{"GEOADD", k}
		for i := range 130 + g.r.Intn(30) {
			cmd = append(cmd, strconv.FormatFloat(11+g.r.Float64()*2, 'f', 5, 64),
				strconv.FormatFloat(41+g.r.Float64()*2, 'f', 5, 64), "q"+strconv.Itoa(i))
		}
		return cmd
	case 5:
		cmd := []string{"GEODIST", k, g.geoMember(), g.geoMember()}
		if g.chance(0.7) {
			cmd = append(cmd, g.geoUnit())
		}
		if g.chance(0.05) {
			cmd = append(cmd, "x")
		}
		return cmd
	case 6:
		return append([]string{g.pick("GEOPOS", "GEOHASH"), k}, g.geoMember(), g.geoMember(), g.geoMember())[:2+g.r.Intn(4)]
	case 7, 8, 9:
		name := g.pick("GEORADIUS", "GEORADIUS", "GEORADIUS_RO")
		cmd := []string{name, k, g.geoLon(), g.geoLat(), g.geoRadius(), g.geoUnit()}
		return append(cmd, g.geoOptions(name == "GEORADIUS")...)
	case 10, 11:
		name := g.pick("GEORADIUSBYMEMBER", "GEORADIUSBYMEMBER", "GEORADIUSBYMEMBER_RO")
		cmd := []string{name, k, g.geoMember(), g.geoRadius(), g.geoUnit()}
		return append(cmd, g.geoOptions(name == "GEORADIUSBYMEMBER")...)
	case 12, 13, 14, 15:
		cmd := append([]string{"GEOSEARCH", k}, g.geoFrom()...)
		cmd = append(cmd, g.geoBy()...)
		cmd = append(cmd, g.geoOptions(false)...)
		if len(cmd) > 3 && g.chance(0.05) {
			// An argument out of place.
			i, j := 2+g.r.Intn(len(cmd)-2), 2+g.r.Intn(len(cmd)-2)
			cmd[i], cmd[j] = cmd[j], cmd[i]
		}
		return cmd
	case 16, 17:
		dst := g.key()
		storeDist := g.chance(0.5)
		if storeDist {
			dst = g.pick(geoDistKeys...)
		}
		cmd := append([]string{"GEOSEARCHSTORE", dst, k}, g.geoFrom()...)
		cmd = append(cmd, g.geoBy()...)
		cmd = append(cmd, g.geoOptions(false)...)
		if storeDist {
			cmd = append(cmd, "STOREDIST")
		}
		return cmd
	case 18:
		// The sorted-set view of a geo set, or of stored distances.
		if g.chance(0.3) {
			k = g.pick(geoDistKeys...)
		}
		return []string{"ZRANGE", k, "0", "-1", "WITHSCORES"}
	}
	return []string{"ZADD", k, g.zscore(), g.geoMember()}
}
