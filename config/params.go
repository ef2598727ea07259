package config

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"

	"kvs/resp"
)

type paramKind uint8

const (
	paramBool paramKind = iota + 1
	paramInt
	paramMemory
	paramMemoryPercent
	paramOctal
	paramEnum
	paramString
	paramSpecial
)

type paramFlags uint8

const (
	paramImmutable paramFlags = 1 << iota // CONFIG SET refuses it
	paramProtected                        // refused while enable-protected-configs is no (always, in kvs)
	paramHidden                           // not matched by CONFIG GET patterns, only by its name
	paramMulti                            // its value is several space-separated arguments
	paramUnsigned                         // bounds are checked as unsigned numbers
	paramULL                              // unsigned 64-bit: any value up to 2^64-1 (hi is unused)
)

// Param is one of Redis's parameters: its type and bounds as redis's
// config.c declares them, and the default redis-server reports.
type Param struct {
	name, alias string
	kind        paramKind
	flags       paramFlags
	lo, hi      int64
	enum        []string
	// same[i] is the index of the first enum name with name i's value
	// (Redis's synonyms, such as oom-score-adj's yes and relative); nil
	// when every name has a value of its own.
	same []int
	def  string
}

// byName finds a parameter by its name or alias, lowercase.
var byName = func() map[string]*Param {
	m := make(map[string]*Param, 2*len(table))
	for i := range table {
		p := &table[i]
		m[p.name] = p
		if p.alias != "" {
			m[p.alias] = p
		}
	}
	return m
}()

// Lookup returns the Redis parameter with this name or alias (lowercase),
// or nil.
func Lookup(name string) *Param { return byName[name] }

// Name is the parameter's canonical name (not its alias).
func (p *Param) Name() string { return p.name }

// Canonical maps an alias to its parameter's name; any other name is
// returned as it is.
func Canonical(name string) string {
	if p := byName[name]; p != nil {
		return p.name
	}
	return name
}

// fromFlags are Redis parameters whose value kvs reports from how it
// was started, and which only a restart changes (the listening address,
// the data dir and its fsync policy, the mode), with why, when it is not
// Redis's "can't set immutable config". CONFIG SET refuses them as Redis
// refuses its immutable parameters, unless the value is the one they
// already have; port is the exception, which CONFIG SET binds anew
// outside a cluster.
var fromFlags = map[string]string{
	"port":            "the listening address is set at start (--addr)",
	"bind":            "the listening address is set at start (--addr)",
	"dir":             "",
	"appendonly":      "durability is chosen at start (--data-dir)",
	"appendfsync":     "the fsync policy is chosen at start (--fsync)",
	"databases":       "",
	"cluster-enabled": "",
}

// FromFlags reports whether kvs sets the parameter name from its flags,
// and CONFIG SET's reason for refusing a change of it.
func FromFlags(name string) (why string, ok bool) {
	why, ok = fromFlags[name]
	if ok && why == "" {
		why = "can't set immutable config"
	}
	return why, ok
}

// Store holds the values of the parameters kvs keeps but does not act
// on, by canonical name, as Redis's CONFIG GET would print them.
type Store struct {
	mu sync.Mutex
	v  map[string]string
}

// NewStore returns a Store holding every parameter's default.
func NewStore() *Store {
	ps := &Store{v: make(map[string]string, len(table))}
	for _, p := range table {
		ps.v[p.name] = p.def
	}
	// kvs takes no RDB snapshots on a schedule of its own: save starts
	// empty, as in a redis-server started with --save "".
	ps.v["save"] = ""
	return ps
}

// Get returns the value of the parameter name (canonical).
func (ps *Store) Get(name string) string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.v[name]
}

// Set keeps v, already normalized, as the value of the parameter name
// (canonical).
func (ps *Store) Set(name, v string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.v[name] = v
}

// AddTo adds every parameter and alias to params, the names Redis's CONFIG
// GET * prints; hidden ones only when all is set.
func (ps *Store) AddTo(params map[string]string, all bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range table {
		if p.flags&paramHidden != 0 && !all {
			continue
		}
		params[p.name] = ps.v[p.name]
		if p.alias != "" {
			params[p.alias] = ps.v[p.name]
		}
	}
}

// Normalize checks a CONFIG SET value of p as Redis does and returns it
// as Redis's CONFIG GET then prints it, or an error whose text is Redis's
// reason (the part after "CONFIG SET failed (possibly related to argument
// '...') - ").
func (p *Param) Normalize(val string) (string, error) {
	v, e := p.normalize(val)
	if e != "" {
		return "", errors.New(e)
	}
	return v, nil
}

func (p *Param) normalize(val string) (string, string) {
	switch p.kind {
	case paramBool:
		switch {
		case strings.EqualFold(val, "yes"):
			return "yes", ""
		case strings.EqualFold(val, "no"):
			return "no", ""
		}
		return "", "argument must be 'yes' or 'no'"
	case paramInt, paramMemory, paramMemoryPercent, paramOctal:
		return p.normalizeNumber(val)
	case paramEnum:
		return p.normalizeEnum(val)
	case paramString:
		return val, validString(p.name, val)
	}
	return normalizeSpecial(p.name, val)
}

func (p *Param) normalizeNumber(val string) (string, string) {
	if p.flags&paramULL != 0 {
		// maxmemory and cluster-link-sendbuf-limit hold any unsigned
		// 64-bit size.
		v, ok := ParseMemoryU([]byte(val))
		if !ok {
			return "", "argument must be a memory value"
		}
		if v < uint64(p.lo) {
			return "", "argument must be between " + strconv.FormatInt(p.lo, 10) + " and 18446744073709551615 inclusive"
		}
		return strconv.FormatUint(v, 10), ""
	}
	var v int64
	parsed := false
	if p.kind == paramMemory || p.kind == paramMemoryPercent {
		v, parsed = ParseMemory([]byte(val))
	}
	if !parsed && p.kind == paramMemoryPercent && len(val) > 1 && val[len(val)-1] == '%' {
		if n, ok := resp.ParseInt([]byte(val[:len(val)-1])); ok && n >= 0 {
			v, parsed = -n, true
		}
	}
	if !parsed && p.kind == paramOctal {
		if n, err := strconv.ParseInt(val, 8, 64); err == nil {
			v, parsed = n, true
		}
	}
	if !parsed && p.kind == paramInt {
		v, parsed = resp.ParseInt([]byte(val))
	}
	if !parsed {
		switch p.kind {
		case paramMemoryPercent:
			return "", "argument must be a memory or percent value"
		case paramMemory:
			return "", "argument must be a memory value"
		case paramOctal:
			return "", "argument couldn't be parsed as an octal number"
		}
		return "", "argument couldn't be parsed into an integer"
	}
	switch {
	case p.flags&paramUnsigned != 0:
		// Redis compares the number as unsigned: a negative one is
		// above every bound.
		if v < 0 || v < p.lo || v > p.hi {
			if p.kind == paramOctal {
				return "", "argument must be between " + strconv.FormatInt(p.lo, 8) + " and " + strconv.FormatInt(p.hi, 8) + " inclusive"
			}
			return "", "argument must be between " + strconv.FormatInt(p.lo, 10) + " and " + strconv.FormatInt(p.hi, 10) + " inclusive"
		}
	case p.kind == paramMemoryPercent && v < 0:
		if v < p.lo {
			return "", "percentage argument must be less or equal to " + strconv.FormatInt(-p.lo, 10)
		}
		return strconv.FormatInt(-v, 10) + "%", ""
	case v < p.lo || v > p.hi:
		return "", "argument must be between " + strconv.FormatInt(p.lo, 10) + " and " + strconv.FormatInt(p.hi, 10) + " inclusive"
	}
	switch p.name {
	case "hz":
		// Redis takes hz as a hint and caps it (updateHZ).
		v = min(max(v, 1), 500)
	case "repl-backlog-size":
		v = max(v, 16384) // CONFIG_REPL_BACKLOG_MIN_SIZE
	}
	if p.kind == paramOctal {
		return strconv.FormatInt(v, 8), ""
	}
	return strconv.FormatInt(v, 10), ""
}

func (p *Param) normalizeEnum(val string) (string, string) {
	args := []string{val}
	if p.flags&paramMulti != 0 {
		args = strings.Split(val, " ")
		if val == "" {
			args = nil
		}
	}
	var set uint
	for _, a := range args {
		i := p.enumIndex(a)
		if i < 0 {
			return "", "argument(s) must be one of the following: " + strings.Join(p.enum, ", ")
		}
		set |= 1 << i
	}
	if p.flags&paramMulti == 0 {
		return p.enum[p.canonical(firstBit(set))], ""
	}
	if len(args) == 0 {
		return "", "argument(s) must be one of the following: " + strings.Join(p.enum, ", ")
	}
	// Redis's multi-argument enums are bit sets whose first name is 0
	// (shutdown-on-sig*: default, save, nosave, now, force).
	set &^= 1
	if set&(1<<1) != 0 && set&(1<<2) != 0 {
		return "", "shutdown options SAVE and NOSAVE can't be used simultaneously"
	}
	if set == 0 {
		return p.enum[0], ""
	}
	var names []string
	for i := 1; i < len(p.enum); i++ {
		if set&(1<<i) != 0 {
			names = append(names, p.enum[i])
		}
	}
	return strings.Join(names, " "), ""
}

func (p *Param) enumIndex(a string) int {
	for i, e := range p.enum {
		if strings.EqualFold(a, e) {
			return i
		}
	}
	return -1
}

func (p *Param) canonical(i int) int {
	if p.same != nil {
		return p.same[i]
	}
	return i
}

func firstBit(set uint) int {
	for i := 0; ; i++ {
		if set&(1<<i) != 0 {
			return i
		}
	}
}

// normalizeSpecial checks the parameters Redis parses with code of their
// own.
func normalizeSpecial(name, val string) (string, string) {
	args := strings.Split(val, " ")
	if val == "" {
		args = nil
	}
	switch name {
	case "save":
		if len(args)%2 != 0 {
			return "", "Invalid save parameters"
		}
		out := make([]string, len(args))
		for j, a := range args {
			v, ok := strtollWhole(a)
			if !ok || (j%2 == 0 && v < 1) || (j%2 == 1 && v < 0) {
				return "", "Invalid save parameters"
			}
			out[j] = strconv.FormatInt(v, 10)
		}
		return strings.Join(out, " "), ""
	case "oom-score-adj-values":
		if len(args) != 3 {
			return "", "wrong number of arguments"
		}
		out := make([]string, 3)
		for j, a := range args {
			v, ok := strtollWhole(a)
			if !ok || v < -2000 || v > 2000 {
				return "", "Invalid oom-score-adj-values, elements must be between -2000 and 2000."
			}
			out[j] = strconv.FormatInt(v, 10)
		}
		return strings.Join(out, " "), ""
	case "latency-tracking-info-percentiles":
		out := make([]string, len(args))
		for j, a := range args {
			f, err := strconv.ParseFloat(a, 64)
			if err != nil || a == "" || strings.ContainsAny(a, " \t") || math.IsNaN(f) {
				return "", "Invalid latency-tracking-info-percentiles parameters"
			}
			if f > 100 || f < 0 {
				return "", "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
			}
			out[j] = strconv.FormatFloat(f, 'f', -1, 64)
		}
		return strings.Join(out, " "), ""
	}
	return val, ""
}

// validString is Redis's check of the string parameters it checks.
func validString(name, val string) string {
	switch name {
	case "dbfilename":
		if strings.Contains(val, "/") {
			return "dbfilename can't be a path, just a filename"
		}
	case "cluster-announce-hostname":
		if len(val) >= 256 {
			return "Hostnames must be less than 256 characters"
		}
		for i := 0; i < len(val); i++ {
			c := val[i]
			if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
				return "Hostnames may only contain alphanumeric characters, hyphens or dots"
			}
		}
	case "proc-title-template":
		if !validProcTitleTemplate(val) {
			return "template format is invalid or contains unknown variables"
		}
	}
	return ""
}

// validProcTitleTemplate is Redis's validateProcTitleTemplate: the template
// expands ({name} variables, {{ and }} for braces) with an empty title to
// something other than blanks.
func validProcTitleTemplate(t string) bool {
	var out strings.Builder
	for i := 0; i < len(t); i++ {
		switch c := t[i]; c {
		case '{':
			if i+1 < len(t) && t[i+1] == '{' {
				out.WriteByte('{')
				i++
				continue
			}
			end := strings.IndexByte(t[i+1:], '}')
			if end < 0 {
				return false
			}
			switch t[i+1 : i+1+end] {
			case "title", "server-mode", "unixsocket":
			case "listen-addr", "config-file", "port", "tls-port":
				out.WriteByte('x')
			default:
				return false
			}
			i += end + 1
		case '}':
			if i+1 < len(t) && t[i+1] == '}' {
				out.WriteByte('}')
				i++
				continue
			}
			return false
		default:
			out.WriteByte(c)
		}
	}
	return strings.Trim(out.String(), " ") != ""
}
