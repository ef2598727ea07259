package test

import (
	"math/rand"
	"strconv"
	"strings"
	"time"
)

// cmdGen produces random string and key commands over a small key space,
// so that keys collide and commands see each other's values and expiries.
// Arguments are drawn from pools that mix valid and invalid values.
//
// It avoids what two correct servers may legitimately answer differently
// because of timing: relative expiries are long (100 s or more, or zero and
// negative, which delete at once), and GT/LT are given only absolute
// deadlines, which are far from any relative one (relative GT against an
// equal relative deadline depends on whether a millisecond ticked between
// the two commands). It also avoids float arithmetic whose result Redis's
// long double and a float64 round differently: increments are exact binary
// fractions (TestFloatQuirks covers the rest).
type cmdGen struct {
	r    *rand.Rand
	now0 int64 // Unix seconds when the run started; absolute deadlines are relative to it
}

func newCmdGen(seed int64) *cmdGen {
	return &cmdGen{r: rand.New(rand.NewSource(seed)), now0: time.Now().Unix()}
}

func (g *cmdGen) pick(pool ...string) string { return pool[g.r.Intn(len(pool))] }
func (g *cmdGen) chance(p float64) bool      { return g.r.Float64() < p }

var diffKeys = []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"}

func (g *cmdGen) key() string { return diffKeys[g.r.Intn(len(diffKeys))] }

func (g *cmdGen) keys(min int) []string {
	n := min + g.r.Intn(4)
	ks := make([]string, n)
	for i := range ks {
		ks[i] = g.key()
	}
	return ks
}

func (g *cmdGen) value() string {
	if g.chance(0.15) {
		return strings.Repeat(g.pick("a", "xy", "-"), g.r.Intn(12))
	}
	return g.pick("0", "1", "-7", "42", "10", "-100", "9007199254740992",
		"9223372036854775807", "-9223372036854775808", "abc", "", "3.5", "-2.25",
		" 1", "01", "+1", "-0", "1e3", "hello world", "0.5")
}

func (g *cmdGen) integer() string {
	return g.pick("0", "1", "-1", "5", "100", "-100", "9223372036854775807",
		"-9223372036854775808", "9223372036854775808", "abc", "1.5", "", "01", "+3", "-0")
}

func (g *cmdGen) float() string {
	return g.pick("0.5", "1.25", "-3.75", "1e3", "2", "-0.5", "10", "0",
		"abc", "", "inf", "-inf", "nan", "1.2.3", " 1", "+1.5", "5.0e-1")
}

// seconds and millis are relative expiries: long, zero, negative or invalid.
func (g *cmdGen) seconds() string {
	return g.pick("100", "1000", "10000", "100000", "0", "-5", "abc", "1.5",
		"9223372036854775807", "9223372036854775", "-9223372036854775808")
}

func (g *cmdGen) millis() string {
	return g.pick("100000", "1000000", "10000000", "0", "-5", "abc",
		"9223372036854775807", "-9223372036854775808")
}

// unixSeconds and unixMillis are absolute deadlines: far in the future,
// in the past (which deletes), or invalid.
func (g *cmdGen) unixSeconds() string {
	return g.pick(i64(g.now0+500), i64(g.now0+5000), i64(g.now0+50000), "4000000000",
		"1000", "0", "-1", "abc", "9223372036854775807")
}

func (g *cmdGen) unixMillis() string {
	return g.pick(i64((g.now0+500)*1000), i64((g.now0+50000)*1000), "4000000000000",
		"1000", "0", "-1", "abc", "9223372036854775807")
}

func i64(n int64) string { return strconv.FormatInt(n, 10) }

func (g *cmdGen) offset() string {
	if g.chance(0.85) {
		return strconv.Itoa(g.r.Intn(25))
	}
	return g.pick("-1", "536870912", "4294967296", "abc", "-9223372036854775808")
}

func (g *cmdGen) rangeIndex() string {
	if g.chance(0.8) {
		return strconv.Itoa(g.r.Intn(30) - 15)
	}
	return g.pick("9223372036854775807", "-9223372036854775808", "abc", "1.0")
}

// expiryOption is one of SET's or GETEX's expiry options with its value.
//
// SET is never given a deadline in the past: Redis stores such a key and
// leaves it to lazy or active expiry, so DBSIZE counts it until a
// background cycle (timing) reclaims it. GETEX deletes at once, as EXPIREAT
// does, so it may have one.
func (g *cmdGen) expiryOption(forSet bool) []string {
	switch g.r.Intn(5) {
	case 0:
		return []string{"EX", g.seconds()}
	case 1:
		return []string{"PX", g.millis()}
	case 2:
		v := g.unixSeconds()
		for forSet && v == "1000" {
			v = g.unixSeconds()
		}
		return []string{"EXAT", v}
	case 3:
		v := g.unixMillis()
		for forSet && v == "1000" {
			v = g.unixMillis()
		}
		return []string{"PXAT", v}
	}
	return []string{g.pick("ex", "px", "exat", "pxat")} // missing its value
}

func (g *cmdGen) setOptions() []string {
	var opts []string
	for n := g.r.Intn(4); n > 0; n-- {
		switch g.r.Intn(6) {
		case 0, 1:
			opts = append(opts, g.expiryOption(true)...)
		case 2:
			opts = append(opts, g.pick("NX", "XX", "nx", "xx"))
		case 3:
			opts = append(opts, "GET")
		case 4:
			opts = append(opts, "KEEPTTL")
		default:
			opts = append(opts, g.pick("BOGUS", "EX", "PERSIST"))
		}
	}
	return opts
}

// relativeExpireFlags never yields GT or LT alone (see cmdGen).
func (g *cmdGen) relativeExpireFlags() []string {
	switch g.r.Intn(8) {
	case 0:
		return []string{"NX"}
	case 1:
		return []string{"xx"}
	case 2:
		return []string{"NX", "XX"}
	case 3:
		return []string{"GT", "LT"}
	case 4:
		return []string{"NX", "GT"}
	case 5:
		return []string{g.pick("foo", "EX")}
	}
	return nil
}

func (g *cmdGen) absoluteExpireFlags() []string {
	if g.chance(0.5) {
		return nil
	}
	return []string{g.pick("NX", "XX", "GT", "LT", "gt", "lt")}
}

func (g *cmdGen) pattern() string {
	return g.pick("*", "k*", "k1", "k[0-3]", "k?", "*[13579]", "k[^1]", "x*", "\\k1", "k[", "[a-z]*", "k[3-1]", "")
}

// next returns the next command. SCAN stands for a whole iteration: the
// differential test runs it to the end with the same options.
func (g *cmdGen) next() []string {
	cmd := g.command()
	switch {
	case g.chance(0.03) && !randomCount(cmd[0]): // wrong arity: drop or add an argument
		// Never for SET: an appended value could complete a bare "exat"
		// into a deadline in the past, which Redis counts until a timing-
		// dependent background cycle removes it (see expiryOption). Nor
		// for a command whose last argument is a timeout (BLPOP): a value
		// appended would become a timeout of 0, forever. Never dropped
		// for SPOP: without its count it pops at random. Never added to
		// SRANDMEMBER: a count below the set's size picks at random.
		if len(cmd) > 1 && (g.chance(0.5) || strings.EqualFold(cmd[0], "SET") || timeoutLast(cmd[0]) ||
			strings.EqualFold(cmd[0], "SRANDMEMBER")) && !strings.EqualFold(cmd[0], "SPOP") {
			cmd = cmd[:len(cmd)-1]
		} else {
			cmd = append(cmd, g.value())
		}
	case g.chance(0.1):
		cmd[0] = strings.ToLower(cmd[0])
	}
	return cmd
}

// randomCount reports whether a value appended to cmd could become a count
// of members picked at random (SRANDMEMBER k 42), which each server picks
// its own of: such commands get no wrong-arity variant.
func randomCount(name string) bool {
	switch strings.ToUpper(name) {
	case "SRANDMEMBER", "HRANDFIELD", "ZRANDMEMBER":
		return true
	}
	return false
}

// diffType is one data type's part of the differential test, registered
// from its own file (diff_hash_test.go, ...) with registerDiffType.
type diffType struct {
	name string // the type as TYPE names it
	// weight is how often the generator picks this type's commands,
	// against 46 for the string and key commands.
	weight int
	// gen returns one of the type's commands, with arguments drawn to
	// hit edge cases; it uses the same keys as every other type, so that
	// commands meet keys of the wrong type.
	gen func(g *cmdGen) []string
	// dump returns a canonical rendering of the value at key (which
	// holds this type) for comparing whole keyspaces, e.g. the sorted
	// field-value pairs of a hash.
	dump func(c *rawConn, key string) string
	// unordered names the commands (upper case) whose reply is an array
	// (or map, or set) in an order Redis leaves undefined; replies are
	// compared as multisets of elements, or of consecutive pairs when
	// the value is "pairs" (HGETALL's field-value pairs).
	unordered map[string]string
	// same, when set, compares two replies to one of this type's
	// commands that are not byte-identical: handled says whether it
	// decided, for random picks (SRANDMEMBER's members) and the like.
	same func(cmd []string, ref, got Value) (equal, handled bool)
	// sameKinds is same for replies that may differ in kind (an error
	// from one server, an array from the other); same only ever sees
	// replies of one kind.
	sameKinds func(cmd []string, ref, got Value) (equal, handled bool)
}

var diffTypes []diffType

func registerDiffType(t diffType) { diffTypes = append(diffTypes, t) }

// diffTypeByName returns the registered type TYPE calls name, or nil.
func diffTypeByName(name string) *diffType {
	for i := range diffTypes {
		if diffTypes[i].name == name {
			return &diffTypes[i]
		}
	}
	return nil
}

func (g *cmdGen) command() []string {
	total := 46
	for _, t := range diffTypes {
		total += t.weight
	}
	if n := g.r.Intn(total) - 46; n >= 0 {
		for _, t := range diffTypes {
			if n < t.weight {
				return t.gen(g)
			}
			n -= t.weight
		}
	}
	k := g.key()
	switch g.r.Intn(46) {
	case 0, 1, 2:
		return append([]string{"SET", k, g.value()}, g.setOptions()...)
	case 3, 4:
		return []string{"GET", k}
	case 5:
		return []string{"SETNX", k, g.value()}
	case 6:
		return []string{"SETEX", k, g.seconds(), g.value()}
	case 7:
		return []string{"PSETEX", k, g.millis(), g.value()}
	case 8:
		return []string{"GETSET", k, g.value()}
	case 9:
		return []string{"GETDEL", k}
	case 10:
		cmd := []string{"GETEX", k}
		switch g.r.Intn(4) {
		case 0:
			return cmd
		case 1:
			return append(cmd, "PERSIST")
		case 2:
			return append(append(cmd, g.expiryOption(false)...), g.setOptions()...)
		}
		return append(cmd, g.expiryOption(false)...)
	case 11:
		return append([]string{"MGET"}, g.keys(1)...)
	case 12, 13:
		cmd := []string{g.pick("MSET", "MSETNX")}
		for _, k := range g.keys(1) {
			cmd = append(cmd, k, g.value())
		}
		return cmd
	case 14, 15:
		return []string{"APPEND", k, g.value()}
	case 16:
		return []string{"STRLEN", k}
	case 17:
		return []string{"GETRANGE", k, g.rangeIndex(), g.rangeIndex()}
	case 18:
		return []string{"SETRANGE", k, g.offset(), g.value()}
	case 19, 20:
		return []string{g.pick("INCR", "DECR"), k}
	case 21, 22:
		return []string{g.pick("INCRBY", "DECRBY"), k, g.integer()}
	case 23, 24:
		return []string{"INCRBYFLOAT", k, g.float()}
	case 25:
		return append([]string{g.pick("DEL", "UNLINK")}, g.keys(1)...)
	case 26:
		return append([]string{"EXISTS"}, g.keys(1)...)
	case 27:
		return []string{"TYPE", k}
	case 28:
		return []string{g.pick("RENAME", "RENAMENX"), k, g.key()}
	case 29:
		return []string{"KEYS", g.pattern()}
	case 30:
		cmd := []string{"SCAN", "0"}
		if g.chance(0.5) {
			cmd = append(cmd, "MATCH", g.pattern())
		}
		if g.chance(0.5) {
			cmd = append(cmd, "COUNT", g.pick("1", "3", "10", "1000", "0", "-1", "abc"))
		}
		if g.chance(0.3) {
			cmd = append(cmd, "TYPE", g.pick("string", "STRING", "list", "none"))
		}
		if g.chance(0.05) {
			cmd = append(cmd, g.pick("MATCH", "BOGUS"))
		}
		return cmd
	case 31:
		return []string{"RANDOMKEY"}
	case 32, 33:
		return append([]string{g.pick("EXPIRE"), k, g.seconds()}, g.relativeExpireFlags()...)
	case 34:
		return append([]string{"PEXPIRE", k, g.millis()}, g.relativeExpireFlags()...)
	case 35, 36:
		return append([]string{"EXPIREAT", k, g.unixSeconds()}, g.absoluteExpireFlags()...)
	case 37:
		return append([]string{"PEXPIREAT", k, g.unixMillis()}, g.absoluteExpireFlags()...)
	case 38, 39:
		return []string{g.pick("TTL", "PTTL"), k}
	case 40:
		return []string{g.pick("EXPIRETIME", "PEXPIRETIME"), k}
	case 41:
		return []string{"PERSIST", k}
	case 42:
		return []string{"DBSIZE"}
	case 43:
		if g.chance(0.5) {
			return []string{"ECHO", g.value()}
		}
		return []string{"PING", g.value()}
	case 44:
		if g.chance(0.1) {
			return []string{g.pick("FLUSHDB", "FLUSHALL")}
		}
		return []string{"EXISTS", k}
	}
	return []string{g.pick("NOSUCHCMD", "GETX", "sett"), k, g.value()}
}
