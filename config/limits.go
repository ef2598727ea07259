package config

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"kvs/fsm"
	"kvs/resp"
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

// IsLimit reports whether name (lowercase) is one of the encoding
// thresholds.
func IsLimit(name string) bool {
	_, ok := limitParams[name]
	return ok
}

// AddLimits adds the thresholds l, under every name and alias, to CONFIG
// GET's parameters.
func AddLimits(params map[string]string, l fsm.Limits) {
	for name, p := range limitParams {
		params[name] = strconv.FormatInt(*p.field(&l), 10)
	}
}

// SetLimit checks val for the threshold name and sets it in l. It reports
// false when name is not a threshold, and an error with Redis's reason
// when val is not acceptable.
func SetLimit(l *fsm.Limits, name string, val []byte) (known bool, err error) {
	p, ok := limitParams[name]
	if !ok {
		return false, nil
	}
	var v int64
	if p.memory {
		if v, ok = ParseMemory(val); !ok {
			return true, errors.New("argument must be a memory value")
		}
	} else if v, ok = resp.ParseInt(val); !ok {
		return true, errors.New("argument couldn't be parsed into an integer")
	}
	if v < p.lo || v > p.hi {
		return true, errors.New("argument must be between " + strconv.FormatInt(p.lo, 10) + " and " +
			strconv.FormatInt(p.hi, 10) + " inclusive")
	}
	*p.field(l) = v
	return true, nil
}
