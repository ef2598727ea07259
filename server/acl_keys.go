package server

import (
	"strconv"
	"strings"

	"kvs/fsm"
)

// Key specifications, as Redis 7 describes where each command's keys are
// and how it uses them (src/commands/*.json, COMMAND INFO's key specs):
// acl_table.go holds Redis's for every command, and commandKeys walks them
// over a command's arguments, as getKeysUsingKeySpecs does, so that the
// ACL checks every key with the permission its use needs.

// Key spec flags.
const (
	ksRO = 1 << iota
	ksRW
	ksOW
	ksRM
	ksAccess
	ksUpdate
	ksInsert
	ksDelete
	ksIncomplete
	ksVariable
)

// keySpec is one key specification: a begin search (index, or the
// argument after keyword searched from startFrom; unknown when neither)
// and a find-keys rule (a range: lastKey, keyStep, limit; or keyNum: the
// count at keyNumIdx, keys from firstKey after it; unknownKeys when
// neither).
type keySpec struct {
	flags int

	index     int
	keyword   string
	startFrom int
	unknown   bool

	lastKey, keyStep, limit int
	keyNum                  bool
	keyNumIdx, firstKey     int
	unknownKeys             bool
}

// commandKeys calls fn with the index and key spec flags of each key of
// cmd in args, until fn returns false.
func commandKeys(cmd *aclCmd, args [][]byte, fn func(i, flags int) bool) {
	argc := len(args)
	for si := range cmd.specs {
		ks := &cmd.specs[si]
		if ks.unknown || ks.unknownKeys {
			if !specialKeys(cmd.name, ks, args, fn) {
				return
			}
			continue
		}
		first := ks.index
		if ks.keyword != "" {
			first = -1
			start, end, step := ks.startFrom, argc, 1
			if start < 0 {
				start, end, step = argc+start, 0, -1
			}
			for i := start; i != end && i >= 1 && i < argc; i += step {
				if strings.EqualFold(string(args[i]), ks.keyword) {
					first = i + 1
					break
				}
			}
			if first < 0 {
				continue
			}
		}
		if first >= argc {
			continue
		}
		var last, step int
		if ks.keyNum {
			idx := first + ks.keyNumIdx
			if idx >= argc {
				continue
			}
			n, err := strconv.Atoi(string(args[idx]))
			if err != nil || n <= 0 {
				continue
			}
			first = idx + ks.firstKey
			step = ks.keyStep
			last = first + (n-1)*step
		} else {
			step = ks.keyStep
			switch {
			case ks.lastKey >= 0:
				last = first + ks.lastKey
			case ks.limit == 0:
				last = argc + ks.lastKey
			default:
				last = first + ((argc-first)/ks.limit + ks.lastKey)
			}
		}
		if last >= argc {
			last = argc - 1 // the arity check has passed: a malformed tail
		}
		flags := variableFlags(cmd.name, ks.flags, args)
		for i := first; i <= last && step > 0; i += step {
			if !fn(i, flags) {
				return
			}
		}
	}
}

// variableFlags adjusts the flags of the specs Redis marks
// VARIABLE_FLAGS: SET only reads its key with GET; BITFIELD only writes
// with SET or INCRBY.
func variableFlags(name string, flags int, args [][]byte) int {
	if flags&ksVariable == 0 {
		return flags
	}
	switch name {
	case "set":
		for _, a := range args[3:] {
			if is(a, "get") {
				return flags
			}
		}
		return ksOW | ksUpdate
	case "bitfield":
		for _, a := range args[2:] {
			if is(a, "set") || is(a, "incrby") {
				return flags
			}
		}
		return ksRO | ksAccess
	}
	return flags
}

// specialKeys handles the specs Redis leaves to a command's own function:
// SORT's STORE destination (its BY and GET patterns need no key rights
// here; see docs/compatibility.md).
func specialKeys(name string, ks *keySpec, args [][]byte, fn func(i, flags int) bool) bool {
	if name != "sort" || ks.flags&ksOW == 0 {
		return true
	}
	for i := 2; i < len(args)-1; i++ {
		switch {
		case is(args[i], "limit"):
			i += 2
		case is(args[i], "by"), is(args[i], "get"):
			i++
		case is(args[i], "store"):
			return fn(i+1, ks.flags)
		}
	}
	return true
}

func globMatch(pattern, s string) bool { return fsm.MatchGlob(pattern, s) }
