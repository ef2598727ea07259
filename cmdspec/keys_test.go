package cmdspec

import (
	"strings"
	"testing"
)

// Key positions come from Redis's key specs, including commands whose keys
// are not a fixed range.
func TestFind(t *testing.T) {
	for _, tc := range []struct {
		args []string
		keys string
	}{
		{[]string{"get", "a"}, "a:r"},
		{[]string{"set", "a", "v"}, "a:w"},
		{[]string{"set", "a", "v", "get"}, "a:rw"},
		{[]string{"mset", "a", "1", "b", "2"}, "a:w b:w"},
		{[]string{"zunionstore", "d", "2", "a", "b", "weights", "1", "2"}, "d:w a:r b:r"},
		{[]string{"eval", "return 1", "2", "a", "b", "x"}, "a:rw b:rw"},
		{[]string{"sort", "a", "by", "w*", "store", "d"}, "a:r d:w"},
		{[]string{"lmove", "a", "b", "left", "right"}, "a:rw b:w"},
		{[]string{"bitfield", "a", "get", "u8", "0"}, "a:r"},
		{[]string{"bitfield", "a", "set", "u8", "0", "1"}, "a:rw"},
		{[]string{"ping"}, ""},
	} {
		args := make([][]byte, len(tc.args))
		for i, a := range tc.args {
			args[i] = []byte(a)
		}
		var got []string
		for _, k := range FinderOf(tc.args[0]).Find(args, nil) {
			perm := ""
			if k.Flags&Access != 0 {
				perm += "r"
			}
			if k.Flags&(Insert|Update|Delete) != 0 {
				perm += "w"
			}
			got = append(got, tc.args[k.Pos]+":"+perm)
		}
		if strings.Join(got, " ") != tc.keys {
			t.Errorf("%v: keys %v, want %s", tc.args, got, tc.keys)
		}
	}
}

// Redis Cluster routes GEORADIUS by its first key and its last STORE or
// STOREDIST, where its key specs (COMMAND GETKEYS, the ACL) name each.
func TestFindRouted(t *testing.T) {
	for _, tc := range []struct {
		args          []string
		specs, routed string
	}{
		{[]string{"georadius", "k", "1", "2", "3", "km", "store", "a", "storedist", "b"}, "k a b", "k b"},
		{[]string{"georadiusbymember", "k", "m", "3", "km", "storedist", "a", "count", "1"}, "k a", "k a"},
		{[]string{"georadius", "k", "1", "2", "3", "km", "store"}, "k", "k"},
		{[]string{"geosearchstore", "d", "k", "frommember", "m"}, "d k", "d k"},
		{[]string{"get", "a"}, "a", "a"},
	} {
		args := make([][]byte, len(tc.args))
		for i, a := range tc.args {
			args[i] = []byte(a)
		}
		names := func(keys []Key) string {
			var out []string
			for _, k := range keys {
				out = append(out, tc.args[k.Pos])
			}
			return strings.Join(out, " ")
		}
		f := FinderOf(tc.args[0])
		if got := names(f.Find(args, nil)); got != tc.specs {
			t.Errorf("%v: keys %s, want %s", tc.args, got, tc.specs)
		}
		if got := names(f.FindRouted(args, nil)); got != tc.routed {
			t.Errorf("%v: routed by %s, want %s", tc.args, got, tc.routed)
		}
	}
}

// A command has keys when a spec names one or it has a finder of its own.
func TestHasKeys(t *testing.T) {
	for name, want := range map[string]bool{
		"get": true, "sort": true, "ping": false, "publish": false, "object|encoding": true, "nosuch": false,
	} {
		if got := FinderOf(name).HasKeys(); got != want {
			t.Errorf("%s: HasKeys %v, want %v", name, got, want)
		}
	}
}

// COMMAND INFO's legacy range is derived from the key specs as Redis
// derives it.
func TestLegacyRange(t *testing.T) {
	for name, want := range map[string][4]int{
		"get":         {1, 1, 1, 0},
		"mset":        {1, -1, 2, 0},
		"del":         {1, -1, 1, 0},
		"zunionstore": {1, 1, 1, 1},
		"ping":        {0, 0, 0, 0},
	} {
		first, last, step, movable := LegacyRange(KeySpecs[name])
		m := 0
		if movable {
			m = 1
		}
		if got := [4]int{first, last, step, m}; got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}
