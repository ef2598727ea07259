package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"kvs/fsm"
)

// TestReadFileSplitsAsRedis checks that a line's words are split as
// Redis's sdssplitargs splits them: quotes, escapes, and the errors of
// unbalanced quotes.
func TestReadFileSplitsAsRedis(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kvs.conf")
	for _, c := range []struct {
		line string
		want []string // nil: no directive
		ok   bool
	}{
		{"", nil, true},
		{"  hz   20 ", []string{"hz", "20"}, true},
		{`save ""`, []string{"save", ""}, true},
		{`notify-keyspace-events "Kx\x41\n\"q\""`, []string{"notify-keyspace-events", "KxA\n\"q\""}, true},
		{`a 'it\'s' b`, []string{"a", "it's", "b"}, true},
		{`a "b c"d`, nil, false},
		{`a "unterminated`, nil, false},
		{`a 'unterminated`, nil, false},
		{"a\tb", []string{"a", "b"}, true},
		{"# save 900 1", nil, true},
	} {
		write(t, path, c.line+"\n")
		ds, err := ReadFile(path)
		if (err == nil) != c.ok {
			t.Errorf("%q: error %v, want ok %v", c.line, err, c.ok)
			continue
		}
		if !c.ok {
			if !errors.Is(err, ErrFile) || !strings.Contains(err.Error(), "kvs.conf:1: unbalanced quotes") {
				t.Errorf("%q: error %v", c.line, err)
			}
			continue
		}
		var got []string
		for _, d := range ds {
			got = append(append(got, d.Name), d.Args...)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %q, want %q", c.line, got, c.want)
		}
	}
}

func TestReadFileIncludes(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "more.conf"), "timeout 5\n")
	main := filepath.Join(dir, "kvs.conf")
	write(t, main, "# a comment\n\nHZ 20\ninclude more.conf\nsave 900 1\nsave 300 10\n")
	ds, err := ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range ds {
		got = append(got, d.Name+" "+strings.Join(d.Args, " "))
	}
	if want := []string{"hz 20", "timeout 5", "save 900 1", "save 300 10"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("directives %q, want %q", got, want)
	}
	if ds[1].File != filepath.Join(dir, "more.conf") || ds[1].Line != 1 || ds[2].Line != 5 {
		t.Fatalf("positions %v", ds)
	}
	// Redis adds up save lines into one value.
	want := [][]byte{[]byte("hz"), []byte("20"), []byte("timeout"), []byte("5"), []byte("save"), []byte("900 1 300 10")}
	if got := Pairs(ds); !reflect.DeepEqual(got, want) {
		t.Fatalf("pairs %q, want %q", got, want)
	}
	write(t, main, "include kvs.conf\n")
	if _, err := ReadFile(main); !errors.Is(err, ErrFile) || !strings.Contains(err.Error(), "nested more than 16 deep") {
		t.Fatalf("include loop: %v", err)
	}
}

func TestPrepareStore(t *testing.T) {
	store := fsm.NewStore()
	ds := []Directive{
		{File: "f", Line: 1, Name: "hash-max-ziplist-entries", Args: []string{"64"}},
		{File: "f", Line: 2, Name: "zset-max-listpack-value", Args: []string{"1kb"}},
		{File: "f", Line: 3, Name: "hz", Args: []string{"20"}},
	}
	if err := PrepareStore(store, ds); err != nil {
		t.Fatal(err)
	}
	if l := store.Limits(); l.HashMaxListpackEntries != 64 || l.ZSetMaxListpackValue != 1024 {
		t.Fatalf("limits %+v", l)
	}
	err := PrepareStore(store, []Directive{{File: "f", Line: 7, Name: "list-compress-depth", Args: []string{"-1"}}})
	want := "config file f:7: list-compress-depth: CONFIG SET failed (possibly related to argument 'list-compress-depth') - argument must be between 0 and 2147483647 inclusive"
	if !errors.Is(err, ErrFile) || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
