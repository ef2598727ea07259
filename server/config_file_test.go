package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kvs/config"
)

// TestConfigRewrite checks CONFIG REWRITE end to end (the rewrite itself is
// config's, tested there): a file applied at start, CONFIG SETs, the file
// rewritten, and the file read back gives a fresh server the same values.
func TestConfigRewrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kvs.conf")
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
	ds, err := config.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, Config{ConfigFile: path})
	if err := s.ApplyConfig(ds[1:]); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, s)
	if got := rc.do("CONFIG", "GET", "hz"); got != "*2\r\n$2\r\nhz\r\n$2\r\n25\r\n" {
		t.Fatalf("hz from the file: %q", got)
	}
	for _, args := range [][]string{
		{"CONFIG", "SET", "hz", "30"},
		{"CONFIG", "SET", "timeout", "10"},
		{"CONFIG", "SET", "maxmemory-clients", "3mb"},
		{"CONFIG", "SET", "lazyfree-lazy-eviction", "no"},
		{"CONFIG", "REWRITE"},
	} {
		if got := rc.do(args...); got != "+OK\r\n" {
			t.Fatalf("%q: %q", args, got)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
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
		config.Signature,
		"timeout 10",
		"maxmemory-clients 3mb",
		`save ""`,
	}, "\n") + "\n"
	if string(b) != want {
		t.Fatalf("rewritten file:\n%s\nwant:\n%s", b, want)
	}
	// Read back into a fresh server: the same values.
	ds, err = config.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s2 := startServer(t, Config{ConfigFile: path})
	if err := s2.ApplyConfig(ds[1:]); err != nil {
		t.Fatal(err)
	}
	rc2 := dialRaw(t, s2)
	for _, p := range []string{"hz", "timeout", "maxmemory-clients", "hash-max-listpack-entries", "lazyfree-lazy-eviction", "save"} {
		if a, b := rc.do("CONFIG", "GET", p), rc2.do("CONFIG", "GET", p); a != b {
			t.Errorf("CONFIG GET %s: %q after the rewrite, %q read back", p, a, b)
		}
	}
	// A second rewrite changes nothing.
	if got := rc2.do("CONFIG", "REWRITE"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if b2, _ := os.ReadFile(path); string(b2) != want {
		t.Fatalf("second rewrite:\n%s", b2)
	}
	if got := dialRaw(t, startServer(t, Config{})).do("CONFIG", "REWRITE"); got != "-ERR The server is running without a config file\r\n" {
		t.Fatalf("without a file: %q", got)
	}
}

func TestApplyConfigErrors(t *testing.T) {
	s := startServer(t, Config{})
	for _, c := range []struct {
		d    config.Directive
		want string
	}{
		{config.Directive{File: "f", Line: 3, Name: "nosuch", Args: []string{"1"}}, "config file f:3: nosuch: unknown parameter"},
		{config.Directive{File: "f", Line: 4, Name: "hz", Args: []string{"abc"}}, "config file f:4: hz: CONFIG SET failed (possibly related to argument 'hz') - argument couldn't be parsed into an integer"},
	} {
		if err := s.ApplyConfig([]config.Directive{c.d}); err == nil || err.Error() != c.want {
			t.Errorf("%v: %v, want %q", c.d, err, c.want)
		}
	}
	// Immutable parameters are taken at start.
	if err := s.ApplyConfig([]config.Directive{{Name: "io-threads", Args: []string{"4"}}}); err != nil {
		t.Fatal(err)
	}
	if got := s.configParams()["io-threads"]; got != "4" {
		t.Fatalf("io-threads %q", got)
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
