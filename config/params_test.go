package config

import (
	"reflect"
	"testing"

	"kvs/fsm"
)

// TestNormalize checks values of each of Redis's parameter types: the
// value CONFIG GET then prints, or Redis's reason.
func TestNormalize(t *testing.T) {
	for _, c := range []struct{ name, val, want, err string }{
		{"activerehashing", "YES", "yes", ""},
		{"activerehashing", "1", "", "argument must be 'yes' or 'no'"},
		{"hz", "1000", "500", ""},
		{"hz", "abc", "", "argument couldn't be parsed into an integer"},
		{"active-expire-effort", "11", "", "argument must be between 1 and 10 inclusive"},
		{"maxclients", "-1", "", "argument must be between 1 and 4294967295 inclusive"},
		{"proto-max-bulk-len", "2mb", "2097152", ""},
		{"proto-max-bulk-len", "2xb", "", "argument must be a memory value"},
		{"maxmemory", "18446744073709551615", "18446744073709551615", ""},
		{"maxmemory-clients", "10%", "10%", ""},
		{"maxmemory-clients", "101%", "", "percentage argument must be less or equal to 100"},
		{"maxmemory-clients", "x", "", "argument must be a memory or percent value"},
		{"unixsocketperm", "777", "777", ""},
		{"unixsocketperm", "800", "", "argument couldn't be parsed as an octal number"},
		{"repl-backlog-size", "1", "16384", ""},
		{"maxmemory-policy", "ALLKEYS-LRU", "allkeys-lru", ""},
		{"loglevel", "loud", "", "argument(s) must be one of the following: debug, verbose, notice, warning"},
		{"oom-score-adj", "relative", "yes", ""},
		{"shutdown-on-sigterm", "now force", "now force", ""},
		{"shutdown-on-sigterm", "save nosave", "", "shutdown options SAVE and NOSAVE can't be used simultaneously"},
		{"save", "3600 1 300 100", "3600 1 300 100", ""},
		{"save", "60 x", "", "Invalid save parameters"},
		{"oom-score-adj-values", "1 2", "", "wrong number of arguments"},
		{"latency-tracking-info-percentiles", "50 99.9", "50 99.9", ""},
		{"latency-tracking-info-percentiles", "101", "", "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"},
		{"dbfilename", "a/b.rdb", "", "dbfilename can't be a path, just a filename"},
		{"proc-title-template", "{nope}", "", "template format is invalid or contains unknown variables"},
	} {
		p := Lookup(c.name)
		if p == nil {
			t.Fatalf("%s: no such parameter", c.name)
		}
		got, err := p.Normalize(c.val)
		var e string
		if err != nil {
			e = err.Error()
		}
		if got != c.want || e != c.err {
			t.Errorf("%s %q: %q, %q; want %q, %q", c.name, c.val, got, e, c.want, c.err)
		}
	}
	if p := Lookup("slave-read-only"); p == nil || p.Name() != "replica-read-only" || Canonical("slave-read-only") != "replica-read-only" {
		t.Fatalf("alias: %v", p)
	}
}

func TestSetLimit(t *testing.T) {
	var l fsm.Limits
	for _, c := range []struct {
		name, val string
		known     bool
		err       string
	}{
		{"zset-max-ziplist-value", "1kb", true, ""},
		{"list-max-listpack-size", "-3", true, ""},
		{"set-max-intset-entries", "x", true, "argument couldn't be parsed into an integer"},
		{"hash-max-listpack-value", "1q", true, "argument must be a memory value"},
		{"list-compress-depth", "-1", true, "argument must be between 0 and 2147483647 inclusive"},
		{"hz", "10", false, ""},
	} {
		known, err := SetLimit(&l, c.name, []byte(c.val))
		var e string
		if err != nil {
			e = err.Error()
		}
		if known != c.known || e != c.err {
			t.Errorf("%s %q: %v, %q; want %v, %q", c.name, c.val, known, e, c.known, c.err)
		}
	}
	if l.ZSetMaxListpackValue != 1024 || l.ListMaxListpackSize != -3 {
		t.Fatalf("limits %+v", l)
	}
}

func TestCheckNames(t *testing.T) {
	known := map[string]string{"hz": "10", "kvs-version": "1", "script-write-budget": "0"}
	NewStore().AddTo(known, true)
	own := func(name string) bool { return name == "script-write-budget" }
	pairs := func(kv ...string) [][]byte {
		var b [][]byte
		for _, s := range kv {
			b = append(b, []byte(s))
		}
		return b
	}
	for _, c := range []struct {
		pairs   [][]byte
		startup bool
		want    *NameError
	}{
		{pairs("hz", "x", "script-write-budget", "5", "hash-max-ziplist-entries", "1"), false, nil},
		{pairs("HZ", "1", "Nope", "1"), false, &NameError{Name: "Nope"}},
		{pairs("hz", "bad", "DAEMONIZE", "yes"), false, &NameError{"DAEMONIZE", "can't set immutable config"}},
		{pairs("daemonize", "yes"), true, nil},
		{pairs("dbfilename", "x"), false, &NameError{"dbfilename", "can't set protected config"}},
		{pairs("kvs-version", "2"), false, &NameError{"kvs-version", "can't set immutable config"}},
		{pairs("kvs-version", "2"), true, nil},
		{pairs("hz", "1", "hz", "2"), false, &NameError{"hz", "duplicate parameter"}},
	} {
		if got := CheckNames(c.pairs, known, own, c.startup); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q startup %v: %v, want %v", c.pairs, c.startup, got, c.want)
		}
	}
}

func TestGet(t *testing.T) {
	params := map[string]string{}
	NewStore().AddTo(params, true)
	got := Get(params, [][]byte{[]byte("maxmemory-p*"), []byte("MaxMemory-Policy"), []byte("watchdog-period"), []byte("watchdog*"), []byte("nosuch")})
	want := []Pair{{"maxmemory-policy", "noeviction"}, {"watchdog-period", "0"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q, want %q", got, want)
	}
	got = Get(params, [][]byte{[]byte("HZ"), []byte("h?")})
	if want := []Pair{{"HZ", "10"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("%q, want %q", got, want)
	}
}

func TestParseMemory(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"1k", 1000, true}, {"1KB", 1024, true}, {"3m", 3000000, true},
		{"2gb", 2 << 30, true}, {"5b", 5, true}, {"", 0, true}, {"-1", 0, false}, {"1kib", 0, false},
	} {
		if v, ok := ParseMemory([]byte(c.in)); v != c.want || ok != c.ok {
			t.Errorf("%q: %d, %v; want %d, %v", c.in, v, ok, c.want, c.ok)
		}
	}
}

func TestBufferLimitsAndNotify(t *testing.T) {
	var l BufferLimits
	l, err := ParseBufferLimits(l, []byte("replica 1mb 2k 30 pubsub 0 0 0"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := l.String(), "normal 0 0 0 slave 1048576 2000 30 pubsub 0 0 0"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	for v, want := range map[string]string{
		"normal 1 2":             "Wrong number of arguments in buffer limit configuration.",
		"master 1 2 3":           "Invalid client class specified in buffer limit configuration.",
		"normal 1x 2 3":          "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
		"normal 1 2 -3":          "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
		"normal 1 2 3 bad 1 2 3": "Invalid client class specified in buffer limit configuration.",
	} {
		if _, err := ParseBufferLimits(l, []byte(v)); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %q", v, err, want)
		}
	}
	f, err := ParseNotify([]byte("KEA"))
	if err != nil || NotifyString(f) != "AKE" {
		t.Fatalf("KEA: %q, %v", NotifyString(f), err)
	}
	if f, _ := ParseNotify([]byte("gx$E")); NotifyString(f) != "g$xE" {
		t.Fatalf("gx$E: %q", NotifyString(f))
	}
	if _, err := ParseNotify([]byte("Kq")); err == nil || err.Error() != "Invalid event class character. Use 'Ag$lshzxeKEtmdn'." {
		t.Fatalf("Kq: %v", err)
	}
}
