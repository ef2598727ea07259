package test

import (
	"math/rand"
	"slices"
	"strings"
	"testing"
)

// TestDifferentialACL runs one scripted session of users, passwords and
// permission checks against kvs and redis-server and requires the same
// reply bytes, in RESP2 and RESP3: ACL SETUSER's rules and errors, GETUSER,
// LIST, USERS, CAT, DRYRUN, WHOAMI, DELUSER, GENPASS's errors, AUTH and
// HELLO AUTH, NOAUTH for each class of command before AUTH, and NOPERM for
// commands, keys and channels. ACL CAT <category> (Redis's dict order) and
// ACL LOG (ages, client ids) are compared in acl_test.go instead.
func TestDifferentialACL(t *testing.T) {
	requireRedis(t)
	requireKVS(t)
	modes := []struct {
		name    string
		proto   string
		opts    KVSOptions
		cluster string // "leader" or "follower" of a three-node cluster
	}{
		{"resp2-memory", "2", KVSOptions{}, ""},
		{"resp3-durable", "3", KVSOptions{Durable: true, Fsync: "always"}, ""},
		{"resp3-cluster-leader", "3", KVSOptions{}, "leader"},
		// On a follower every ACL change is forwarded to the leader, and
		// the follower's reply waits until it has applied the change.
		{"resp2-cluster-follower", "2", KVSOptions{}, "follower"},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			ref := startRedis(t)
			var kvs *Node
			if m.cluster != "" {
				// The script sets requirepass s3cret for a while: the
				// nodes' connections to each other log in with it.
				nodes := startCluster(t, 3, "--masterauth", "s3cret")
				kvs = waitLeader(t, nodes)
				if m.cluster == "follower" {
					kvs = followers(nodes, kvs)[0]
				}
			} else {
				kvs = startKVS(t, m.opts)
			}
			conns := [2]map[string]*rawConn{{}, {}}
			for _, step := range aclScript {
				var got [2]string
				for i, n := range []*Node{ref, kvs} {
					got[i] = sortSingleRules(runACLStep(t, n, conns[i], m.proto, step))
				}
				if got[0] != got[1] {
					t.Fatalf("%s:\n  redis: %q\n  kvs:   %q", strings.Join(step, " | "), got[0], got[1])
				}
			}
		})
	}
}

// runACLStep runs one step on n: the first element names the connection
// in conns, opened on first use ("new:<name>" opens a fresh one, without
// HELLO 3), the rest is the command. "admin" stays the default user;
// others AUTH as the script says. It returns the raw reply.
func runACLStep(t *testing.T, n *Node, conns map[string]*rawConn, proto string, step []string) string {
	t.Helper()
	name := step[0]
	fresh := strings.HasPrefix(name, "new:")
	if fresh {
		name = strings.TrimPrefix(name, "new:")
	}
	c := conns[name]
	if c == nil || fresh {
		c = dialRaw(t, n.Addr)
		conns[name] = c
		if proto == "3" && !fresh {
			if v := c.Do("HELLO", "3"); v.IsError() {
				t.Fatalf("HELLO 3 on %s: %s", n.Name, v)
			}
		}
	}
	return string(c.Do(step[1:]...).Raw)
}

var aclScript = [][]string{
	// Errors before any user or password exists.
	{"admin", "AUTH", "nopass-yet"},
	{"admin", "AUTH", "a", "b", "c"},
	{"admin", "AUTH", "default", "anything"},
	{"admin", "AUTH", "nosuch", "x"},
	{"admin", "ACL"},
	{"admin", "ACL", "NOSUCH"},
	{"admin", "ACL", "WHOAMI"},
	{"admin", "ACL", "USERS"},
	{"admin", "ACL", "LIST"},
	{"admin", "ACL", "GETUSER", "default"},
	{"admin", "ACL", "GETUSER", "nosuch"},
	{"admin", "ACL", "CAT"},
	{"admin", "ACL", "CAT", "nosuch"},
	{"admin", "ACL", "HELP"},
	{"admin", "ACL", "LOAD"},
	{"admin", "ACL", "SAVE"},
	{"admin", "ACL", "GENPASS", "0"},
	{"admin", "ACL", "GENPASS", "4097"},
	{"admin", "ACL", "GENPASS", "x"},
	{"admin", "ACL", "LOG", "x"},
	{"admin", "ACL", "LOG", "RESET"},

	// Users and their rules.
	{"admin", "ACL", "SETUSER", "alice", "on", ">pa", "~k*", "%R~r*", "%W~w*", "&ch*", "-@all", "+get", "+set", "+publish", "+acl|whoami", "+select|0"},
	{"admin", "ACL", "GETUSER", "alice"},
	{"admin", "ACL", "SETUSER", "bob", "on", "nopass", "+@all", "-flushall", "allkeys", "allchannels"},
	{"admin", "ACL", "GETUSER", "bob"},
	{"admin", "ACL", "SETUSER", "carol"},
	{"admin", "ACL", "GETUSER", "carol"},
	{"admin", "ACL", "SETUSER", "carol", "+@read", "~*", "resetkeys", "~c*", "%R~c*"},
	{"admin", "ACL", "GETUSER", "carol"},
	{"admin", "ACL", "SETUSER", "carol", "+@hash", "-hget", "+config|get", "#" + strings.Repeat("ab", 32), "!" + strings.Repeat("ab", 32)},
	{"admin", "ACL", "GETUSER", "carol"},
	{"admin", "ACL", "SETUSER", "dave", "reset", "on", ">x", ">y", "<x", "skip-sanitize-payload"},
	{"admin", "ACL", "GETUSER", "dave"},
	{"admin", "ACL", "SETUSER", "dave", "resetpass", "nocommands", "allcommands", "-@dangerous"},
	{"admin", "ACL", "GETUSER", "dave"},
	{"admin", "ACL", "LIST"},
	{"admin", "ACL", "USERS"},
	{"admin", "ACL", "SETUSER", "x", "+nosuchcommand"},
	{"admin", "ACL", "SETUSER", "x", "+@nosuch"},
	{"admin", "ACL", "SETUSER", "x", "allkeys", "~a"},
	{"admin", "ACL", "SETUSER", "x", "allchannels", "&a"},
	{"admin", "ACL", "SETUSER", "x", "#abc"},
	{"admin", "ACL", "SETUSER", "x", "<never-set"},
	{"admin", "ACL", "SETUSER", "x", "bogus"},
	{"admin", "ACL", "SETUSER", "x", "%Rx~a"},
	{"admin", "ACL", "SETUSER", "x", "%"},
	{"admin", "ACL", "SETUSER", "odd", "%R", "%W~", "~", "&"},
	{"admin", "ACL", "GETUSER", "odd"},
	{"admin", "ACL", "DELUSER", "odd"},
	{"admin", "ACL", "SETUSER", "x", "+config|get|x"},
	{"admin", "ACL", "SETUSER", "x", "+get|"},
	{"admin", "ACL", "SETUSER", "x", "+config|nosuch"},
	{"admin", "ACL", "SETUSER", "a b"},
	// Selectors: a command is allowed when any selector allows it.
	{"admin", "ACL", "SETUSER", "sel", "on", "nopass", "~a*", "+get", "(~b* +set)", "(", "%R~c*", "+@read", ")"},
	{"admin", "ACL", "GETUSER", "sel"},
	{"admin", "ACL", "LIST"},
	{"admin", "ACL", "DRYRUN", "sel", "get", "a1"},
	{"admin", "ACL", "DRYRUN", "sel", "set", "b1", "v"},
	{"admin", "ACL", "DRYRUN", "sel", "set", "a1", "v"},
	{"admin", "ACL", "DRYRUN", "sel", "get", "c1"},
	{"admin", "ACL", "DRYRUN", "sel", "get", "d1"},
	{"admin", "ACL", "DRYRUN", "sel", "del", "b1"},
	{"admin", "ACL", "DRYRUN", "sel", "mget", "a1", "c1"},
	{"admin", "ACL", "SETUSER", "sel", "(~x", "+get"},
	{"admin", "ACL", "SETUSER", "sel", "(bogus)"},
	{"admin", "ACL", "SETUSER", "sel", "(+nosuch)"},
	{"admin", "ACL", "SETUSER", "sel", "clearselectors"},
	{"admin", "ACL", "GETUSER", "sel"},
	{"admin", "ACL", "SETUSER", "sel", "()", "reset"},
	{"admin", "ACL", "GETUSER", "sel"},
	{"admin", "ACL", "DELUSER", "sel"},
	{"admin", "ACL", "SETUSER", "", "on", "+ping"}, // Redis allows the empty name
	{"admin", "ACL", "LIST"},
	{"admin", "ACL", "DELUSER", ""},
	{"admin", "ACL", "USERS"}, // x was never created: every rule failed
	{"admin", "ACL", "DELUSER", "default"},
	{"admin", "ACL", "DELUSER", "nosuch", "dave", "dave"},
	{"admin", "ACL", "USERS"},

	// DRYRUN: commands, keys by read/write use, channels.
	{"admin", "ACL", "DRYRUN", "alice", "get", "k1"},
	{"admin", "ACL", "DRYRUN", "alice", "get", "zz"},
	{"admin", "ACL", "DRYRUN", "alice", "del", "k1"},
	{"admin", "ACL", "DRYRUN", "alice", "set", "r1", "v"},
	{"admin", "ACL", "DRYRUN", "alice", "set", "w1", "v"},
	{"admin", "ACL", "DRYRUN", "alice", "set", "w1", "v", "GET"},
	{"admin", "ACL", "DRYRUN", "alice", "get", "w1"},
	{"admin", "ACL", "DRYRUN", "alice", "get", "r1"},
	{"admin", "ACL", "DRYRUN", "alice", "publish", "ch1", "m"},
	{"admin", "ACL", "DRYRUN", "alice", "publish", "zz", "m"},
	{"admin", "ACL", "DRYRUN", "alice", "select", "0"},
	{"admin", "ACL", "DRYRUN", "alice", "select", "1"},
	{"admin", "ACL", "DRYRUN", "carol", "config", "get", "maxclients"},
	{"admin", "ACL", "DRYRUN", "carol", "config", "set", "maxclients", "10"},
	{"admin", "ACL", "DRYRUN", "carol", "hset", "c1", "f", "v"},
	{"admin", "ACL", "DRYRUN", "carol", "hget", "c1", "f"},
	{"admin", "ACL", "DRYRUN", "carol", "hlen", "c1"},
	{"admin", "ACL", "DRYRUN", "carol", "hlen", "d1"},
	{"admin", "ACL", "DRYRUN", "carol", "mget", "c1", "d1"},
	{"admin", "ACL", "DRYRUN", "bob", "flushall"},
	{"admin", "ACL", "DRYRUN", "bob", "get"},
	{"admin", "ACL", "DRYRUN", "nosuch", "get", "a"},
	{"admin", "ACL", "DRYRUN", "alice", "nosuchcommand"},

	// A restricted user's connection.
	{"a", "AUTH", "alice", "wrong"},
	{"a", "AUTH", "alice", "pa"},
	{"a", "ACL", "WHOAMI"},
	{"a", "ACL", "USERS"},
	{"a", "SET", "k1", "v"},
	{"a", "GET", "k1"},
	{"a", "GET", "zz"},
	{"a", "DEL", "k1"},
	{"a", "SET", "r1", "v"},
	{"a", "SET", "w1", "v"},
	{"a", "SET", "w1", "v", "GET"},
	{"a", "PUBLISH", "ch1", "m"},
	{"a", "PUBLISH", "zz", "m"},
	{"a", "SELECT", "0"},
	{"a", "SELECT", "1"},
	{"a", "MULTI"},
	{"a", "PING"},
	{"a", "NOSUCHCOMMAND"},
	{"a", "GET"},
	// Rights change under an authenticated connection at once.
	{"admin", "ACL", "SETUSER", "alice", "+del", "+ping"},
	{"a", "DEL", "k1"},
	{"a", "PING"},
	// A command refused while queued fails the transaction.
	{"admin", "ACL", "SETUSER", "alice", "+multi", "+exec"},
	{"a", "MULTI"},
	{"a", "GET", "k1"},
	{"a", "INCR", "k1"},
	{"a", "GET", "zz"},
	{"a", "EXEC"},
	// Rules changed between queueing and EXEC.
	{"a", "MULTI"},
	{"a", "SET", "k1", "v"},
	{"a", "GET", "k1"},
	{"a", "SET", "k2", "v"},
	{"admin", "ACL", "SETUSER", "alice", "-get", "resetkeys", "~k2"},
	{"a", "EXEC"},
	{"admin", "ACL", "SETUSER", "alice", "+get", "~k*"},
	{"admin", "ACL", "LOG", "RESET"},
	{"admin", "ACL", "SETUSER", "alice", "off"},
	{"a", "PING"}, // off stops new logins only
	{"new:a2", "AUTH", "alice", "pa"},
	{"admin", "ACL", "SETUSER", "alice", "on"},
	{"new:a2", "HELLO", "2", "AUTH", "alice", "nope"},
	{"new:a2", "HELLO", "2", "AUTH", "alice", "pa", "SETNAME", "has space"},

	// Inside scripts and functions every call is checked as the caller
	// (scriptVerifyACL): before the read-only check, errors raised with
	// the script's name or returned by pcall; redis.acl_check_cmd asks.
	{"admin", "ACL", "SETUSER", "alice", "+eval", "+eval_ro", "+fcall", "+fcall_ro"},
	{"a", "EVAL", "return redis.call('set','k1','v')", "1", "k1"},
	{"a", "EVAL", "return redis.call('set','zz','v')", "1", "k1"},
	{"a", "EVAL", "return redis.call('hset','k1','f','v')", "0"},
	{"a", "EVAL", "return redis.pcall('get','zz')", "0"},
	{"a", "EVAL", "return redis.call('get','r1')", "0"},
	{"a", "EVAL", "return redis.call('set','r1','x')", "0"},
	{"a", "EVAL", "return redis.call('publish','zz','m')", "0"},
	{"a", "EVAL", "return redis.call('nosuch')", "0"},
	{"a", "EVAL", "return redis.call('get')", "0"},
	{"a", "EVAL", "local ok = {} for i, c in ipairs({{'set','k1','v'}, {'hset','k1','f','v'}, {'get','zz'}, {'get','r1'}, {'config','get','x'}, {'config'}, {'acl','whoami'}, {'acl','users'}}) do ok[i] = redis.acl_check_cmd(unpack(c)) and 1 or 0 end return ok", "0"},
	{"a", "EVAL", "return redis.acl_check_cmd('nosuch')", "0"},
	{"a", "EVAL", "return redis.acl_check_cmd('config','nosuch')", "0"},
	{"a", "EVAL", "return redis.acl_check_cmd()", "0"},
	{"a", "EVAL", "return redis.pcall('acl_check_cmd')", "0"},
	{"a", "EVAL_RO", "return redis.call('get','zz')", "0"},
	{"a", "EVAL_RO", "return redis.call('hset','k1','f','v')", "0"},
	{"a", "EVAL_RO", "return redis.call('set','k1','v')", "0"},
	{"a", "EVAL", "#!lua flags=no-writes\nreturn redis.call('get','zz')", "0"},
	{"admin", "EVAL", "return {redis.acl_check_cmd('flushall') and 1 or 0, redis.call('set','zz','admin')}", "0"},
	{"admin", "FUNCTION", "LOAD", "#!lua name=acllib\nredis.register_function('aclf', function(k, a) return redis.call(a[1], k[1]) end)\nredis.register_function{function_name='aclro', callback=function(k, a) return redis.call(a[1], k[1]) end, flags={'no-writes'}}"},
	{"a", "FCALL", "aclf", "1", "k1", "get"},
	{"a", "FCALL", "aclf", "1", "k1", "hgetall"},
	{"a", "FCALL", "aclf", "1", "zz", "get"},
	{"a", "FCALL_RO", "aclro", "1", "k1", "hgetall"},
	{"a", "FCALL_RO", "aclro", "1", "k1", "get"},
	{"admin", "ACL", "SETUSER", "alice", "-hgetall", "+hlen"},
	{"a", "FCALL", "aclf", "1", "k1", "hlen"},
	{"admin", "FUNCTION", "FLUSH"},
	// SORT's BY and GET patterns need read access to every key.
	{"admin", "ACL", "SETUSER", "alice", "+sort", "+sort_ro"},
	{"a", "SORT", "k1", "BY", "w*"},
	{"a", "SORT", "k1", "BY", "nosort"},
	{"a", "SORT", "k1", "GET", "#"},
	{"a", "SORT_RO", "k1", "LIMIT", "0", "1", "GET", "x*"},
	{"a", "SORT", "k1", "BY", "w*", "BOGUS"},
	{"a", "EVAL", "return redis.pcall('sort','k1','by','w*')", "0"},
	{"admin", "ACL", "SETUSER", "wo", "on", "nopass", "%W~*", "%R~k*", "+@all"},
	{"new:w", "AUTH", "wo", "x"},
	{"w", "SORT", "k1", "BY", "x*"},
	{"w", "SORT", "nokey", "BY", "nosort"},
	{"admin", "ACL", "SETUSER", "wo", "(~* +sort)"},
	{"w", "SORT", "nokey", "BY", "x*", "GET", "#"},
	{"admin", "ACL", "DELUSER", "wo"},
	{"admin", "ACL", "SETUSER", "alice", "-eval", "-eval_ro", "-fcall", "-fcall_ro", "-hlen", "-sort", "-sort_ro"},

	// A password for the default user: NOAUTH before AUTH for every
	// class of command but the no-auth ones.
	{"admin", "CONFIG", "SET", "requirepass", "s3cret"},
	{"admin", "ACL", "GETUSER", "default"},
	{"admin", "ACL", "LIST"},
	{"new:n", "PING"},
	{"n", "GET", "k"},
	{"n", "SET", "k", "v"},
	{"n", "ACL", "WHOAMI"},
	{"n", "CONFIG", "GET", "maxclients"},
	{"n", "CLIENT", "ID"},
	{"n", "MULTI"},
	{"n", "SUBSCRIBE", "ch"},
	{"n", "EVAL", "return 1", "0"},
	{"n", "NOSUCHCOMMAND"},
	{"n", "GET"},
	{"n", "HELLO", "3"},
	{"n", "HELLO", "3", "AUTH", "default", "wrong"},
	{"n", "AUTH", "wrong"},
	{"n", "AUTH", "s3cret"},
	{"n", "ACL", "WHOAMI"},
	{"new:n", "AUTH", "default", "s3cret"},
	{"n", "ACL", "WHOAMI"},
	{"n", "RESET"}, // logs out
	{"n", "PING"},
	{"n", "AUTH", "default", "s3cret"},
	{"new:n", "AUTH", "bob", "anything"},
	{"n", "ACL", "WHOAMI"},
	{"n", "RESET"},
	{"n", "ACL", "WHOAMI"},
	{"n", "AUTH", "bob", "anything"},
	{"n", "FLUSHALL"},
	{"admin", "CONFIG", "SET", "requirepass", ""},
	{"admin", "ACL", "GETUSER", "default"},
	{"new:n", "PING"},
	{"n", "AUTH", "x"},

	// Deleting a user closes its connections (the next reply is none).
	{"admin", "ACL", "DELUSER", "alice", "bob", "carol"},
	{"admin", "ACL", "LIST"},
}

// sortSingleRules sorts the single-command rules that end a user's
// command rules ("-@all +@read +set -get"): Redis emits them in its hash
// table's order, which changes from run to run (see compatibility.md).
func sortSingleRules(raw string) string {
	lines := strings.Split(raw, "\r\n")
	for i, l := range lines {
		if !strings.Contains(l, "@all") {
			continue
		}
		f := strings.Split(l, " ")
		j := len(f)
		for j > 0 && (strings.HasPrefix(f[j-1], "+") || strings.HasPrefix(f[j-1], "-")) && !strings.Contains(f[j-1], "@") {
			j--
		}
		slices.Sort(f[j:])
		lines[i] = strings.Join(f, " ")
	}
	return strings.Join(lines, "\r\n")
}

// TestDifferentialACLRules gives one user random rules, many times over,
// and asks both servers whether it may run each of a set of commands
// (ACL DRYRUN): command bits, categories, subcommands, first arguments,
// key patterns by read and write use, channels and selectors must decide
// alike.
func TestDifferentialACLRules(t *testing.T) {
	requireRedis(t)
	t.Parallel()
	ref, kvs := startRedis(t), startKVS(t, KVSOptions{})
	rc, kc := dialRaw(t, ref.Addr), dialRaw(t, kvs.Addr)
	pool := []string{"reset", "allkeys", "resetkeys", "~a*", "%R~b*", "%W~c*", "%RW~d", "allchannels", "resetchannels", "&x*",
		"+@all", "-@all", "+@read", "-@write", "+@string", "-@dangerous", "+get", "-get", "+set", "+config|get", "-config", "+client|id", "+select|0", "+@admin", "-@keyspace",
		"+@hash", "-hget", "+@pubsub", "+@scripting", "-eval", "+@list", "-@slow", "+@fast", "+@sortedset", "-zadd", "+@blocking", "+@transaction", "+@connection", "+@set", "-@set", "+@bitmap",
		"(~a* +get)", "(%R~b* +@read)", "(%W~c* +@write &x*)", "clearselectors"}
	cmds := [][]string{{"get", "a1"}, {"get", "b1"}, {"set", "c1", "v"}, {"set", "b1", "v", "get"}, {"set", "d", "v"}, {"hget", "a1", "f"}, {"hset", "c1", "f", "v"},
		{"eval", "return 1", "1", "a1"}, {"eval", "return 1", "2", "a1", "b1"}, {"zunionstore", "c1", "2", "a1", "b1"}, {"lmove", "a1", "c1", "left", "right"},
		{"publish", "x1", "m"}, {"publish", "y", "m"}, {"subscribe", "x1", "y"}, {"psubscribe", "x*"}, {"config", "get", "maxclients"}, {"config", "set", "maxclients", "5"},
		{"client", "id"}, {"client", "list"}, {"select", "0"}, {"flushall"}, {"mget", "a1", "b1"}, {"mset", "c1", "1", "d", "2"}, {"del", "a1"}, {"sort", "a1", "store", "c1"},
		{"blpop", "a1", "0"}, {"zadd", "a1", "1", "m"}, {"multi"}, {"ping"}, {"sadd", "a1", "m"}, {"setbit", "c1", "1", "1"}, {"bitcount", "b1"}, {"incr", "d"},
		{"object", "encoding", "a1"}, {"memory", "usage", "a1"}, {"copy", "a1", "c1"}, {"rename", "a1", "c1"}, {"type", "a1"}}
	r := rand.New(rand.NewSource(testSeed(t)))
	diffs := 0
	for i := 0; i < 300 && diffs < 10; i++ {
		args := []string{"ACL", "SETUSER", "u"}
		for n := r.Intn(5) + 1; n > 0; n-- {
			args = append(args, pool[r.Intn(len(pool))])
		}
		a, b := string(rc.Do(args...).Raw), string(kc.Do(args...).Raw)
		if a != b {
			t.Errorf("%v: redis %q kvs %q", args, a, b)
			diffs++
			continue
		}
		for j := 0; j < 6; j++ {
			c := cmds[r.Intn(len(cmds))]
			d := append([]string{"ACL", "DRYRUN", "u"}, c...)
			a, b := string(rc.Do(d...).Raw), string(kc.Do(d...).Raw)
			if a != b {
				t.Errorf("%v then DRYRUN %v:\n redis %q\n kvs   %q", args, c, a, b)
				diffs++
			}
		}
	}
}
