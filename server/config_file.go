package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"kvs/fsm"
)

// Config files in redis.conf's syntax: `kvs serve --config FILE` reads
// one, and CONFIG REWRITE writes the running values back into it, keeping
// its comments and layout as Redis does.

// ConfigDirective is one directive of a config file: a name and its
// arguments, and where it was read.
type ConfigDirective struct {
	File string
	Line int // 1-based
	Name string
	Args []string
}

func (d ConfigDirective) String() string {
	return fmt.Sprintf("%s:%d: %s", d.File, d.Line, d.Name)
}

// errConfigFile is the error of a config file that cannot be read as one.
var errConfigFile = errors.New("config file")

// ReadConfigFile reads the directives of a redis.conf-style file: one per
// line, arguments split as Redis splits them (quotes, escapes), blank
// lines and lines starting with # skipped, `include FILE` read in place.
func ReadConfigFile(path string) ([]ConfigDirective, error) {
	return readConfigFile(path, 0)
}

func readConfigFile(path string, depth int) ([]ConfigDirective, error) {
	if depth > 16 {
		return nil, fmt.Errorf("%w %s: includes nested more than 16 deep", errConfigFile, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errConfigFile, err)
	}
	var ds []ConfigDirective
	for i, line := range strings.Split(string(b), "\n") {
		args, ok := splitConfigArgs(strings.TrimSpace(line))
		if !ok {
			return nil, fmt.Errorf("%w %s:%d: unbalanced quotes in %q", errConfigFile, path, i+1, line)
		}
		if len(args) == 0 || strings.HasPrefix(args[0], "#") {
			continue
		}
		d := ConfigDirective{File: path, Line: i + 1, Name: strings.ToLower(args[0]), Args: args[1:]}
		if d.Name == "include" {
			if len(d.Args) != 1 {
				return nil, fmt.Errorf("%w %s: include takes one file", errConfigFile, d)
			}
			inc := d.Args[0]
			if !filepath.IsAbs(inc) {
				inc = filepath.Join(filepath.Dir(path), inc)
			}
			more, err := readConfigFile(inc, depth+1)
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

// splitConfigArgs splits a line as Redis's sdssplitargs does: words
// separated by blanks; "double quotes" with \n \r \t \b \a \\ \" and \xHH
// escapes; 'single quotes' with \' only. It reports false on unbalanced
// quotes, or a closing quote not followed by a blank.
func splitConfigArgs(line string) ([]string, bool) {
	var args []string
	i := 0
	for {
		for i < len(line) && isConfigBlank(line[i]) {
			i++
		}
		if i == len(line) {
			return args, true
		}
		var cur strings.Builder
		inDouble, inSingle := false, false
		for done := false; !done; {
			switch {
			case inDouble:
				if i == len(line) {
					return nil, false
				}
				c := line[i]
				switch {
				case c == '\\' && i+3 < len(line) && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
					v, _ := strconv.ParseUint(line[i+2:i+4], 16, 8)
					cur.WriteByte(byte(v))
					i += 3
				case c == '\\' && i+1 < len(line):
					i++
					switch e := line[i]; e {
					case 'n':
						cur.WriteByte('\n')
					case 'r':
						cur.WriteByte('\r')
					case 't':
						cur.WriteByte('\t')
					case 'b':
						cur.WriteByte('\b')
					case 'a':
						cur.WriteByte('\a')
					default:
						cur.WriteByte(e)
					}
				case c == '"':
					if i+1 < len(line) && !isConfigBlank(line[i+1]) {
						return nil, false
					}
					done = true
				default:
					cur.WriteByte(c)
				}
				i++
			case inSingle:
				if i == len(line) {
					return nil, false
				}
				c := line[i]
				switch {
				case c == '\\' && i+1 < len(line) && line[i+1] == '\'':
					cur.WriteByte('\'')
					i++
				case c == '\'':
					if i+1 < len(line) && !isConfigBlank(line[i+1]) {
						return nil, false
					}
					done = true
				default:
					cur.WriteByte(c)
				}
				i++
			default:
				if i == len(line) {
					done = true
					break
				}
				switch c := line[i]; {
				case isConfigBlank(c):
					done = true
				case c == '"':
					inDouble = true
				case c == '\'':
					inSingle = true
				default:
					cur.WriteByte(c)
				}
				i++
			}
		}
		args = append(args, cur.String())
	}
}

func isConfigBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == 0
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// IsRedisParam reports whether name (lowercase) is one of the Redis
// parameters a config file may set: every one CONFIG GET knows.
func IsRedisParam(name string) bool {
	if redisParamByName[name] != nil {
		return true
	}
	_, ok := limitParams[name]
	return ok
}

// configPairs turns directives into CONFIG SET pairs: save lines add up,
// as in Redis, and every other directive's arguments are its value.
func configPairs(ds []ConfigDirective) [][]byte {
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
func PrepareStore(store *fsm.Store, ds []ConfigDirective) error {
	l := store.Limits()
	for _, d := range ds {
		if _, ok := limitParams[d.Name]; !ok {
			continue
		}
		if _, e := setLimitParam(&l, d.Name, []byte(strings.Join(d.Args, " "))); e != "" {
			return fmt.Errorf("%w %s: %s", errConfigFile, d, strings.TrimPrefix(e, "ERR "))
		}
	}
	store.SetLimits(l)
	return nil
}

// ApplyConfig applies a config file's Redis parameters, as CONFIG SET
// would (immutable ones included: they are being set at start). The
// directives kvs takes as flags must have been removed by the caller.
func (s *Server) ApplyConfig(ds []ConfigDirective) error {
	for _, d := range ds {
		if !IsRedisParam(d.Name) {
			return fmt.Errorf("%w %s: unknown parameter", errConfigFile, d)
		}
	}
	for _, d := range ds {
		// One at a time, so that an error names its line.
		if d.Name == "save" {
			continue
		}
		if e := s.setConfig(configPairs([]ConfigDirective{d}), true); e != "" {
			return fmt.Errorf("%w %s: %s", errConfigFile, d, strings.TrimPrefix(e, "ERR "))
		}
	}
	var saves []ConfigDirective
	for _, d := range ds {
		if d.Name == "save" {
			saves = append(saves, d)
		}
	}
	if len(saves) > 0 {
		if e := s.setConfig(configPairs(saves), true); e != "" {
			return fmt.Errorf("%w %s: %s", errConfigFile, saves[0], strings.TrimPrefix(e, "ERR "))
		}
	}
	return nil
}
