package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kvs/fsm"
)

// defaults are the values of every parameter before any change, as CONFIG
// GET reports them.
func defaults() map[string]string {
	d := map[string]string{}
	NewStore().AddTo(d, true)
	AddLimits(d, fsm.NewStore().Limits())
	return d
}

func with(base map[string]string, kv ...string) map[string]string {
	m := make(map[string]string, len(base))
	for k, v := range base {
		m[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// TestRewrite rewrites a file with comments, kvs's own directives, an
// option set twice and an alias: values change in place, duplicates go,
// new values come after the signature, and a second rewrite changes
// nothing.
func TestRewrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kvs.conf")
	write(t, path, strings.Join([]string{
		"# kvs test config",
		"addr 127.0.0.1:0",
		"hz 20",
		"",
		"# the second hz wins in Redis; the rewrite keeps one",
		"hz 25",
		"hash-max-ziplist-entries 64",
		"lazyfree-lazy-eviction yes",
	}, "\n")+"\n")
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	def := defaults()
	values := with(def, "hz", "30", "timeout", "10", "maxmemory-clients", "3145728",
		"hash-max-listpack-entries", "64", "hash-max-ziplist-entries", "64",
		"lazyfree-lazy-eviction", "no")
	if err := Rewrite(path, values, def); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"# kvs test config",
		"addr 127.0.0.1:0",
		"hz 30",
		"",
		"# the second hz wins in Redis; the rewrite keeps one",
		"hash-max-listpack-entries 64",
		"lazyfree-lazy-eviction no",
		Signature,
		"timeout 10",
		"maxmemory-clients 3mb",
		`save ""`,
	}, "\n") + "\n"
	check := func(what string) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != want {
			t.Fatalf("%s:\n%s\nwant:\n%s", what, b, want)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v, %v", what, fi.Mode(), err)
		}
	}
	check("rewritten file")
	if err := Rewrite(path, values, def); err != nil {
		t.Fatal(err)
	}
	check("second rewrite")
}

// TestRewriteNewFile writes what differs from the defaults, in Redis's
// formats and in the table's order, into a file that does not exist yet.
func TestRewriteNewFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.conf")
	def := defaults()
	values := with(def, "save", "900 1 300 10", "notify-keyspace-events", "Ex",
		"maxmemory", "1073741824", "repl-backlog-size", "1000",
		"client-output-buffer-limit", "normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 0 0")
	if err := Rewrite(path, values, def); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		Signature,
		"repl-backlog-size 1000",
		"maxmemory 1gb",
		"save 900 1",
		"save 300 10",
		"client-output-buffer-limit pubsub 1mb 0 0",
		`notify-keyspace-events "Ex"`,
	}, "\n") + "\n"
	if string(b) != want {
		t.Fatalf("new file:\n%s\nwant:\n%s", b, want)
	}
}
