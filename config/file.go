package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"kvs/fsm"
	"kvs/resp"
)

// Directive is one directive of a config file: a name and its arguments,
// and where it was read.
type Directive struct {
	File string
	Line int // 1-based
	Name string
	Args []string
}

func (d Directive) String() string {
	return fmt.Sprintf("%s:%d: %s", d.File, d.Line, d.Name)
}

// ErrFile is the error of a config file that cannot be read as one, or
// whose directives cannot be applied; it is wrapped with the file, the
// line and what is wrong.
var ErrFile = errors.New("config file")

// ReadFile reads the directives of a redis.conf-style file: one per
// line, arguments split as Redis splits them (quotes, escapes), blank
// lines and lines starting with # skipped, `include FILE` read in place.
func ReadFile(path string) ([]Directive, error) {
	return readFile(path, 0)
}

func readFile(path string, depth int) ([]Directive, error) {
	if depth > 16 {
		return nil, fmt.Errorf("%w %s: includes nested more than 16 deep", ErrFile, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFile, err)
	}
	var ds []Directive
	for i, line := range strings.Split(string(b), "\n") {
		args, ok := resp.SplitArgs(strings.TrimSpace(line))
		if !ok {
			return nil, fmt.Errorf("%w %s:%d: unbalanced quotes in %q", ErrFile, path, i+1, line)
		}
		if len(args) == 0 || strings.HasPrefix(args[0], "#") {
			continue
		}
		d := Directive{File: path, Line: i + 1, Name: strings.ToLower(args[0]), Args: args[1:]}
		if d.Name == "include" {
			if len(d.Args) != 1 {
				return nil, fmt.Errorf("%w %s: include takes one file", ErrFile, d)
			}
			inc := d.Args[0]
			if !filepath.IsAbs(inc) {
				inc = filepath.Join(filepath.Dir(path), inc)
			}
			more, err := readFile(inc, depth+1)
			if err != nil {
				return nil, err
			}
			ds = append(ds, more...)
			continue
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// IsParam reports whether name (lowercase) is one of the Redis
// parameters a config file may set: every one CONFIG GET knows.
func IsParam(name string) bool {
	if byName[name] != nil {
		return true
	}
	_, ok := limitParams[name]
	return ok
}

// Pairs turns directives into CONFIG SET pairs: save lines add up, as in
// Redis, and every other directive's arguments are its value.
func Pairs(ds []Directive) [][]byte {
	var pairs [][]byte
	var saves []string
	sawSave := false
	for _, d := range ds {
		v := strings.Join(d.Args, " ")
		if d.Name == "save" {
			sawSave = true
			if v != "" {
				saves = append(saves, v)
			}
			continue
		}
		pairs = append(pairs, []byte(d.Name), []byte(v))
	}
	if sawSave {
		pairs = append(pairs, []byte("save"), []byte(strings.Join(saves, " ")))
	}
	return pairs
}

// PrepareStore applies a config file's encoding thresholds (the
// *-max-listpack-* parameters) to store before anything is restored into
// it, so that a restart rebuilds collections as the file says.
func PrepareStore(store *fsm.Store, ds []Directive) error {
	l := store.Limits()
	for _, d := range ds {
		if _, ok := limitParams[d.Name]; !ok {
			continue
		}
		if _, err := SetLimit(&l, d.Name, []byte(strings.Join(d.Args, " "))); err != nil {
			return fmt.Errorf("%w %s: CONFIG SET failed (possibly related to argument '%s') - %w", ErrFile, d, d.Name, err)
		}
	}
	store.SetLimits(l)
	return nil
}
