package server

import (
	"strings"

	"kvs/fsm"
)

// Key specifications, as Redis 7 describes where each command's keys are
// and how it uses them (src/commands/*.json, COMMAND INFO's key specs):
// acl_table.go holds Redis's for every command. commandKeys finds a
// command's keys with them as Redis's getKeysFromCommandWithSpecs does,
// falling back to the command's own finder (getKeysProcs) where Redis
// does, for the ACL's key checks and COMMAND GETKEYS alike; COMMAND INFO's
// legacy key range and movablekeys flag are derived from them as
// populateCommandLegacyRangeSpec derives them.

// Key spec flags, in the order COMMAND lists them (addReplyFlagsForKeyArgs).
const (
	ksRO = 1 << iota
	ksRW
	ksOW
	ksRM
	ksAccess
	ksUpdate
	ksInsert
	ksDelete
	ksNotKey
	ksIncomplete
	ksVariable
)

var keySpecFlagNames = []string{"RO", "RW", "OW", "RM", "access", "update", "insert", "delete",
	"not_key", "incomplete", "variable_flags"}

// keySpec is one key specification: a begin search (index, or the
// argument after keyword searched from startFrom; unknown when neither)
// and a find-keys rule (a range: lastKey, keyStep, limit; or keyNum: the
// count at keyNumIdx, keys from firstKey after it; unknownKeys when
// neither).
type keySpec struct {
	notes string
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

// keyRef is one key of a command: its argument index and its key spec
// flags (0 where Redis's own finder gives none).
type keyRef struct {
	pos, flags int
}

// getKeysFunc is a command's own key finder (Redis's getkeys_proc): it
// appends the keys of args to keys.
type getKeysFunc func(args [][]byte, keys []keyRef) []keyRef

// getKeysProcs are the finders of the commands kvs has that Redis gives
// one (src/commands.c), for the arguments their key specs cannot
// describe: SORT's STORE, a numkeys that is not a positive count, and the
// flags of SET and BITFIELD, which depend on their options.
var getKeysProcs = map[string]getKeysFunc{
	"sintercard":  numKeysGetKeys(0, 1, 2),
	"zunion":      numKeysGetKeys(0, 1, 2),
	"zinter":      numKeysGetKeys(0, 1, 2),
	"zdiff":       numKeysGetKeys(0, 1, 2),
	"zintercard":  numKeysGetKeys(0, 1, 2),
	"zunionstore": numKeysGetKeys(1, 2, 3),
	"zinterstore": numKeysGetKeys(1, 2, 3),
	"zdiffstore":  numKeysGetKeys(1, 2, 3),
	"eval":        numKeysGetKeys(0, 2, 3),
	"evalsha":     numKeysGetKeys(0, 2, 3),
	"eval_ro":     numKeysGetKeys(0, 2, 3),
	"evalsha_ro":  numKeysGetKeys(0, 2, 3),
	"fcall":       numKeysGetKeys(0, 2, 3),
	"fcall_ro":    numKeysGetKeys(0, 2, 3),
	"lmpop":       numKeysGetKeys(0, 1, 2),
	"zmpop":       numKeysGetKeys(0, 1, 2),
	"blmpop":      numKeysGetKeys(0, 2, 3),
	"bzmpop":      numKeysGetKeys(0, 2, 3),
	"sort":        sortGetKeys,
	"sort_ro":     sortROGetKeys,
	"set":         setGetKeys,
	"bitfield":    bitfieldGetKeys,
}

// commandKeys appends to keys the keys of cmd in args, as
// getKeysFromCommandWithSpecs finds them: by the key specs when they are
// all fixed and valid for args, else by the command's own finder, else
// none.
func commandKeys(cmd *aclCmd, args [][]byte, keys []keyRef) []keyRef {
	hasKey, variable := false, false
	for i := range cmd.specs {
		hasKey = hasKey || cmd.specs[i].flags&ksNotKey == 0
		variable = variable || cmd.specs[i].flags&ksVariable != 0
	}
	if hasKey && !variable {
		if out, ok := keysFromSpecs(cmd.specs, args, keys); ok {
			return out
		}
	}
	if cmd.getKeys != nil {
		return cmd.getKeys(args, keys)
	}
	return keys
}

// hasKeys reports whether cmd may have keys (doesCommandHaveKeys).
func (cmd *aclCmd) hasKeys() bool {
	if cmd.getKeys != nil {
		return true
	}
	for i := range cmd.specs {
		if cmd.specs[i].flags&ksNotKey == 0 {
			return true
		}
	}
	return false
}

// keysFromSpecs is getKeysUsingKeySpecs: false when a spec is unknown,
// incomplete or does not fit args (a numkeys that is no count, a range
// past the end).
func keysFromSpecs(specs []keySpec, args [][]byte, keys []keyRef) ([]keyRef, bool) {
	argc := len(args)
	for si := range specs {
		ks := &specs[si]
		if ks.flags&ksNotKey != 0 {
			continue
		}
		first := 0
		switch {
		case ks.unknown:
			return keys, false
		case ks.keyword != "":
			first = keywordIndex(ks, args)
			if first == 0 {
				continue
			}
		default:
			first = ks.index
		}
		var last, step int
		switch {
		case ks.unknownKeys:
			return keys, false
		case ks.keyNum:
			step = ks.keyStep
			at := first + ks.keyNumIdx
			if ks.keyNumIdx >= argc || at >= argc {
				return keys, false
			}
			n, ok := parseInt(args[at])
			if !ok || n < 0 || n > int64(argc) {
				return keys, false
			}
			first += ks.firstKey
			last = first + int(n) - 1
		default:
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
		if last >= argc || last < first || first >= argc {
			return keys, false
		}
		for i := first; i <= last; i += step {
			keys = append(keys, keyRef{i, ks.flags})
		}
		if ks.flags&ksIncomplete != 0 {
			return keys, false
		}
	}
	return keys, true
}

// keywordIndex returns the index after ks's keyword in args, searched from
// its startFrom (from the end when negative), or 0 when it is not there.
// As Redis's search, it stops one short of the far end.
func keywordIndex(ks *keySpec, args [][]byte) int {
	argc := len(args)
	start, end := ks.startFrom, argc-1
	if start <= 0 {
		start, end = argc+ks.startFrom, 1
	}
	for i := start; i != end; {
		if i >= argc || i < 1 {
			break
		}
		if strings.EqualFold(string(args[i]), ks.keyword) {
			return i + 1
		}
		if start <= end {
			i++
		} else {
			i--
		}
	}
	return 0
}

// numKeysGetKeys is Redis's genericGetKeys: a count at keyCount, the keys
// from firstKey, and a destination at store (0: none) after them. A count
// that the arguments cannot hold gives no keys.
func numKeysGetKeys(store, keyCount, firstKey int) getKeysFunc {
	return func(args [][]byte, keys []keyRef) []keyRef {
		n := atoi(args[keyCount])
		if n < 1 || n > int64(len(args)-firstKey) {
			return keys
		}
		for i := 0; i < int(n); i++ {
			keys = append(keys, keyRef{firstKey + i, 0})
		}
		if store > 0 {
			keys = append(keys, keyRef{store, 0})
		}
		return keys
	}
}

// atoi is C's atoi over an argument: leading blanks, a sign, the digits
// that follow; 0 when there are none.
func atoi(b []byte) int64 {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] >= '\t' && b[i] <= '\r') {
		i++
	}
	neg := false
	if i < len(b) && (b[i] == '-' || b[i] == '+') {
		neg = b[i] == '-'
		i++
	}
	var n int64
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		n = n*10 + int64(b[i]-'0')
		if n > 1<<31 {
			break // past any count of arguments; C's int would have wrapped
		}
	}
	if neg {
		return -n
	}
	return n
}

// sortROGetKeys: SORT_RO reads its first argument; the keys its BY and GET
// patterns name come from the data.
func sortROGetKeys(args [][]byte, keys []keyRef) []keyRef {
	return append(keys, keyRef{1, ksRO | ksAccess})
}

// sortGetKeys: SORT's first argument, and the last STORE's destination.
// LIMIT's two arguments and BY's and GET's one are skipped, so that a
// pattern spelled "store" is not taken for the option.
func sortGetKeys(args [][]byte, keys []keyRef) []keyRef {
	keys = append(keys, keyRef{1, ksRO | ksAccess})
	store := 0
	for i := 2; i < len(args); i++ {
		switch {
		case is(args[i], "limit"):
			i += 2
		case is(args[i], "get"), is(args[i], "by"):
			i++
		case is(args[i], "store") && i+1 < len(args):
			store = i + 1
		}
	}
	if store > 0 {
		keys = append(keys, keyRef{store, ksOW | ksUpdate})
	}
	return keys
}

// setGetKeys: SET reads its key only with GET.
func setGetKeys(args [][]byte, keys []keyRef) []keyRef {
	for _, a := range args[3:] {
		if is(a, "get") {
			return append(keys, keyRef{1, ksRW | ksAccess | ksUpdate})
		}
	}
	return append(keys, keyRef{1, ksOW | ksUpdate})
}

// bitfieldGetKeys: BITFIELD only writes with SET or INCRBY, or when its
// arguments are malformed (the safer guess).
func bitfieldGetKeys(args [][]byte, keys []keyRef) []keyRef {
	readonly := true
	for i := 2; i < len(args); i++ {
		more := len(args) - i - 1
		switch {
		case is(args[i], "get") && more >= 2:
			i += 2
		case (is(args[i], "set") || is(args[i], "incrby")) && more >= 3:
			readonly = false
			i = len(args)
		case is(args[i], "overflow") && more >= 1:
			i++
		default:
			readonly = false
			i = len(args)
		}
	}
	if readonly {
		return append(keys, keyRef{1, ksRO | ksAccess})
	}
	return append(keys, keyRef{1, ksRW | ksAccess | ksUpdate})
}

// legacyRange is COMMAND INFO's first key, last key and step, derived
// from the key specs as populateCommandLegacyRangeSpec does, and whether
// the command's keys move (movablekeys): the range does not describe
// them all.
func legacyRange(specs []keySpec) (first, last, step int, movable bool) {
	if len(specs) == 0 {
		return 0, 0, 0, false
	}
	plain := func(ks *keySpec) bool {
		return !ks.unknown && ks.keyword == "" && !ks.unknownKeys && !ks.keyNum
	}
	if len(specs) == 1 && plain(&specs[0]) {
		ks := &specs[0]
		last = ks.lastKey
		if last >= 0 {
			last += ks.index
		}
		return ks.index, last, ks.keyStep, ks.flags&ksIncomplete != 0
	}
	first = -1
	prevLast := 0
	for i := range specs {
		ks := &specs[i]
		if !plain(ks) {
			movable = true
			continue
		}
		if ks.keyStep != 1 || prevLast != 0 && prevLast != ks.index-1 {
			movable = true
			continue
		}
		if ks.flags&ksIncomplete != 0 {
			movable = true
		}
		if first < 0 || ks.index < first {
			first = ks.index
		}
		abs := ks.lastKey
		if abs >= 0 {
			abs += ks.index
		}
		if uint32(abs) > uint32(last) { // unsigned, as Redis compares: -1 is the largest
			last = abs
		}
		prevLast = last
	}
	if first < 0 {
		return 0, 0, 0, true
	}
	return first, last, 1, movable
}

func globMatch(pattern, s string) bool { return fsm.MatchGlob(pattern, s) }
