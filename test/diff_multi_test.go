package test

import (
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestDifferentialMulti runs random transactions on redis-server and kvs
// side by side and compares every reply byte for byte: WATCH (sometimes of
// missing keys) on one connection, writes racing it from a second
// connection, MULTI with queued commands of every type (runtime errors,
// syntax errors, unknown commands and wrong arities among them, blocking
// commands, commands the server answers itself), then EXEC, DISCARD or a
// misplaced MULTI/WATCH/EXEC/DISCARD, each transaction pipelined as
// go-redis sends it. Before them, the sessions of queueSessions and
// every subcommand with wrong arities (compareQueuedSubcommands): what is
// refused at queue time, and what EXEC answers then. The keyspaces must
// be equal at the end. RESP2 and RESP3, in memory, durable and cluster
// mode (a follower forwards the EXEC with the versions it saw).
func TestDifferentialMulti(t *testing.T) {
	requireRedis(t)
	requireKVS(t)
	seed := testSeed(t)
	modes := []struct {
		name    string
		proto   int
		opts    KVSOptions
		cluster string
	}{
		{"resp2-memory", 2, KVSOptions{}, ""},
		{"resp3-durable", 3, KVSOptions{Durable: true}, ""},
		{"resp3-cluster-leader", 3, KVSOptions{}, "leader"},
		{"resp2-cluster-follower", 2, KVSOptions{}, "follower"},
	}
	for i, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			var kvs *Node
			switch m.cluster {
			case "":
				kvs = startKVS(t, m.opts)
			default:
				// A session sets requirepass for a while: the nodes'
				// connections to each other log in with it.
				nodes := startCluster(t, 3, "--masterauth", queuePass)
				kvs = waitLeader(t, nodes)
				if m.cluster == "follower" {
					kvs = followers(nodes, kvs)[0]
				}
			}
			md := &multiDiffer{t: t, r: rand.New(rand.NewSource(seed + int64(i))), clustered: m.cluster != ""}
			ref := startRedis(t)
			for _, n := range []*Node{ref, kvs} {
				a, b := dialRaw(t, n.Addr), dialRaw(t, n.Addr)
				if m.proto == 3 {
					a.Do("HELLO", "3")
					b.Do("HELLO", "3")
				}
				md.a = append(md.a, a)
				md.b = append(md.b, b)
			}
			for _, qs := range queueSessions {
				runQueueSession(t, ref, kvs, m.proto, qs)
			}
			compareQueuedSubcommands(t, ref, kvs, m.proto)
			md.run(*flagDiffOps / 5)
			d := &differ{t: t, rc: md.a[0], kc: md.a[1]}
			d.compareState("after the transactions")
		})
	}
}

type multiDiffer struct {
	t         *testing.T
	r         *rand.Rand
	a, b      []*rawConn // [redis, kvs]: the transaction's connection, the racing one
	clustered bool
	history   []string
	resyncs   int
}

var multiKeys = []string{"a", "b", "c", "n", "l", "h", "s", "z"}

func (m *multiDiffer) key() string { return multiKeys[m.r.Intn(len(multiKeys))] }

// command is one command to queue or race with: deterministic replies
// only (no random picks, no sets' or hashes' iteration order).
func (m *multiDiffer) command() []string {
	k := m.key()
	v := strconv.Itoa(m.r.Intn(5))
	switch m.r.Intn(24) {
	case 0, 1:
		return []string{"SET", k, v}
	case 2:
		return []string{"GET", k}
	case 3, 4:
		return []string{"INCR", k}
	case 5:
		return []string{"DEL", k, m.key()}
	case 6:
		return []string{"RPUSH", k, v}
	case 7:
		return []string{"LPOP", k}
	case 8:
		return []string{"LRANGE", k, "0", "-1"}
	case 9:
		return []string{"HSET", k, "f" + v, v}
	case 10:
		return []string{"HGET", k, "f" + v}
	case 11:
		return []string{"SADD", k, v}
	case 12:
		return []string{"SCARD", k}
	case 13:
		return []string{"ZADD", k, v, "m" + v}
	case 14:
		return []string{"ZRANGE", k, "0", "-1", "WITHSCORES"}
	case 15:
		return []string{"RENAME", k, m.key()}
	case 16:
		return []string{"EXPIRE", k, "1000"}
	case 17:
		return []string{"TYPE", k}
	case 18:
		return []string{"BLPOP", k, "0"}
	case 19:
		return []string{"EXISTS", k, m.key()}
	case 20:
		// A syntax error is a runtime error inside EXEC; the rest
		// (unknown commands and subcommands, wrong arities) abort it
		// at queue time.
		return [][]string{{"SET", k, v, "NX", "XX"}, {"GET"}, {"NOSUCHCOMMAND", k}, {"INCRBY", k, "x"},
			{"CONFIG", "GET"}, {"CONFIG", "NOSUCH"}, {"OBJECT", "ENCODING"}, {"SCRIPT", "LOAD"},
			{"CLIENT", "ID", k}}[m.r.Intn(9)]
	case 21:
		return []string{"PING", v}
	case 22:
		return []string{"ECHO", v}
	}
	if m.r.Intn(10) == 0 {
		return []string{"FLUSHALL"}
	}
	return []string{"MGET", k, m.key()}
}

func (m *multiDiffer) run(txs int) {
	for i := 0; i < txs; i++ {
		if m.r.Intn(3) > 0 {
			watch := []string{"WATCH"}
			for range 1 + m.r.Intn(2) {
				watch = append(watch, m.key())
			}
			if !m.step(m.a, [][]string{watch, {"GET", watch[1]}}) {
				continue
			}
		}
		var race [][]string
		for range m.r.Intn(3) {
			if cmd := m.command(); cmd[0] != "BLPOP" { // it would block
				race = append(race, cmd)
			}
		}
		if len(race) > 0 && !m.step(m.b, race) {
			continue
		}
		tx := [][]string{{"MULTI"}}
		for range m.r.Intn(5) {
			tx = append(tx, m.command())
		}
		switch n := m.r.Intn(20); {
		case n == 0:
			tx = append(tx, []string{"DISCARD"})
		case n == 1:
			tx = append(tx, []string{"MULTI"}, []string{"WATCH", "a"}, []string{"EXEC"})
		case n == 2:
			tx = append(tx, []string{"UNWATCH"}, []string{"EXEC"}, []string{"EXEC"})
		case n == 3:
			// Each flags the transaction.
			wrong := [][]string{{"MULTI", "x"}, {"WATCH"}, {"DISCARD", "x"}, {"UNWATCH", "x"}}
			tx = append(tx, wrong[m.r.Intn(len(wrong))], []string{"EXEC"})
		case n == 4:
			// EXEC refused: the transaction is discarded, and so the
			// EXEC that follows has no MULTI.
			tx = append(tx, []string{"EXEC", "x"}, []string{"EXEC"})
		default:
			tx = append(tx, []string{"EXEC"})
		}
		m.step(m.a, tx)
	}
	m.t.Logf("%d transactions, %d dropped at a leader change", txs, m.resyncs)
}

// step sends cmds as one pipeline on conns[0] (redis) and conns[1] (kvs)
// and compares the replies. It reports false when kvs met a leader change
// (both servers are then flushed and reset, and the run goes on).
func (m *multiDiffer) step(conns []*rawConn, cmds [][]string) bool {
	m.t.Helper()
	refs := doPipeline(m.t, conns[0], cmds)
	gots := doPipeline(m.t, conns[1], cmds)
	if m.clustered && leaderTrouble(gots) {
		m.resyncs++
		for _, pair := range [][]*rawConn{m.a, m.b} {
			for _, c := range pair {
				c.Do("DISCARD")
				c.Do("UNWATCH")
			}
		}
		m.a[0].Do("FLUSHALL")
		retryLeaderChange(m.t, func() error { return replyErr(m.a[1].Do("FLUSHALL")) })
		m.history = nil
		return false
	}
	for i, cmd := range cmds {
		m.history = append(m.history, fmt.Sprintf("%s -> %q", showCommand(cmd), refs[i]))
		if refs[i] != gots[i] {
			m.t.Fatalf("%s: redis %q, kvs %q\nhistory (last 30):\n%s", showCommand(cmd), refs[i], gots[i],
				strings.Join(m.history[max(0, len(m.history)-30):], "\n"))
		}
	}
	return true
}

func doPipeline(t *testing.T, c *rawConn, cmds [][]string) []string {
	t.Helper()
	var req []byte
	for _, cmd := range cmds {
		req = append(req, encodeCommand(cmd...)...)
	}
	if err := c.write(req); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(cmds))
	for i := range cmds {
		v, err := c.read()
		if err != nil {
			t.Fatalf("reply %d to %s: %v", i, showCommand(cmds[i]), err)
		}
		out[i] = string(v.Raw)
	}
	return out
}

// queuePass is the password the NOAUTH session sets for a while.
const queuePass = "s3cret"

// A queueSession is a scripted sequence of pipelines compared reply by
// reply with redis-server: the checks a command meets before it runs
// (admit.go in kvs, processCommand in Redis) while a transaction is
// queued, and what EXEC, DISCARD and the next commands answer after.
type queueSession struct {
	name  string
	steps []queueStep
	// aclLog: compare the ACL LOG entries the session left (the
	// session's first step resets the log).
	aclLog bool
}

// A queueStep is one pipeline, sent on the session's connection, on a
// fresh one that replaces it (without HELLO 3: it may have to AUTH
// first), or on the admin connection (CONFIG SET, ACL SETUSER, writes
// racing a WATCH).
type queueStep struct {
	conn string // "", "fresh" or "admin"
	cmds [][]string
}

func steps(conn string, cmds ...[]string) queueStep { return queueStep{conn: conn, cmds: cmds} }

var queueSessions = []queueSession{
	{name: "control commands with wrong arities", steps: []queueStep{
		steps("", []string{"MULTI"}, []string{"EXEC", "x"}, []string{"EXEC"}, []string{"DISCARD"}),
		steps("", []string{"MULTI"}, []string{"SET", "q", "1"}, []string{"EXEC", "x"}, []string{"EXEC"}, []string{"GET", "q"}),
		// A refused EXEC outside MULTI unwatches too.
		steps("", []string{"WATCH", "q"}),
		steps("admin", []string{"SET", "q", "2"}),
		steps("", []string{"EXEC", "x"}, []string{"MULTI"}, []string{"GET", "q"}, []string{"EXEC"}),
		steps("", []string{"MULTI"}, []string{"DISCARD", "x"}, []string{"SET", "q", "3"}, []string{"EXEC"}, []string{"GET", "q"}),
		steps("", []string{"MULTI"}, []string{"MULTI", "x"}, []string{"EXEC"}, []string{"EXEC"}),
		steps("", []string{"MULTI"}, []string{"WATCH"}, []string{"DISCARD"}, []string{"DISCARD"}),
		steps("", []string{"MULTI"}, []string{"UNWATCH", "x"}, []string{"PING"}, []string{"EXEC"}),
		// Errors the commands answer themselves flag nothing.
		steps("", []string{"MULTI"}, []string{"MULTI"}, []string{"WATCH", "q"}, []string{"GET", "q"}, []string{"EXEC"}),
		steps("", []string{"EXEC", "x"}, []string{"DISCARD", "x"}, []string{"MULTI", "x"}, []string{"WATCH"}, []string{"EXEC"}, []string{"DISCARD"}),
	}},
	{name: "subcommands", steps: []queueStep{
		steps("", []string{"MULTI"}, []string{"SCRIPT", "LOAD"}, []string{"CONFIG", "GET"}, []string{"CONFIG", "NOSUCH"},
			[]string{"CLIENT", "ID", "x"}, []string{"CLIENT", "NOSUCH"}, []string{"CLIENT"}, []string{"OBJECT"},
			[]string{"OBJECT", "ENCODING"}, []string{"OBJECT", "NOSUCH", "q"}, []string{"PUBSUB", "NUMPAT", "x"},
			[]string{"COMMAND", "COUNT", "x"}, []string{"FUNCTION", "LOAD"}, []string{"SLOWLOG", "LEN", "x"},
			[]string{"MEMORY", "USAGE"}, []string{"ACL", "WHOAMI", "x"}, []string{"LATENCY", "HISTORY"},
			[]string{"OBJECT", "HELP"}, []string{"EXEC"}, []string{"EXEC"}),
		// The same subcommands with good arities run at EXEC.
		steps("", []string{"SET", "q", "12345"}, []string{"MULTI"}, []string{"OBJECT", "ENCODING", "q"},
			[]string{"OBJECT", "ENCODING", "nosuch"}, []string{"SCRIPT", "EXISTS", "abc"}, []string{"PUBSUB", "NUMPAT"},
			[]string{"CONFIG", "GET", "maxmemory-policy"}, []string{"ACL", "WHOAMI"}, []string{"CLIENT", "GETNAME"},
			[]string{"SCRIPT", "FLUSH", "x"}, []string{"EXEC"}),
		// Redis's no-multi commands.
		steps("", []string{"MULTI"}, []string{"SAVE"}, []string{"SHUTDOWN", "NOSAVE"}, []string{"PING"}, []string{"EXEC"}),
	}},
	{name: "ACL refusals", aclLog: true, steps: []queueStep{
		steps("admin", []string{"ACL", "LOG", "RESET"},
			[]string{"ACL", "SETUSER", "mq", "on", "nopass", "~q*", "&*", "+@all", "-set", "-config|get", "-discard", "-save"},
			[]string{"ACL", "SETUSER", "mx", "on", "nopass", "~*", "&*", "+@all", "-exec"}),
		steps("", []string{"AUTH", "mq", "x"}, []string{"MULTI"}, []string{"SET", "q", "1"}, []string{"GET", "q"},
			[]string{"GET", "other"}, []string{"CONFIG", "GET", "maxmemory"}, []string{"CONFIG", "NOSUCH"},
			[]string{"SAVE"}, []string{"DISCARD"}, []string{"DISCARD", "x"}, []string{"EXEC"}),
		steps("", []string{"MULTI"}, []string{"GET", "q"}, []string{"INCR", "q"}, []string{"EXEC"}),
		steps("", []string{"AUTH", "mx", "x"}, []string{"MULTI"}, []string{"GET", "q"}, []string{"EXEC"}, []string{"EXEC"},
			[]string{"MULTI"}, []string{"EXEC", "x"}, []string{"DISCARD"}, []string{"EXEC"}),
		steps("", []string{"AUTH", "default", "x"}, []string{"MULTI"}, []string{"GET", "q"}, []string{"EXEC"}),
		steps("admin", []string{"ACL", "DELUSER", "mq", "mx"}),
	}},
	{name: "NOAUTH", steps: []queueStep{
		steps("admin", []string{"CONFIG", "SET", "requirepass", queuePass}),
		steps("fresh", []string{"MULTI"}, []string{"GET", "q"}, []string{"EXEC"}, []string{"EXEC", "x"},
			[]string{"AUTH", queuePass}, []string{"MULTI"}, []string{"GET", "q"}, []string{"EXEC"}),
		steps("admin", []string{"CONFIG", "SET", "requirepass", ""}),
	}},
	{name: "OOM", steps: []queueStep{
		steps("", []string{"MULTI"}, []string{"GET", "q"}),
		steps("admin", []string{"CONFIG", "SET", "maxmemory", "1"}),
		// Past maxmemory every command is refused as it is queued, and
		// MULTI and WATCH too; DISCARD and EXEC are not.
		steps("", []string{"SET", "q", "1"}, []string{"GET", "q"}, []string{"WATCH", "q"}, []string{"MULTI"},
			[]string{"EXEC"}, []string{"SET", "q", "1"}, []string{"GET", "q"}, []string{"MULTI"}, []string{"DISCARD"}),
		steps("admin", []string{"CONFIG", "SET", "maxmemory", "0"}),
		// A transaction of reads runs past maxmemory; one holding a
		// write is refused whole.
		steps("", []string{"MULTI"}, []string{"GET", "q"}, []string{"SET", "q", "2"}),
		steps("admin", []string{"CONFIG", "SET", "maxmemory", "1"}),
		steps("", []string{"EXEC"}, []string{"EXEC"}, []string{"GET", "q"}),
		steps("admin", []string{"CONFIG", "SET", "maxmemory", "0"}),
		steps("", []string{"MULTI"}, []string{"GET", "q"}),
		steps("admin", []string{"CONFIG", "SET", "maxmemory", "1"}),
		steps("", []string{"EXEC"}),
		steps("admin", []string{"CONFIG", "SET", "maxmemory", "0"}),
	}},
	{name: "subscribed", steps: []queueStep{
		steps("", []string{"MULTI"}, []string{"SUBSCRIBE", "qch"}, []string{"EXEC"}),
		steps("", []string{"MULTI"}, []string{"CONFIG", "GET", "x"}, []string{"CONFIG", "NOSUCH"}, []string{"GET", "q"},
			[]string{"EXEC"}, []string{"UNSUBSCRIBE"}, []string{"EXEC"}),
	}},
	// Blocking commands inside MULTI run as their non-blocking forms: a
	// timeout of 0 answers nil at once when there is nothing to pop.
	{name: "blocking", steps: []queueStep{
		steps("", []string{"DEL", "ql", "qz"}, []string{"RPUSH", "ql", "a"}, []string{"ZADD", "qz", "1", "m"},
			[]string{"MULTI"}, []string{"BLPOP", "qe", "0"}, []string{"BRPOP", "qe", "0"},
			[]string{"BRPOPLPUSH", "qe", "qe2", "0"}, []string{"BLMOVE", "qe", "qe2", "LEFT", "LEFT", "0"},
			[]string{"BZPOPMIN", "qez", "0"}, []string{"BZPOPMAX", "qez", "0"},
			[]string{"BLMPOP", "0", "1", "qe", "LEFT"}, []string{"BZMPOP", "0", "1", "qez", "MIN"},
			[]string{"BLPOP", "ql", "0"}, []string{"BLPOP", "ql", "0"}, []string{"BZPOPMAX", "qz", "0"},
			[]string{"BZMPOP", "0", "1", "qz", "MIN"}, []string{"EXEC"}),
	}},
}

// runQueueSession runs qs on ref (redis-server) and kvs side by side and
// compares every reply. A session that meets a leader change in a
// cluster is run again from a clean state, on new connections.
func runQueueSession(t *testing.T, ref, kvs *Node, proto int, qs queueSession) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			resetQueueState(t, ref, kvs)
		}
		var sess, admin [2]*rawConn
		for i, n := range []*Node{ref, kvs} {
			sess[i], admin[i] = dialRaw(t, n.Addr), dialRaw(t, n.Addr)
			if proto == 3 {
				sess[i].Do("HELLO", "3")
				admin[i].Do("HELLO", "3")
			}
		}
		var history []string
		trouble := false
		for _, st := range qs.steps {
			conns := sess
			switch st.conn {
			case "admin":
				conns = admin
			case "fresh":
				sess = [2]*rawConn{dialRaw(t, ref.Addr), dialRaw(t, kvs.Addr)}
				conns = sess
			}
			refs := doPipeline(t, conns[0], st.cmds)
			gots := doPipeline(t, conns[1], st.cmds)
			if leaderTrouble(gots) && attempt < 5 {
				t.Logf("%s: a leader change (%q); running the session again", qs.name, firstTrouble(gots))
				trouble = true
				break
			}
			for i, cmd := range st.cmds {
				history = append(history, fmt.Sprintf("%s -> %q", showCommand(cmd), refs[i]))
				if refs[i] != gots[i] {
					t.Fatalf("%s: %s: redis %q, kvs %q\nsession so far:\n%s", qs.name, showCommand(cmd), refs[i], gots[i],
						strings.Join(history, "\n"))
				}
			}
		}
		if trouble {
			continue
		}
		if qs.aclLog {
			if r, k := aclLogEntries(admin[0]), aclLogEntries(admin[1]); !slices.Equal(r, k) {
				t.Fatalf("%s: ACL LOG:\n  redis %q\n  kvs   %q", qs.name, r, k)
			}
		}
		return
	}
}

// resetQueueState undoes what a session interrupted by a leader change
// may have left on either server: the password, maxmemory, the users and
// the keys. On kvs each command is retried until the cluster has a leader
// again.
func resetQueueState(t *testing.T, ref, kvs *Node) {
	t.Helper()
	for _, n := range []*Node{ref, kvs} {
		c := dialRaw(t, n.Addr)
		for _, cmd := range [][]string{
			{"AUTH", queuePass}, // refused, harmlessly, while there is none
			{"CONFIG", "SET", "requirepass", ""}, {"CONFIG", "SET", "maxmemory", "0"},
			{"ACL", "DELUSER", "mq", "mx"}, {"FLUSHALL"},
		} {
			err := retryLeaderChange(t, func() error { return replyErr(c.Do(cmd...)) })
			if err != nil && cmd[0] != "AUTH" {
				t.Fatalf("%s: %s: %v", n.Name, showCommand(cmd), err)
			}
		}
	}
}

// aclLogEntries is ACL LOG's entries, each as the fields both servers
// fill alike: count, reason, context, object and username.
func aclLogEntries(c *rawConn) []string {
	var out []string
	for _, e := range c.Do("ACL", "LOG").Elems {
		f := map[string]string{}
		for i := 0; i+1 < len(e.Elems); i += 2 {
			f[e.Elems[i].Str] = e.Elems[i+1].Str
		}
		out = append(out, strings.Join([]string{f["count"], f["reason"], f["context"], f["object"], f["username"]}, " "))
	}
	return out
}

// kvsLacksSubcommands are the subcommands of Redis 7.0's containers that
// kvs does not serve: kvs answers them "unknown subcommand".
var kvsLacksSubcommands = map[string]bool{
	"function|help":  true,
	"latency|doctor": true, "latency|graph": true, "latency|histogram": true,
	"memory|doctor": true, "memory|malloc-stats": true, "memory|stats": true,
	"script|debug": true, "script|help": true,
}

// compareQueuedSubcommands queues every subcommand redis-server has of
// each container kvs has (CONFIG, CLIENT, OBJECT, SCRIPT, ...) with one
// argument too few, its arity and one too many, in one MULTI that is then
// discarded, and requires the same reply as redis-server's: QUEUED, or
// the refusal of an arity or of the subcommand.
func compareQueuedSubcommands(t *testing.T, ref, kvs *Node, proto int) {
	t.Helper()
	r, k := dialRaw(t, ref.Addr), dialRaw(t, kvs.Addr)
	if proto == 3 {
		r.Do("HELLO", "3")
		k.Do("HELLO", "3")
	}
	cmds := [][]string{{"MULTI"}}
	for _, info := range r.Do("COMMAND").Elems {
		name, subs := info.Elems[0].Str, info.Elems[9].Elems
		if len(subs) == 0 || k.Do("COMMAND", "INFO", name).Elems[0].Null {
			continue
		}
		for _, sub := range subs {
			arity, err := strconv.Atoi(sub.Elems[1].Str)
			if err != nil {
				t.Fatalf("COMMAND: %s's arity %s", sub.Elems[0].Str, sub.Elems[1])
			}
			n := max(arity, -arity)
			for argc := max(2, n-1); argc <= n+1; argc++ {
				cmd := []string{strings.ToUpper(name), strings.Split(sub.Elems[0].Str, "|")[1]}
				for len(cmd) < argc {
					cmd = append(cmd, "x")
				}
				cmds = append(cmds, cmd)
			}
		}
	}
	cmds = append(cmds, []string{"DISCARD"})
	if len(cmds) < 100 {
		t.Fatalf("only %d subcommands to queue: kvs has no containers?", len(cmds))
	}
	refs, gots := doPipeline(t, r, cmds), doPipeline(t, k, cmds)
	for i, cmd := range cmds {
		full := strings.ToLower(cmd[0]) + "|" + cmd[min(1, len(cmd)-1)]
		lacks := "-ERR unknown subcommand '" + cmd[min(1, len(cmd)-1)] + "'. Try " + cmd[0] + " HELP.\r\n"
		if refs[i] != gots[i] && !(kvsLacksSubcommands[full] && gots[i] == lacks) {
			t.Errorf("%s in MULTI: redis %q, kvs %q", showCommand(cmd), refs[i], gots[i])
		}
	}
}
