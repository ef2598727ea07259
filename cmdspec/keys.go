// Package cmdspec is what Redis says of its commands beyond their names,
// as data: each command's and subcommand's ACL categories, key
// specifications and tips, and each subcommand's arity and flags
// (table.go, generated from redis-server 7.0.15's COMMAND reply by
// TestGenerateTable), and how to find the keys and channels among a
// command's arguments. The ACL checks those keys and channels, COMMAND
// GETKEYS and COMMAND INFO report them, and routing by hash slot needs
// them; none of that is here, and nothing here knows of clients or the
// store.
//
// Key specifications, as Redis 7 describes where each command's keys are
// and how it uses them (src/commands/*.json, COMMAND INFO's key specs):
// KeyFinder.Find finds a command's keys with them as Redis's
// getKeysFromCommandWithSpecs does, falling back to the command's own
// finder (getKeysProcs) where Redis does; COMMAND INFO's legacy key range
// and movablekeys flag are derived from them as
// populateCommandLegacyRangeSpec derives them (LegacyRange).
package cmdspec

import (
	"strings"

	"kvs/resp"
)

// Key spec flags, in the order COMMAND lists them (addReplyFlagsForKeyArgs).
const (
	RO = 1 << iota
	RW
	OW
	RM
	Access
	Update
	Insert
	Delete
	NotKey
	Incomplete
	VariableFlags
)

// KeyFlagNames are the key spec flags' names as COMMAND spells them, bit
// i's at i.
var KeyFlagNames = []string{"RO", "RW", "OW", "RM", "access", "update", "insert", "delete",
	"not_key", "incomplete", "variable_flags"}

// KeySpec is one key specification: a begin search (Index, or the
// argument after Keyword searched from StartFrom; Unknown when neither)
// and a find-keys rule (a range: LastKey, KeyStep, Limit; or KeyNum: the
// count at KeyNumIdx, keys from FirstKey after it; UnknownKeys when
// neither).
type KeySpec struct {
	Notes string
	Flags int

	Index     int
	Keyword   string
	StartFrom int
	Unknown   bool

	LastKey, KeyStep, Limit int
	KeyNum                  bool
	KeyNumIdx, FirstKey     int
	UnknownKeys             bool
}

// Subcommand is what COMMAND says of a subcommand beyond its categories
// and key specs: its arity and its flags, space-separated in the order
// COMMAND lists them.
type Subcommand struct {
	Arity int
	Flags string
}

// Key is one key of a command: its argument index and its key spec
// flags (0 where Redis's own finder gives none).
type Key struct {
	Pos, Flags int
}

// GetKeysFunc is a command's own key finder (Redis's getkeys_proc): it
// appends the keys of args to keys.
type GetKeysFunc func(args [][]byte, keys []Key) []Key

// getKeysProcs are the finders of the commands kvs has that Redis gives
// one (src/commands.c), for the arguments their key specs cannot
// describe: SORT's STORE, a numkeys that is not a positive count, and the
// flags of SET and BITFIELD, which depend on their options.
var getKeysProcs = map[string]GetKeysFunc{
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
	"migrate":     migrateGetKeys,
}

// routeProcs are the finders Redis Cluster routes by where they find
// other keys than getKeysFromCommandWithSpecs: getNodeByQuery calls
// getKeysFromCommand, which prefers a command's own finder to its key
// specs, and GEORADIUS's finder names only the last STORE or STOREDIST
// destination where the specs name each.
var routeProcs = map[string]GetKeysFunc{
	"georadius":         georadiusGetKeys,
	"georadiusbymember": georadiusGetKeys,
}

// KeyFinder finds a command's keys: Redis's key specs for it and its own
// finder, if it has one, and the finder Redis Cluster routes it by when
// that finds other keys.
type KeyFinder struct {
	Specs []KeySpec
	Proc  GetKeysFunc
	Route GetKeysFunc
}

// FinderOf returns the key finder of the command or subcommand name
// ("get", "object|encoding"); one that finds nothing for a name Redis
// does not have.
func FinderOf(name string) KeyFinder {
	return KeyFinder{Specs: KeySpecs[name], Proc: getKeysProcs[name], Route: routeProcs[name]}
}

// FindRouted appends to keys the keys Redis Cluster routes the command in
// args by (getNodeByQuery's getKeysFromCommand): Find's, except where
// routeProcs says otherwise.
func (f KeyFinder) FindRouted(args [][]byte, keys []Key) []Key {
	if f.Route != nil {
		return f.Route(args, keys)
	}
	return f.Find(args, keys)
}

// Find appends to keys the keys of the command in args (its name
// included), as getKeysFromCommandWithSpecs finds them: by the key specs
// when they are all fixed and valid for args, else by the command's own
// finder, else none.
func (f KeyFinder) Find(args [][]byte, keys []Key) []Key {
	hasKey, variable := false, false
	for i := range f.Specs {
		hasKey = hasKey || f.Specs[i].Flags&NotKey == 0
		variable = variable || f.Specs[i].Flags&VariableFlags != 0
	}
	if hasKey && !variable {
		if out, ok := keysFromSpecs(f.Specs, args, keys); ok {
			return out
		}
	}
	if f.Proc != nil {
		return f.Proc(args, keys)
	}
	return keys
}

// HasKeys reports whether the command may have keys (doesCommandHaveKeys).
func (f KeyFinder) HasKeys() bool {
	if f.Proc != nil {
		return true
	}
	for i := range f.Specs {
		if f.Specs[i].Flags&NotKey == 0 {
			return true
		}
	}
	return false
}

// keysFromSpecs is getKeysUsingKeySpecs: false when a spec is unknown,
// incomplete or does not fit args (a numkeys that is no count, a range
// past the end).
func keysFromSpecs(specs []KeySpec, args [][]byte, keys []Key) ([]Key, bool) {
	argc := len(args)
	for si := range specs {
		ks := &specs[si]
		if ks.Flags&NotKey != 0 {
			continue
		}
		first := 0
		switch {
		case ks.Unknown:
			return keys, false
		case ks.Keyword != "":
			first = keywordIndex(ks, args)
			if first == 0 {
				continue
			}
		default:
			first = ks.Index
		}
		var last, step int
		switch {
		case ks.UnknownKeys:
			return keys, false
		case ks.KeyNum:
			step = ks.KeyStep
			at := first + ks.KeyNumIdx
			if ks.KeyNumIdx >= argc || at >= argc {
				return keys, false
			}
			n, ok := resp.ParseInt(args[at])
			if !ok || n < 0 || n > int64(argc) {
				return keys, false
			}
			first += ks.FirstKey
			last = first + int(n) - 1
		default:
			step = ks.KeyStep
			switch {
			case ks.LastKey >= 0:
				last = first + ks.LastKey
			case ks.Limit == 0:
				last = argc + ks.LastKey
			default:
				last = first + ((argc-first)/ks.Limit + ks.LastKey)
			}
		}
		if last >= argc || last < first || first >= argc {
			return keys, false
		}
		for i := first; i <= last; i += step {
			keys = append(keys, Key{i, ks.Flags})
		}
		if ks.Flags&Incomplete != 0 {
			return keys, false
		}
	}
	return keys, true
}

// keywordIndex returns the index after ks's keyword in args, searched from
// its startFrom (from the end when negative), or 0 when it is not there.
// As Redis's search, it stops one short of the far end.
func keywordIndex(ks *KeySpec, args [][]byte) int {
	argc := len(args)
	start, end := ks.StartFrom, argc-1
	if start <= 0 {
		start, end = argc+ks.StartFrom, 1
	}
	for i := start; i != end; {
		if i >= argc || i < 1 {
			break
		}
		if strings.EqualFold(string(args[i]), ks.Keyword) {
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
func numKeysGetKeys(store, keyCount, firstKey int) GetKeysFunc {
	return func(args [][]byte, keys []Key) []Key {
		n := atoi(args[keyCount])
		if n < 1 || n > int64(len(args)-firstKey) {
			return keys
		}
		for i := 0; i < int(n); i++ {
			keys = append(keys, Key{firstKey + i, 0})
		}
		if store > 0 {
			keys = append(keys, Key{store, 0})
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
func sortROGetKeys(args [][]byte, keys []Key) []Key {
	return append(keys, Key{1, RO | Access})
}

// sortGetKeys: SORT's first argument, and the last STORE's destination.
// LIMIT's two arguments and BY's and GET's one are skipped, so that a
// pattern spelled "store" is not taken for the option.
func sortGetKeys(args [][]byte, keys []Key) []Key {
	keys = append(keys, Key{1, RO | Access})
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
		keys = append(keys, Key{store, OW | Update})
	}
	return keys
}

// georadiusGetKeys: GEORADIUS's and GEORADIUSBYMEMBER's first argument,
// and the last STORE's or STOREDIST's destination (db.c, with no flags).
func georadiusGetKeys(args [][]byte, keys []Key) []Key {
	keys = append(keys, Key{1, 0})
	store := 0
	for i := 5; i < len(args); i++ {
		if (is(args[i], "store") || is(args[i], "storedist")) && i+1 < len(args) {
			store = i + 1
			i++
		}
	}
	if store > 0 {
		keys = append(keys, Key{store, 0})
	}
	return keys
}

// setGetKeys: SET reads its key only with GET.
func setGetKeys(args [][]byte, keys []Key) []Key {
	for _, a := range args[3:] {
		if is(a, "get") {
			return append(keys, Key{1, RW | Access | Update})
		}
	}
	return append(keys, Key{1, OW | Update})
}

// migrateGetKeys is Redis's: the key at 3, or with KEYS (and "" at 3)
// the arguments after it; none when KEYS comes with a key at 3, a
// syntax error MIGRATE answers. AUTH's and AUTH2's arguments are
// skipped.
func migrateGetKeys(args [][]byte, keys []Key) []Key {
	const flags = RW | Access | Delete
	first, num := 3, 1
	if len(args) > 6 {
		for i := 6; i < len(args); i++ {
			if is(args[i], "keys") {
				if len(args[3]) > 0 {
					num = 0
				} else {
					first, num = i+1, len(args)-i-1
				}
				break
			}
			switch {
			case is(args[i], "auth"):
				i++
			case is(args[i], "auth2"):
				i += 2
			}
		}
	}
	for i := 0; i < num; i++ {
		keys = append(keys, Key{first + i, flags})
	}
	return keys
}

// bitfieldGetKeys: BITFIELD only writes with SET or INCRBY, or when its
// arguments are malformed (the safer guess).
func bitfieldGetKeys(args [][]byte, keys []Key) []Key {
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
		return append(keys, Key{1, RO | Access})
	}
	return append(keys, Key{1, RW | Access | Update})
}

// LegacyRange is COMMAND INFO's first key, last key and step, derived
// from the key specs as populateCommandLegacyRangeSpec does, and whether
// the command's keys move (movablekeys): the range does not describe
// them all.
func LegacyRange(specs []KeySpec) (first, last, step int, movable bool) {
	if len(specs) == 0 {
		return 0, 0, 0, false
	}
	plain := func(ks *KeySpec) bool {
		return !ks.Unknown && ks.Keyword == "" && !ks.UnknownKeys && !ks.KeyNum
	}
	if len(specs) == 1 && plain(&specs[0]) {
		ks := &specs[0]
		last = ks.LastKey
		if last >= 0 {
			last += ks.Index
		}
		return ks.Index, last, ks.KeyStep, ks.Flags&Incomplete != 0
	}
	first = -1
	prevLast := 0
	for i := range specs {
		ks := &specs[i]
		if !plain(ks) {
			movable = true
			continue
		}
		if ks.KeyStep != 1 || prevLast != 0 && prevLast != ks.Index-1 {
			movable = true
			continue
		}
		if ks.Flags&Incomplete != 0 {
			movable = true
		}
		if first < 0 || ks.Index < first {
			first = ks.Index
		}
		abs := ks.LastKey
		if abs >= 0 {
			abs += ks.Index
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

// is reports whether arg is the option w (lowercase), in any case.
func is(arg []byte, w string) bool { return resp.IsWord(arg, w) }
