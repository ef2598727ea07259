package server

import (
	"math"
	"strconv"
	"strings"

	"kvs/fsm"
)

// Redis's encoding thresholds (fsm.Limits) as CONFIG parameters, under
// their Redis 7 names and the older ziplist aliases, with Redis's ranges:
// the sizes are size_t parameters (0 to LONG_MAX), list-max-listpack-size
// an int (negative: a size class in KiB), list-compress-depth a
// non-negative int. CONFIG GET reports each name and alias; CONFIG SET of
// either changes the store's limits, which change memory use and OBJECT
// ENCODING but no reply, so each node of a cluster has its own.

type limitParam struct {
	lo, hi int64
	memory bool // a size in bytes, which takes units (1kb, 2mb)
	field  func(l *fsm.Limits) *int64
}

var limitParams = func() map[string]limitParam {
	const sizeMax = math.MaxInt64
	p := map[string]limitParam{}
	add := func(lo, hi int64, field func(l *fsm.Limits) *int64, names ...string) {
		for _, n := range names {
			p[n] = limitParam{lo: lo, hi: hi, memory: strings.HasSuffix(n, "-value"), field: field}
		}
	}
	add(0, sizeMax, func(l *fsm.Limits) *int64 { return &l.HashMaxListpackEntries },
		"hash-max-listpack-entries", "hash-max-ziplist-entries")
	add(0, sizeMax, func(l *fsm.Limits) *int64 { return &l.HashMaxListpackValue },
		"hash-max-listpack-value", "hash-max-ziplist-value")
	add(0, sizeMax, func(l *fsm.Limits) *int64 { return &l.SetMaxIntsetEntries }, "set-max-intset-entries")
	add(0, sizeMax, func(l *fsm.Limits) *int64 { return &l.SetMaxListpackEntries }, "set-max-listpack-entries")
	add(0, sizeMax, func(l *fsm.Limits) *int64 { return &l.SetMaxListpackValue }, "set-max-listpack-value")
	add(0, sizeMax, func(l *fsm.Limits) *int64 { return &l.ZSetMaxListpackEntries },
		"zset-max-listpack-entries", "zset-max-ziplist-entries")
	add(0, sizeMax, func(l *fsm.Limits) *int64 { return &l.ZSetMaxListpackValue },
		"zset-max-listpack-value", "zset-max-ziplist-value")
	add(math.MinInt32, math.MaxInt32, func(l *fsm.Limits) *int64 { return &l.ListMaxListpackSize },
		"list-max-listpack-size", "list-max-ziplist-size")
	add(0, math.MaxInt32, func(l *fsm.Limits) *int64 { return &l.ListCompressDepth }, "list-compress-depth")
	return p
}()

// addLimitParams adds the thresholds in force to CONFIG GET's parameters.
func (s *Server) addLimitParams(params map[string]string) {
	l := s.cfg.Store.Limits()
	for name, p := range limitParams {
		params[name] = strconv.FormatInt(*p.field(&l), 10)
	}
}

// setLimitParam checks val for the threshold name and sets it in l. It
// reports false when name is not a threshold, and Redis's error text when
// val is not acceptable.
func setLimitParam(l *fsm.Limits, name string, val []byte) (known bool, e string) {
	p, ok := limitParams[name]
	if !ok {
		return false, ""
	}
	var v int64
	if p.memory {
		if v, ok = parseMemory(val); !ok {
			return true, errConfigSetFailed(name, "argument must be a memory value")
		}
	} else if v, ok = parseInt(val); !ok {
		return true, errConfigSetFailed(name, "argument couldn't be parsed into an integer")
	}
	if v < p.lo || v > p.hi {
		return true, errConfigSetFailed(name, "argument must be between "+strconv.FormatInt(p.lo, 10)+" and "+
			strconv.FormatInt(p.hi, 10)+" inclusive")
	}
	*p.field(l) = v
	return true, ""
}

// parseMemory parses a memory value as Redis's memtoull does: digits, then
// an optional unit (b, k, kb, m, mb, g, gb, any case; k is 1000, kb 1024);
// no sign. Too many digits give the largest value, and a product too
// large wraps, as in C; the caller's range check then refuses both.
func parseMemory(b []byte) (int64, bool) {
	v, ok := parseMemoryU(b)
	return int64(v), ok
}

// parseMemoryU is parseMemory's unsigned 64-bit number, as Redis's
// memtoull returns it.
func parseMemoryU(b []byte) (uint64, bool) {
	i := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	var mul uint64
	switch unit := strings.ToLower(string(b[i:])); unit {
	case "", "b":
		mul = 1
	case "k":
		mul = 1000
	case "kb":
		mul = 1024
	case "m":
		mul = 1000 * 1000
	case "mb":
		mul = 1024 * 1024
	case "g":
		mul = 1000 * 1000 * 1000
	case "gb":
		mul = 1024 * 1024 * 1024
	default:
		return 0, false
	}
	if i >= 128 {
		return 0, false
	}
	var v uint64
	for _, c := range b[:i] {
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			v = math.MaxUint64
			break
		}
		v = v*10 + d
	}
	return v * mul, true
}

// configSetNames checks the names of CONFIG SET's pairs before any value,
// as Redis 7.0 does: the first unknown, immutable or repeated name is the
// error, even after a pair whose value is wrong.
func configSetNames(pairs [][]byte, known map[string]string, startup bool) string {
	seen := map[string]bool{}
	for j := 0; j < len(pairs); j += 2 {
		// The errors of this phase name the argument as given.
		given := string(pairs[j])
		name := strings.ToLower(given)
		_, isLimit := limitParams[name]
		p := redisParamByName[name]
		switch {
		case p != nil:
			// Every parameter kvs acts on is one of Redis's and takes
			// its flags from there; a change its own code refuses (a
			// tls-port, a flag's value) is refused when it is checked.
			if p.flags&paramImmutable != 0 && !startup {
				return errConfigSetFailed(given, "can't set immutable config")
			}
			if p.flags&paramProtected != 0 && !startup {
				return errConfigSetFailed(given, "can't set protected config")
			}
		case isLimit:
			// set-max-listpack-*: Redis 7.2's, which 7.0's table lacks.
		case isScriptParam(name):
			// kvs's own, which CONFIG SET changes.
		case hasParam(known, name) && !startup:
			return errConfigSetFailed(given, "can't set immutable config")
		case hasParam(known, name):
		default:
			return errConfigSetUnknown(pairs[j])
		}
		// Redis 7.0 takes a name and its alias as two parameters.
		if seen[name] {
			return errConfigSetFailed(given, "duplicate parameter")
		}
		seen[name] = true
	}
	return ""
}

func hasParam(params map[string]string, name string) bool {
	_, ok := params[name]
	return ok
}
