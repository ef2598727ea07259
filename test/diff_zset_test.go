package test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Sorted sets in the differential test.
//
// Lexicographic ranges are defined by Redis only over members of equal
// score (with mixed scores its skiplist search and its listpack scan give
// different answers), so the lex commands go to keys of their own, zlex0
// and zlex1, which only ever hold members of score 0; everything else uses
// the shared keys, where strings and other types meet sorted sets.
func init() {
	registerDiffType(diffType{
		name:   "zset",
		weight: 40,
		gen:    (*cmdGen).zsetCommand,
		dump: func(c *rawConn, key string) string {
			if isGeoDistKey(key) {
				return geoDistDump(c, key) // diff_geo_test.go says why
			}
			return string(c.Do("ZRANGE", key, "0", "-1", "WITHSCORES").Raw)
		},
		same:      sameZSet,
		sameKinds: sameZRankWithScore,
	})
}

// zrankRefusedBy70 reports whether ref is Redis 7.0's arity error for a
// ZRANK or ZREVRANK with a fourth argument, which kvs runs as 7.2 does.
func zrankRefusedBy70(cmd []string, ref string) bool {
	name := strings.ToUpper(cmd[0])
	return len(cmd) == 4 && (name == "ZRANK" || name == "ZREVRANK") &&
		ref == "-ERR wrong number of arguments for '"+strings.ToLower(name)+"' command\r\n"
}

// sameZRankWithScore judges ZRANK and ZREVRANK with a fourth argument,
// which the reference (Redis 7.0) refuses for its arity while kvs answers
// as Redis 7.2 does: WITHSCORE gives a [rank, score] pair, a nil array or
// WRONGTYPE, anything else a syntax error. TestZRankWithScore checks the
// exact replies.
func sameZRankWithScore(cmd []string, ref, got Value) (equal, handled bool) {
	if !zrankRefusedBy70(cmd, string(ref.Raw)) {
		return false, false
	}
	if !strings.EqualFold(cmd[3], "WITHSCORE") {
		return string(got.Raw) == "-ERR syntax error\r\n", true
	}
	switch {
	case got.IsError():
		return strings.HasPrefix(got.Str, "WRONGTYPE "), true
	case got.Null:
		return true, true
	}
	return got.Kind == '*' && len(got.Elems) == 2 && got.Elems[0].Kind == ':', true
}

var zlexKeys = []string{"zlex0", "zlex1"}

func (g *cmdGen) zmember() string {
	if g.chance(0.1) {
		return "n" + strconv.Itoa(g.r.Intn(200))
	}
	return g.pick("a", "b", "c", "d", "e", "m1", "m2", "m3", "", "-", "+", "[a", "(b", "01", "1",
		"hello world", strings.Repeat("x", 65))
}

func (g *cmdGen) zscore() string {
	if g.chance(0.6) {
		return strconv.Itoa(g.r.Intn(10) - 3)
	}
	return g.pick("1.5", "-2.25", "0.1", "-0", "0", "inf", "-inf", "+inf", "1e308", "1e20", "3.0",
		"0x10", "nan", "abc", "", " 1", "1 ", "(1", "1e-400", "5e-324", "1e400", "Infinity", "0.30000000000000004")
}

func (g *cmdGen) zbound() string {
	if g.chance(0.5) {
		s := strconv.Itoa(g.r.Intn(10) - 3)
		if g.chance(0.3) {
			s = "(" + s
		}
		return s
	}
	return g.pick("-inf", "+inf", "inf", "(-inf", "(+inf", "1.5", "(0.1", "0", "-0", "", "(", " 1",
		"abc", "nan", "(nan", "1e400", "0x10", "1 ")
}

func (g *cmdGen) zlexBound() string {
	return g.pick("-", "+", "-", "+", "[a", "(a", "[c", "(c", "[m2", "(n1", "[n5", "[", "(", "a", "+a", "-x", "")
}

func (g *cmdGen) zcount() string {
	return g.pick("1", "2", "3", "0", "10", "1000", "-1", "abc", "1.5")
}

func (g *cmdGen) zkey() string {
	if g.chance(0.08) {
		return "nokey"
	}
	return g.key()
}

// zsetKeys returns numkeys and that many keys, for ZUNION and friends.
func (g *cmdGen) zsetKeys(lex bool) []string {
	n := 1 + g.r.Intn(3)
	out := []string{strconv.Itoa(n)}
	for range n {
		if lex {
			out = append(out, g.pick(zlexKeys...))
		} else {
			out = append(out, g.zkey())
		}
	}
	if g.chance(0.05) {
		out[0] = g.pick("0", "-1", "abc", "10")
	}
	return out
}

func (g *cmdGen) zrangeOptions(store bool) []string {
	var opts []string
	for n := g.r.Intn(3); n > 0; n-- {
		switch g.r.Intn(6) {
		case 0:
			if !store || g.chance(0.1) {
				opts = append(opts, g.pick("WITHSCORES", "withscores"))
			}
		case 1:
			opts = append(opts, "LIMIT", g.pick("0", "1", "2", "-1", "abc"), g.pick("1", "2", "5", "-1", "0", "abc"))
		case 2:
			opts = append(opts, g.pick("REV", "rev"))
		case 3:
			opts = append(opts, g.pick("BYSCORE", "BYLEX"))
		case 4:
			opts = append(opts, g.pick("LIMIT", "BOGUS"))
		}
	}
	return opts
}

func (g *cmdGen) zsetCommand() []string {
	k := g.zkey()
	lk := g.pick(zlexKeys...)
	switch g.r.Intn(41) {
	case 0, 1, 2, 3:
		cmd := []string{"ZADD", k}
		for n := g.r.Intn(3); n > 0; n-- {
			cmd = append(cmd, g.pick("NX", "XX", "CH", "INCR", "GT", "LT", "ch", "gt"))
		}
		for n := 1 + g.r.Intn(3); n > 0; n-- {
			cmd = append(cmd, g.zscore(), g.zmember())
		}
		if g.chance(0.03) {
			cmd = cmd[:len(cmd)-1]
		}
		return cmd
	case 4:
		// Enough members to take the set past the packed limits.
		cmd := []string{"ZADD", k}
		base := g.r.Intn(100)
		for i := range 100 + g.r.Intn(60) {
			cmd = append(cmd, strconv.Itoa((i*7)%23-5), "n"+strconv.Itoa(base+i))
		}
		return cmd
	case 5:
		cmd := []string{"ZADD", lk}
		n := 1 + g.r.Intn(4)
		if g.chance(0.15) {
			n = 140
		}
		for i := range n {
			m := g.zmember()
			if n > 10 {
				m = "n" + strconv.Itoa(i)
			}
			cmd = append(cmd, "0", m)
		}
		return cmd
	case 6:
		return []string{"ZINCRBY", k, g.zscore(), g.zmember()}
	case 7, 8:
		cmd := []string{"ZREM", g.pick(k, lk)}
		for n := 1 + g.r.Intn(3); n > 0; n-- {
			cmd = append(cmd, g.zmember())
		}
		return cmd
	case 9:
		return []string{"ZCARD", g.pick(k, lk)}
	case 10:
		return []string{"ZSCORE", k, g.zmember()}
	case 11:
		return append([]string{"ZMSCORE", k}, g.zmember(), g.zmember())
	case 12:
		cmd := []string{g.pick("ZRANK", "ZREVRANK"), k, g.zmember()}
		if g.chance(0.1) {
			cmd = append(cmd, "WITHSCORE")
		}
		return cmd
	case 13:
		return []string{"ZCOUNT", k, g.zbound(), g.zbound()}
	case 14:
		if g.chance(0.1) {
			return []string{"ZLEXCOUNT", k, g.pick("a", "", "x"), g.zlexBound()}
		}
		return []string{"ZLEXCOUNT", lk, g.zlexBound(), g.zlexBound()}
	case 15, 16, 17:
		// ZRANGE by rank or score on the shared keys, by lex on the lex
		// keys.
		opts := g.zrangeOptions(false)
		switch {
		case slices.Contains(opts, "BYLEX"):
			return append([]string{"ZRANGE", lk, g.zlexBound(), g.zlexBound()}, opts...)
		case slices.Contains(opts, "BYSCORE"):
			return append([]string{"ZRANGE", k, g.zbound(), g.zbound()}, opts...)
		}
		return append([]string{"ZRANGE", k, g.rangeIndex(), g.rangeIndex()}, opts...)
	case 18:
		opts := g.zrangeOptions(true)
		switch {
		case slices.Contains(opts, "BYLEX"):
			return append([]string{"ZRANGESTORE", g.pick(zlexKeys...), lk, g.zlexBound(), g.zlexBound()}, opts...)
		case slices.Contains(opts, "BYSCORE"):
			return append([]string{"ZRANGESTORE", g.key(), k, g.zbound(), g.zbound()}, opts...)
		}
		if g.chance(0.3) {
			return []string{"ZRANGESTORE", g.pick(zlexKeys...), lk, g.rangeIndex(), g.rangeIndex()}
		}
		return append([]string{"ZRANGESTORE", g.key(), k, g.rangeIndex(), g.rangeIndex()}, opts...)
	case 19, 20:
		name := g.pick("ZRANGEBYSCORE", "ZREVRANGEBYSCORE")
		cmd := []string{name, k, g.zbound(), g.zbound()}
		if g.chance(0.4) {
			cmd = append(cmd, "WITHSCORES")
		}
		if g.chance(0.4) {
			cmd = append(cmd, "LIMIT", g.pick("0", "1", "-1", "3"), g.pick("1", "2", "-1", "0"))
		}
		if g.chance(0.05) {
			cmd = append(cmd, g.pick("REV", "BYSCORE", "LIMIT"))
		}
		return cmd
	case 21:
		cmd := []string{g.pick("ZRANGEBYLEX", "ZREVRANGEBYLEX"), lk, g.zlexBound(), g.zlexBound()}
		if g.chance(0.4) {
			cmd = append(cmd, "LIMIT", g.pick("0", "1", "-1", "3"), g.pick("1", "2", "-1", "0"))
		}
		if g.chance(0.05) {
			cmd = append(cmd, g.pick("WITHSCORES", "BYLEX"))
		}
		return cmd
	case 22:
		cmd := []string{"ZREVRANGE", g.pick(k, lk), g.rangeIndex(), g.rangeIndex()}
		if g.chance(0.4) {
			cmd = append(cmd, "WITHSCORES")
		}
		return cmd
	case 23:
		return []string{"ZREMRANGEBYRANK", g.pick(k, lk), g.rangeIndex(), g.rangeIndex()}
	case 24:
		return []string{"ZREMRANGEBYSCORE", k, g.zbound(), g.zbound()}
	case 25:
		return []string{"ZREMRANGEBYLEX", lk, g.zlexBound(), g.zlexBound()}
	case 26, 27:
		cmd := []string{g.pick("ZPOPMIN", "ZPOPMAX"), g.pick(k, k, lk)}
		if g.chance(0.6) {
			cmd = append(cmd, g.pick("1", "2", "0", "5", "1000", "-1", "abc"))
		}
		if g.chance(0.03) {
			cmd = append(cmd, "1")
		}
		return cmd
	case 28:
		keys := g.zsetKeys(g.chance(0.2))
		cmd := append([]string{"ZMPOP"}, keys...)
		cmd = append(cmd, g.pick("MIN", "MAX", "min", "BOGUS"))
		if g.chance(0.5) {
			cmd = append(cmd, "COUNT", g.zcount())
		}
		return cmd
	case 29:
		cmd := []string{"ZRANDMEMBER", g.pick(k, lk)}
		if g.chance(0.7) {
			cmd = append(cmd, g.pick("0", "1", "3", "-1", "-3", "-20", "1000", "abc", "-9223372036854775808"))
			if g.chance(0.5) {
				cmd = append(cmd, g.pick("WITHSCORES", "WITHSCORES", "bogus"))
			}
		}
		return cmd
	case 30, 31, 32:
		name := g.pick("ZUNION", "ZINTER", "ZDIFF", "ZINTERCARD")
		cmd := append([]string{name}, g.zsetKeys(g.chance(0.2))...)
		return append(cmd, g.setOpOptions(len(cmd)-2, name)...)
	case 33, 34:
		name := g.pick("ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE")
		lex := g.chance(0.2)
		dst := g.key()
		if lex {
			dst = g.pick(zlexKeys...)
		}
		cmd := append([]string{name, dst}, g.zsetKeys(lex)...)
		opts := g.setOpOptions(len(cmd)-3, name)
		if lex {
			// Scores stay 0 whatever the weights (0 * inf is 0).
			opts = nil
		}
		return append(cmd, opts...)
	case 35:
		cmd := []string{"ZSCAN", g.pick(k, lk), g.pick("0", "0", "0", "abc")}
		if g.chance(0.5) {
			cmd = append(cmd, "MATCH", g.pick("*", "n1*", "a", "m?", "[ab]"))
		}
		if g.chance(0.5) {
			cmd = append(cmd, "COUNT", g.pick("1000", "1000", "5", "0", "abc"))
		}
		if g.chance(0.05) {
			cmd = append(cmd, "BOGUS")
		}
		return cmd
	case 36:
		// A lex key of the wrong type now and then; DEL lets it come back.
		if g.chance(0.5) {
			return []string{"SET", lk, "x"}
		}
		return []string{"DEL", lk}
	case 37:
		return []string{g.pick("ZRANGE", "ZADD", "ZPOPMIN", "ZUNION", "ZRANDMEMBER", "ZMPOP", "BZPOPMIN", "BZMPOP"), k}
	case 38:
		// The blocking forms, with a key that holds something or a bad
		// argument: answered at once. (Waiting is test/crash_zset_test.go's.)
		timeout := g.pick("0.01", "0.01", "0.01", "abc", "-1")
		if g.chance(0.5) {
			return []string{g.pick("BZPOPMIN", "BZPOPMAX"), k, g.pick(k, lk), timeout}
		}
		cmd := append([]string{"BZMPOP", timeout}, g.zsetKeys(false)...)
		cmd = append(cmd, g.pick("MIN", "MAX", "bogus"))
		if g.chance(0.5) {
			cmd = append(cmd, "COUNT", g.zcount())
		}
		return cmd
	}
	return []string{"TYPE", g.pick(k, lk)}
}

func (g *cmdGen) setOpOptions(nkeys int, name string) []string {
	var opts []string
	for n := g.r.Intn(3); n > 0; n-- {
		switch g.r.Intn(5) {
		case 0:
			opts = append(opts, "WEIGHTS")
			for range nkeys {
				opts = append(opts, g.pick("1", "2", "-1", "0", "0.5", "inf", "-inf", "abc"))
			}
		case 1:
			opts = append(opts, "AGGREGATE", g.pick("SUM", "MIN", "MAX", "max", "avg"))
		case 2:
			opts = append(opts, "WITHSCORES")
		case 3:
			opts = append(opts, "LIMIT", g.pick("0", "1", "2", "-1", "abc"))
		default:
			opts = append(opts, g.pick("BOGUS", "WEIGHTS", "AGGREGATE"))
		}
	}
	return opts
}

// sameZSet compares the replies Redis makes at random or in an order it
// leaves undefined.
func sameZSet(cmd []string, ref, got Value) (equal, handled bool) {
	switch strings.ToUpper(cmd[0]) {
	case "ZRANDMEMBER":
		switch {
		case ref.IsError() || got.IsError():
			return string(ref.Raw) == string(got.Raw), true
		case ref.Kind == '*' || ref.Kind == '~':
			// A random pick: as many elements (a count at least the
			// size answers the whole set in order, which is compared
			// byte for byte before this is called).
			return len(ref.Elems) == len(got.Elems), true
		}
		return ref.Null == got.Null && ref.Kind == got.Kind, true
	case "ZSCAN":
		if ref.Kind != '*' || len(ref.Elems) != 2 || len(got.Elems) != 2 {
			return false, true
		}
		rc, gc := ref.Elems[0].Str, got.Elems[0].Str
		switch {
		case rc == "0" && gc == "0":
			return slices.Equal(sortedPairs(ref.Elems[1].Elems), sortedPairs(got.Elems[1].Elems)), true
		case rc != "0" && gc != "0":
			// One page of a large set: which members each server
			// visits first is its own hash order.
			return true, true
		case cmd[2] != "0":
			return false, true
		}
		// From the start, one server finished and the other did not: a
		// skiplist's page in Redis ends once COUNT members are found,
		// with buckets its random hash seed placed still ahead (ZSCAN
		// COUNT 5 of five members may answer cursor 3 and all five). The
		// unfinished page holds members of the finished one.
		done, page := ref.Elems[1].Elems, got.Elems[1].Elems
		if gc == "0" {
			done, page = page, done
		}
		all := sortedPairs(done)
		for _, p := range sortedPairs(page) {
			if _, found := slices.BinarySearch(all, p); !found {
				return false, true
			}
		}
		return len(page)%2 == 0, true
	}
	return false, false
}

// TestZRankWithScore checks ZRANK and ZREVRANK ... WITHSCORE (Redis 7.2)
// byte for byte against the replies Redis 7.2's zrankGenericCommand
// writes, in RESP2 and RESP3, in memory, durable and cluster mode (on a
// follower, which forwards the writes and reads its own). The reference
// redis-server is 7.0, which has no WITHSCORE.
func TestZRankWithScore(t *testing.T) {
	requireKVS(t)
	t.Parallel()
	modes := []struct {
		name string
		node func(t *testing.T) *Node
	}{
		{"memory", func(t *testing.T) *Node { return startKVS(t, KVSOptions{}) }},
		{"durable", func(t *testing.T) *Node { return startKVS(t, KVSOptions{Durable: true}) }},
		{"cluster-follower", func(t *testing.T) *Node {
			nodes := startCluster(t, 3)
			return followers(nodes, waitLeader(t, nodes))[0]
		}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			n := m.node(t)
			for _, proto := range []string{"2", "3"} {
				c := dialRaw(t, n.Addr)
				if proto == "3" {
					c.Do("HELLO", "3")
				}
				nilArray, score, three := "*-1\r\n", "$3\r\n2.5\r\n", "$1\r\n3\r\n"
				if proto == "3" {
					nilArray, score, three = "_\r\n", ",2.5\r\n", ",3\r\n"
				}
				for _, step := range []struct {
					cmd  []string
					want string
				}{
					{[]string{"DEL", "z", "s"}, ""},
					{[]string{"ZADD", "z", "1", "a", "2.5", "b", "3", "c"}, ":3\r\n"},
					{[]string{"SET", "s", "x"}, "+OK\r\n"},
					{[]string{"ZRANK", "z", "b", "WITHSCORE"}, "*2\r\n:1\r\n" + score},
					{[]string{"ZREVRANK", "z", "b", "withscore"}, "*2\r\n:1\r\n" + score},
					{[]string{"ZREVRANK", "z", "c", "WITHSCORE"}, "*2\r\n:0\r\n" + three},
					{[]string{"ZRANK", "z", "nope", "WITHSCORE"}, nilArray},
					{[]string{"ZRANK", "nokey", "a", "WITHSCORE"}, nilArray},
					{[]string{"ZRANK", "s", "a", "WITHSCORE"}, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
					{[]string{"ZRANK", "z", "a", "WITHSCORES"}, "-ERR syntax error\r\n"},
					{[]string{"ZRANK", "nokey", "a", "bogus"}, "-ERR syntax error\r\n"},
					{[]string{"ZRANK", "z", "a", "WITHSCORE", "x"}, "-ERR wrong number of arguments for 'zrank' command\r\n"},
					{[]string{"ZREVRANK", "z"}, "-ERR wrong number of arguments for 'zrevrank' command\r\n"},
					{[]string{"ZRANK", "z", "a"}, ":0\r\n"},
				} {
					got := string(c.DoRetry(step.cmd...).Raw)
					if step.want != "" && got != step.want {
						t.Errorf("RESP%s %s = %q, want %q", proto, strings.Join(step.cmd, " "), got, step.want)
					}
				}
			}
		})
	}
}

// genBlockedZSet is a TestDifferentialBlocked scenario over sorted sets:
// BZPOPMIN, BZPOPMAX and BZMPOP (with counts) on one or two keys, then
// ZADDs, ZINCRBY, ZUNIONSTORE into a watched key, and a key's type
// changed under its waiters.
func genBlockedZSet(g *cmdGen) blockedScenario {
	keys := []string{"z1", "z2"}
	sc := blockedScenario{keys: keys, proto: g.blockedProto()}
	pick := func() []string {
		if g.chance(0.4) {
			return []string{keys[0], keys[1]}
		}
		return []string{g.pick(keys...)}
	}
	for n := 2 + g.r.Intn(4); n > 0; n-- {
		var cmd []string
		switch g.r.Intn(3) {
		case 0:
			cmd = append(append([]string{g.pick("BZPOPMIN", "BZPOPMAX")}, pick()...), "0")
		default:
			ks := pick()
			cmd = append(append([]string{"BZMPOP", "0", strconv.Itoa(len(ks))}, ks...), g.pick("MIN", "MAX"))
			if g.chance(0.7) {
				cmd = append(cmd, "COUNT", g.pick("1", "2", "3", "10"))
			}
		}
		sc.waiters = append(sc.waiters, blockedWaiter{proto: g.blockedProto(), cmd: cmd})
	}
	sc.writes = g.blockedWrites(func() []string {
		switch g.r.Intn(10) {
		case 0:
			return []string{"SET", g.pick(keys...), "s"}
		case 1:
			return []string{"DEL", g.pick(keys...)}
		case 2:
			return []string{"ZINCRBY", g.pick(keys...), "2", g.pick("a", "b", "c")}
		case 3:
			return []string{"ZUNIONSTORE", keys[0], "1", keys[1]}
		}
		add := []string{"ZADD", g.pick(keys...)}
		for m := 1 + g.r.Intn(4); m > 0; m-- {
			add = append(add, strconv.Itoa(g.r.Intn(9)), g.pick("a", "b", "c", "d", "e", "f"))
		}
		return add
	})
	return sc
}

// TestSameZScanPages: a ZSCAN from cursor 0 that one server finishes and
// the other does not matches only when the unfinished page holds members
// of the finished one.
func TestSameZScanPages(t *testing.T) {
	page := func(cursor string, pairs ...string) string {
		s := fmt.Sprintf("*2\r\n$%d\r\n%s\r\n*%d\r\n", len(cursor), cursor, len(pairs))
		for _, p := range pairs {
			s += fmt.Sprintf("$%d\r\n%s\r\n", len(p), p)
		}
		return s
	}
	all := page("0", "a", "0", "b", "0", "c", "0")
	cmd := []string{"ZSCAN", "z", "0", "COUNT", "2"}
	for _, c := range []struct {
		ref, got string
		want     bool
	}{
		{all, page("3", "c", "0", "a", "0", "b", "0"), true},
		{page("3", "b", "0", "a", "0"), all, true},
		{all, page("3", "a", "0", "d", "0"), false},
		{all, page("3", "a", "1"), false},
		{page("0", "a", "0"), page("0", "b", "0"), false},
		{page("5", "a", "0"), page("2", "b", "0"), true},
	} {
		if got := sameReply(cmd, c.ref, c.got); got != c.want {
			t.Errorf("sameReply(%q, %q) = %v, want %v", c.ref, c.got, got, c.want)
		}
	}
	// From a cursor of its own, one server finishing is not excused.
	if sameReply([]string{"ZSCAN", "z", "3"}, all, page("3", "a", "0")) {
		t.Error("a page from cursor 3 matched a finished scan")
	}
}
