package test

import (
	"fmt"
	"math/rand"
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
// misplaced MULTI/WATCH, each transaction pipelined as go-redis sends it.
// The keyspaces must be equal at the end. RESP2 and RESP3, in memory,
// durable and cluster mode (a follower forwards the EXEC with the
// versions it saw).
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
				nodes := startCluster(t, 3)
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
		// abort it at queue time.
		return [][]string{{"SET", k, v, "NX", "XX"}, {"GET"}, {"NOSUCHCOMMAND", k}, {"INCRBY", k, "x"}}[m.r.Intn(4)]
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
