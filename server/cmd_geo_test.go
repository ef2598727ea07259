package server

import (
	"strings"
	"testing"
)

// TestGeoReplies pins replies recorded from redis-server 7.0.15: GEOADD as
// ZADD, the errors in Redis's order (those it gives only once it found
// the key or the centre member too), distances, positions, hashes and
// STORE, in both protocols (RESP3 sends coordinates as doubles).
func TestGeoReplies(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	for _, tc := range []struct{ cmd, want string }{
		{"GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania", ":2\r\n"},
		{"GEOADD Sicily 200 100 x", "-ERR invalid longitude,latitude pair 200.000000,100.000000\r\n"},
		{"GEOADD Sicily 1 abc x", "-ERR value is not a valid float\r\n"},
		{"GEOADD Sicily abc 1 x", "-ERR value is not a valid float\r\n"},
		{"GEOADD Sicily -180.5 inf x", "-ERR invalid longitude,latitude pair -180.500000,inf\r\n"},
		{"GEOADD Sicily nx xx 1 2 x", "-ERR syntax error\r\n"},
		{"GEOADD Sicily ch 1 2", "-ERR syntax error\r\n"},
		{"GEOADD Sicily gt 1 2 x", "-ERR syntax error\r\n"},
		{"GEOADD Sicily ch xx 13.361389 39.115556 Palermo 1 1 new", ":1\r\n"},
		{"GEOADD Sicily ch nx 13.361389 38.115556 Palermo 2 2 new", ":1\r\n"},
		{"GEODIST Sicily Palermo Catania", "$11\r\n234236.9921\r\n"},
		{"GEODIST Sicily Palermo Catania KM", "$8\r\n234.2370\r\n"},
		{"GEODIST Sicily Palermo Catania foo", "-ERR unsupported unit provided. please use M, KM, FT, MI\r\n"},
		{"GEODIST Sicily Palermo Catania km x", "-ERR syntax error\r\n"},
		{"GEODIST nokey a b", "$-1\r\n"},
		{"GEOPOS Sicily Palermo nope", "*2\r\n*2\r\n$20\r\n13.36138933897018433\r\n$20\r\n39.11555712199986345\r\n*-1\r\n"},
		{"GEOHASH Sicily Palermo nope", "*2\r\n$11\r\nsqcw80c2wu0\r\n$-1\r\n"},
		{"GEORADIUS Sicily 15 37 200 km WITHDIST WITHCOORD WITHHASH ASC", "*1\r\n*4\r\n$7\r\nCatania\r\n$7\r\n56.4413\r\n:3479447370796909\r\n*2\r\n$20\r\n15.08726745843887329\r\n$20\r\n37.50266842333162032\r\n"},
		{"GEORADIUS Sicily 15 37 200 km COUNT 0", "-ERR COUNT must be > 0\r\n"},
		{"GEORADIUS Sicily 15 37 200 km COUNT abc", "-ERR value is not an integer or out of range\r\n"},
		{"GEORADIUS Sicily 15 37 200 km COUNT", "-ERR syntax error\r\n"},
		{"GEORADIUS Sicily 15 37 200 km ANY", "-ERR the ANY argument requires COUNT argument\r\n"},
		{"GEORADIUS Sicily 15 37 -1 km", "-ERR radius cannot be negative\r\n"},
		{"GEORADIUS Sicily 15 37 abc km", "-ERR need numeric radius\r\n"},
		{"GEORADIUS Sicily 15 37 1 parsec", "-ERR unsupported unit provided. please use M, KM, FT, MI\r\n"},
		{"GEORADIUS Sicily 15 100 1 km", "-ERR invalid longitude,latitude pair 15.000000,100.000000\r\n"},
		{"GEORADIUS Sicily 15 37 200 km STORE dst WITHDIST", "-ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options\r\n"},
		{"GEORADIUS_RO Sicily 15 37 200 km STORE dst", "-ERR syntax error\r\n"},
		{"GEORADIUS Sicily 15 37 200 km STOREDIST dst COUNT 1 DESC", ":1\r\n"},
		{"ZRANGE dst 0 -1 WITHSCORES", "*2\r\n$7\r\nCatania\r\n$18\r\n56.441257870158204\r\n"},
		{"GEORADIUSBYMEMBER Sicily nope -1 km", "-ERR could not decode requested zset member\r\n"},
		{"GEORADIUSBYMEMBER nokey nope -1 km STORE dst", ":0\r\n"},
		{"EXISTS dst", ":0\r\n"},
		{"GEORADIUSBYMEMBER nokey nope 1 km foo", "-ERR syntax error\r\n"},
		{"GEOSEARCH Sicily FROMMEMBER Palermo FROMLONLAT 15 37 BYRADIUS 1 km", "-ERR syntax error\r\n"},
		{"GEOSEARCH Sicily BYRADIUS 1 km", "-ERR wrong number of arguments for 'geosearch' command\r\n"},
		{"GEOSEARCH Sicily FROMLONLAT 15 37", "-ERR wrong number of arguments for 'geosearch' command\r\n"},
		{"geosearch Sicily FROMLONLAT 15 37", "-ERR wrong number of arguments for 'geosearch' command\r\n"},
		{"GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 1 -1 km", "-ERR height or width cannot be negative\r\n"},
		{"GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 1 a km", "-ERR need numeric height\r\n"},
		{"GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX a 1 km", "-ERR need numeric width\r\n"},
		{"GEOSEARCH Sicily FROMMEMBER nope BYRADIUS -1 km", "-ERR could not decode requested zset member\r\n"},
		{"GEOSEARCH Sicily BYRADIUS -1 km FROMMEMBER nope", "-ERR radius cannot be negative\r\n"},
		{"GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 400 400 km STORE x", "-ERR syntax error\r\n"},
		{"GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 400 400 km WITHCOORD DESC", "*1\r\n*2\r\n$7\r\nCatania\r\n*2\r\n$20\r\n15.08726745843887329\r\n$20\r\n37.50266842333162032\r\n"},
		{"GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYBOX 400 400 km WITHDIST", "-ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options\r\n"},
		{"GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYBOX 400 400 km STOREDIST", ":1\r\n"},
		{"GEOSEARCHSTORE dst nokey FROMLONLAT 15 37 BYBOX 400 400 km", ":0\r\n"},
		{"EXISTS dst", ":0\r\n"},
		{"SET str x", "+OK\r\n"},
		{"GEOSEARCH str FROMLONLAT 15 37", "-ERR wrong number of arguments for 'geosearch' command\r\n"},
		{"GEORADIUSBYMEMBER str x -1 km", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
		{"GEOADD str 1 1 a", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
		{"GEOPOS str a", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
	} {
		if got := rc.do(strings.Fields(tc.cmd)...); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.cmd, got, tc.want)
		}
	}
	rc.do("FLUSHALL")
	rc.do("HELLO", "3")
	for _, tc := range []struct{ cmd, want string }{
		{"GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania", ":2\r\n"},
		{"GEOPOS Sicily Palermo nope", "*2\r\n*2\r\n,13.36138933897018433\r\n,38.11555639549629859\r\n_\r\n"},
		{"GEOPOS nokey a", "*1\r\n_\r\n"},
		{"GEOHASH Sicily Catania nope", "*2\r\n$11\r\nsqdtr74hyu0\r\n_\r\n"},
		{"GEODIST Sicily Palermo nope", "_\r\n"},
		{"GEODIST Sicily Palermo Catania mi", "$8\r\n103.3182\r\n"},
		{"GEORADIUS Sicily 15 37 200 km WITHDIST WITHCOORD WITHHASH ASC", "*2\r\n*4\r\n$7\r\nCatania\r\n$7\r\n56.4413\r\n:3479447370796909\r\n*2\r\n,15.08726745843887329\r\n,37.50266842333162032\r\n*4\r\n$7\r\nPalermo\r\n$8\r\n190.4424\r\n:3479099956230698\r\n*2\r\n,13.36138933897018433\r\n,38.11555639549629859\r\n"},
		{"GEOSEARCH nokey FROMLONLAT 15 37 BYRADIUS 1 km", "*0\r\n"},
		{"GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 1 km", "*0\r\n"},
	} {
		if got := rc.do(strings.Fields(tc.cmd)...); got != tc.want {
			t.Errorf("RESP3 %s: %q, want %q", tc.cmd, got, tc.want)
		}
	}
}

// TestGeoSharded: a search that stores into a key of another slot is
// refused with CROSSSLOT on a node of several groups, whichever keyword
// names the destination; with one hash tag it runs in the keys' group. An
// earlier STORE that the last one overrides is not routed by, as in Redis
// Cluster.
func TestGeoSharded(t *testing.T) {
	const n = 3
	s, _ := startSharded(t, n)
	rc := dialRaw(t, s)
	a, b := keyIn(0, n, 0), keyIn(1, n, 0)
	if got := rc.do("GEOADD", a, "13.361389", "38.115556", "Palermo"); got != ":1\r\n" {
		t.Fatalf("GEOADD: %q", got)
	}
	cross := "-" + errCrossSlot + "\r\n"
	for _, cmd := range [][]string{
		{"GEOSEARCHSTORE", b, a, "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km"},
		{"GEORADIUS", a, "15", "37", "200", "km", "STORE", b},
		{"GEORADIUS", a, "15", "37", "200", "km", "STOREDIST", b},
		{"GEORADIUSBYMEMBER", a, "Palermo", "200", "km", "STORE", b},
	} {
		if got := rc.do(cmd...); got != cross {
			t.Errorf("%q: %q, want CROSSSLOT", cmd, got)
		}
	}
	for _, tc := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"GEOADD", "{g}src", "13.361389", "38.115556", "Palermo"}, ":1\r\n"},
		{[]string{"GEORADIUS", "{g}src", "15", "37", "200", "km", "STORE", "{g}dst"}, ":1\r\n"},
		{[]string{"GEOSEARCH", "{g}dst", "FROMMEMBER", "Palermo", "BYRADIUS", "1", "m"}, "*1\r\n$7\r\nPalermo\r\n"},
		{[]string{"GEORADIUS_RO", a, "15", "37", "200", "km"}, "*1\r\n$7\r\nPalermo\r\n"},
		// Redis Cluster routes GEORADIUS by its last destination alone.
		{[]string{"GEORADIUS", "{g}src", "15", "37", "200", "km", "STORE", b, "STOREDIST", "{g}d2"}, ":1\r\n"},
	} {
		if got := rc.do(tc.cmd...); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.cmd, got, tc.want)
		}
	}
}
