package test

import (
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"
)

// COMMAND against redis-server, in RESP2 and RESP3, over every command and
// subcommand kvs has: COMMAND INFO's whole description (flags, key range,
// categories, tips, key specs, subcommands), COMMAND LIST with each filter,
// and COMMAND GETKEYS and GETKEYSANDFLAGS over generated argument lists
// for every command, which find keys as Redis does or fail as it does.
func TestDifferentialCommand(t *testing.T) {
	requireRedis(t)
	requireKVS(t)
	ref := startRedis(t)
	kvs := startKVS(t, KVSOptions{})
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprint("resp", proto), func(t *testing.T) {
			p := newOpsPair(t, ref, kvs, proto)
			names := commandNames(t, p)
			t.Run("info", func(t *testing.T) { diffCommandInfo(t, p, names) })
			t.Run("list", func(t *testing.T) { diffCommandList(t, p, names) })
			t.Run("getkeys", func(t *testing.T) { diffGetKeys(t, p, names, testSeed(t)) })
			t.Run("errors", func(t *testing.T) {
				for _, args := range [][]string{
					{"COMMAND", "GETKEYS"}, {"COMMAND", "GETKEYS", "get"}, {"COMMAND", "GETKEYSANDFLAGS", "x"},
					{"COMMAND", "COUNT", "x"}, {"COMMAND", "HELP", "x"}, {"COMMAND", "NOSUCH"},
					{"COMMAND", "INFO", "get|key"}, {"COMMAND", "INFO", "config|get|key"}, {"COMMAND", "INFO", "CONFIG|GET"},
					{"COMMAND", "INFO", "nosuch", "get"},
				} {
					p.same(args...)
				}
			})
		})
	}
}

// newerThanReference are the commands of Redis releases after the
// reference's 7.0 that kvs has (it answers INFO as 7.2).
var newerThanReference = map[string]bool{"waitaof": true}

// commandNames returns the names COMMAND LIST gives on kvs that Redis has
// too: kvs's own commands (kvs.*) and newerThanReference aside, it must
// name no other.
func commandNames(t *testing.T, p *opsPair) []string {
	kvsNames, refNames := listNames(p.kvs), listNames(p.ref)
	var names []string
	for _, n := range kvsNames {
		switch {
		case slices.Contains(refNames, n):
			names = append(names, n)
		case !strings.HasPrefix(n, "kvs.") && !newerThanReference[n]:
			t.Errorf("COMMAND LIST on kvs names %s, which Redis does not have", n)
		}
	}
	if len(names) < 200 {
		t.Fatalf("only %d commands in common: %q", len(names), names)
	}
	return names
}

func listNames(c *rawConn, args ...string) []string {
	v := c.Do(append([]string{"COMMAND", "LIST"}, args...)...)
	var names []string
	for _, e := range v.Elems {
		names = append(names, e.Str)
	}
	sort.Strings(names)
	return names
}

// kvsArity are the commands whose arity kvs gives as Redis 7.2 does
// (docs/compatibility.md): ZRANK and ZREVRANK take WITHSCORE.
var kvsArity = map[string]string{"zrank": "-3", "zrevrank": "-3"}

func diffCommandInfo(t *testing.T, p *opsPair, names []string) {
	for _, name := range names {
		r, k := p.ref.Do("COMMAND", "INFO", name), p.kvs.Do("COMMAND", "INFO", name)
		if len(r.Elems) != 1 || len(k.Elems) != 1 {
			t.Fatalf("COMMAND INFO %s: redis %s, kvs %s", name, r, k)
		}
		if a := kvsArity[name]; a != "" && len(r.Elems[0].Elems) > 1 {
			r.Elems[0].Elems[1].Str = a
		}
		if got, want := canonInfo(k.Elems[0], names), canonInfo(r.Elems[0], names); got != want {
			t.Errorf("COMMAND INFO %s:\nredis %s\nkvs   %s", name, want, got)
		}
	}
	// Every command at once, as clients discovering commands ask.
	all := p.kvs.Do("COMMAND")
	if n := p.kvs.Do("COMMAND", "COUNT"); int64(len(all.Elems)) != atoi(t, n.Str) {
		t.Errorf("COMMAND gives %d commands, COMMAND COUNT %s", len(all.Elems), n.Str)
	}
}

// canonInfo renders a COMMAND INFO entry with its subcommands in name
// order (Redis gives them in its hash table's) and only those of names.
func canonInfo(v Value, names []string) string {
	if v.Null || len(v.Elems) != 10 {
		return canon(v)
	}
	var subs []string
	for _, s := range v.Elems[9].Elems {
		if len(s.Elems) > 0 && slices.Contains(names, s.Elems[0].Str) {
			subs = append(subs, canonInfo(s, names))
		}
	}
	sort.Strings(subs)
	var b strings.Builder
	for _, e := range v.Elems[:9] {
		b.WriteString(canon(e) + " ")
	}
	if len(subs) == 0 {
		b.WriteString("(no subcommands)") // Redis: an empty set, or no container
	} else {
		b.WriteString(string(v.Elems[9].Kind) + "[" + strings.Join(subs, " ") + "]")
	}
	return b.String()
}

// canon renders v's kinds and texts, not its raw bytes.
func canon(v Value) string {
	if v.Elems == nil {
		return fmt.Sprintf("%c%q", v.Kind, v.Str)
	}
	parts := make([]string, len(v.Elems))
	for i, e := range v.Elems {
		parts[i] = canon(e)
	}
	return string(v.Kind) + "[" + strings.Join(parts, " ") + "]"
}

// diffCommandList compares COMMAND LIST under each filter, Redis's names
// cut to those kvs has.
func diffCommandList(t *testing.T, p *opsPair, names []string) {
	filters := [][]string{nil, {"FILTERBY", "MODULE", "json"}, {"filterby", "aclcat", "nosuch"}}
	for _, cat := range p.ref.Do("ACL", "CAT").Elems {
		filters = append(filters, []string{"FILTERBY", "ACLCAT", cat.Str})
	}
	for _, pattern := range []string{"set", "GET", "*get*", "config*", "config|*re*", "cl*help", "[a-c]*", "nosuch*", "*|*"} {
		filters = append(filters, []string{"filterby", "pattern", pattern})
	}
	for _, f := range filters {
		var want []string
		for _, n := range listNames(p.ref, f...) {
			if slices.Contains(names, n) {
				want = append(want, n)
			}
		}
		var got []string
		for _, n := range listNames(p.kvs, f...) {
			if !strings.HasPrefix(n, "kvs.") && !newerThanReference[n] {
				got = append(got, n)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("COMMAND LIST %q:\nredis %q\nkvs   %q", f, want, got)
		}
	}
	for _, bad := range [][]string{{"bad"}, {"filterby", "bad"}, {"filterby", "bad", "x"}, {"filterby", "pattern", "a", "b"}} {
		p.same(append([]string{"COMMAND", "LIST"}, bad...)...)
	}
}

// getKeysWords are the arguments GETKEYS is asked about: keys, counts
// good and bad, and the option words that move keys (STORE, GET, BY,
// LIMIT) or change their flags.
var getKeysWords = []string{"k1", "k2", "k3", "0", "1", "2", "3", "-1", "x", "store", "STORE", "get", "GET",
	"by", "limit", "set", "incrby", "overflow", "weights", "left", "u8", "#0"}

// diffGetKeys asks both servers for the keys of every command kvs has,
// with generated arguments of every length up to a few more than its
// arity needs.
func diffGetKeys(t *testing.T, p *opsPair, names []string, seed int64) {
	r := rand.New(rand.NewSource(seed))
	for _, name := range names {
		base := strings.Split(name, "|")
		for n := 0; n < 9; n++ {
			if kvsArity[name] != "" && n != 2 {
				continue // Redis 7.0's arity error; 7.2 finds the key
			}
			for try := 0; try < 6; try++ {
				args := append([]string{"COMMAND", "GETKEYS"}, base...)
				for i := 0; i < n; i++ {
					args = append(args, getKeysWords[r.Intn(len(getKeysWords))])
				}
				p.same(args...)
				args[1] = "GETKEYSANDFLAGS"
				p.same(args...)
			}
		}
	}
	many := []string{"COMMAND", "GETKEYS", "ZUNIONSTORE", "target", "260"}
	for i := 0; i < 260; i++ {
		many = append(many, fmt.Sprint("key", i))
	}
	p.same(many...)
}
