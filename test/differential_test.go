package test

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var (
	flagDiffOps = flag.Int("diff.ops", 8000, "commands per protocol in TestDifferential")
	flagDiffMax = flag.Int("diff.max", 5, "divergences to report before TestDifferential stops")
	// Comparing redis-server with itself shows that the generator and the
	// normalisations produce no false divergences.
	// Skipping commands that hit a known divergence lets a run look past it
	// for the next one, e.g. -diff.skip='^GETEX .*(EX|PX)' ; the default
	// skips nothing.
	flagDiffSkip = flag.String("diff.skip", "", "regexp over the upper-cased command line; matching generated commands are not sent")
	flagDiffSelf = flag.Bool("diff.self", false, "run TestDifferential against a second redis-server instead of kvs")
)

// TestDifferential sends the same random command sequence to kvs and to
// redis-server and requires the same reply bytes, up to legitimate
// differences (see sameReply). RESP2 runs against a memory node and RESP3
// against a durable one, and a third run pipelines batches of commands
// against a durable one with fsync always. Two more run against a
// three-node cluster: RESP3 on the leader, and pipelines on a follower
// with --reads linearizable, which forwards both writes and reads. Two more
// run a one-node cluster of three data groups against a redis-server with
// cluster support serving every slot (Redis Cluster's CROSSSLOT and SORT
// rules apply to both). Durable nodes are restarted
// every 1000 commands and must come back with the same data as Redis.
//
// After a divergence both servers are flushed and the run goes on, so one
// bug does not hide the next; each divergence is printed with the commands
// since the last flush.
func TestDifferential(t *testing.T) {
	requireRedis(t)
	if !*flagDiffSelf {
		requireKVS(t)
	}
	seed := testSeed(t)
	modes := []struct {
		name     string
		proto    int
		pipeline int
		opts     KVSOptions
		// cluster, when set, runs against a node of a three-node cluster:
		// "leader", or "follower" started with --reads linearizable, so
		// that its writes and reads are both forwarded to the leader; or
		// "sharded": a one-node cluster of three data groups, against a
		// redis-server with cluster support that serves every slot.
		cluster string
	}{
		{"resp2-memory", 2, 1, KVSOptions{}, ""},
		{"resp3-durable", 3, 1, KVSOptions{Durable: true, Fsync: "no"}, ""},
		// Pipelined commands are proposed as one batch; replies, and reads
		// after writes inside the batch, must be as if sent one by one.
		{"resp2-durable-pipelined", 2, 40, KVSOptions{Durable: true, Fsync: "always"}, ""},
		{"resp3-cluster-leader", 3, 1, KVSOptions{}, "leader"},
		{"resp2-cluster-follower-pipelined", 2, 20, KVSOptions{}, "follower"},
		// A kvs node of three data groups against a Redis Cluster node
		// serving every slot: keys of different slots are refused alike,
		// and a pipeline's commands go to their own groups in order.
		{"resp2-sharded", 2, 1, KVSOptions{}, "sharded"},
		{"resp3-sharded-pipelined", 3, 20, KVSOptions{}, "sharded"},
	}
	for i, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			d := &differ{
				t:        t,
				proto:    m.proto,
				pipeline: m.pipeline,
				gen:      newCmdGen(seed + int64(i)),
				ref:      startRedis(t),
				dbs:      dbsCompared,
			}
			if m.cluster == "sharded" {
				d.dbs = 1 // database 0 alone, as in Redis Cluster
			}
			restarts := m.opts.Durable
			switch {
			case *flagDiffSelf:
				d.kvs, restarts = startRedis(t), false
			case m.cluster == "sharded":
				d.ref = startRedisCluster(t)
				d.kvs, restarts, d.clustered = startShardedNode(t, 3), false, true
			case m.cluster != "":
				nodes := startCluster(t, 3, "--reads", "linearizable")
				leader := waitLeader(t, nodes)
				d.kvs, restarts, d.clustered = leader, false, true
				d.peers = nodes
				if m.cluster == "follower" {
					// A restarted follower rejoins by itself; until it
					// hears from the leader it answers CLUSTERDOWN.
					d.kvs, restarts = followers(nodes, leader)[0], true
					d.ready = func() { waitLeader(t, nodes) }
					withConfigFile(t, d.kvs)
				}
			default:
				d.kvs = newKVS(t, "kvs", m.opts)
				withConfigFile(t, d.kvs)
				d.kvs.Start()
			}
			d.connect()
			d.run(*flagDiffOps, restarts)
		})
	}
}

type diffStep struct {
	cmd      []string
	ref, got string
}

type differ struct {
	t         *testing.T
	proto     int
	gen       *cmdGen
	ref, kvs  *Node
	rc, kc    *rawConn
	pipeline  int    // commands sent per write: 1, or up to this many
	ready     func() // nil, or waits after a restart until kvs can serve
	clustered bool   // kvs is a cluster node: leadership may change under load
	// peers are the cluster's nodes, kvs among them: a CONFIG SET goes to
	// every one, so that the encodings a follower restores from the
	// leader's snapshot follow the same thresholds as its own.
	peers []*Node
	// configs are the CONFIG SETs both servers accepted; a restarted kvs
	// gets them again, as a config file would give them (run-time
	// configuration is per process, and the reference never restarts).
	configs [][]string
	// readSorted are the keys a SORT or SORT_RO without STORE ran on:
	// Redis converts a small sorted set it sorts to a skiplist even then,
	// kvs only when the SORT stores (a read changes nothing in kvs; see
	// compatibility.md).
	readSorted map[string]bool
	// limitsChanged: an encoding threshold changed since both servers
	// were last flushed (see flushIfLimitsChanged).
	limitsChanged bool
	limits        map[string]int64 // the reference's encoding thresholds (readLimits)
	resyncs       int              // batches dropped because leadership changed (clustered)
	history       []diffStep       // since the last flush
	divergence    int
	// db is the database the connections have SELECTed; dbs the number
	// compareState visits (1 where there is database 0 alone).
	db, dbs int
}

// connect (re)opens both connections in the run's protocol.
func (d *differ) connect() {
	d.rc, d.kc = dialRaw(d.t, d.ref.Addr), dialRaw(d.t, d.kvs.Addr)
	d.db = 0
	// kvs validates every RESTORE payload as deeply as Redis does with
	// sanitize-dump-payload yes (diff_dump_test.go); set on both, so
	// that CONFIG GET agrees, and again after a restart.
	for _, c := range []*rawConn{d.rc, d.kc} {
		if v := c.Do("CONFIG", "SET", "sanitize-dump-payload", "yes"); v.Str != "OK" {
			d.t.Fatalf("CONFIG SET sanitize-dump-payload: %s", v)
		}
	}
	if d.proto == 3 {
		// The HELLO replies differ by nature (server, version, id); both
		// must be maps.
		for _, c := range []*rawConn{d.rc, d.kc} {
			if v := c.Do("HELLO", "3"); v.Kind != '%' {
				d.t.Fatalf("HELLO 3: %s", v)
			}
		}
	}
}

// encodingLimit matches the name of a parameter that sets an encoding
// threshold (hash-max-listpack-value, list-max-ziplist-size and the like).
var encodingLimit = regexp.MustCompile(`(?i)^(hash|set|zset|list)-max-`)

// noteLimits records the encoding thresholds an accepted CONFIG SET gives,
// and reports whether one of them changed.
func (d *differ) noteLimits(cmd []string) (changed bool) {
	for k := 2; k+1 < len(cmd); k += 2 {
		if !encodingLimit.MatchString(cmd[k]) {
			continue
		}
		name := strings.ReplaceAll(strings.ToLower(cmd[k]), "ziplist", "listpack")
		v, ok := memValue(cmd[k+1])
		if !ok {
			// Accepted, so Redis parsed it; count it as a change.
			changed = true
			continue
		}
		if old, ok := d.limits[name]; !ok || old != v {
			d.limits[name] = v
			changed = true
		}
	}
	return changed
}

// readLimits reads the reference's encoding thresholds.
func (d *differ) readLimits() {
	d.limits = map[string]int64{}
	v := d.rc.Do("CONFIG", "GET", "hash-max-*", "set-max-*", "zset-max-*", "list-max-*")
	for i := 0; i+1 < len(v.Elems); i += 2 {
		if n, ok := memValue(v.Elems[i+1].Str); ok {
			d.limits[strings.ReplaceAll(v.Elems[i].Str, "ziplist", "listpack")] = n
		}
	}
}

// memValue parses a configuration number as Redis does, with the units
// k, kb, m, mb, g and gb.
func memValue(s string) (int64, bool) {
	s = strings.ToLower(s)
	mul := int64(1)
	for _, u := range []struct {
		suffix string
		mul    int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mul = strings.TrimSuffix(s, u.suffix), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n * mul, err == nil
}

func (d *differ) run(ops int, restarts bool) {
	var skip *regexp.Regexp
	if *flagDiffSkip != "" {
		skip = regexp.MustCompile(*flagDiffSkip)
	}
	next := func() []string {
		for {
			cmd := d.gen.next()
			line := strings.ToUpper(strings.Join(cmd, " "))
			if skip == nil || !skip.MatchString(line) {
				return cmd
			}
		}
	}
	d.readLimits()
	var pending []string // a SCAN held back to start the next batch
	for i := 0; i < ops; {
		if pending == nil {
			pending = next()
		}
		batch := [][]string{pending}
		pending = nil
		for size := d.gen.r.Intn(d.pipeline) + 1; len(batch) < size && !isScan(batch[0]); {
			if cmd := next(); isScan(cmd) {
				pending = cmd
				break
			} else {
				batch = append(batch, cmd)
			}
		}
		refs, gots := d.exec(batch)
		if d.clustered && leaderTrouble(gots) {
			// A busy machine can delay heartbeats until the cluster
			// elects again; the batch's fate on kvs is then unknown
			// (UNCERTAIN) or partial. Not a divergence: start both
			// servers afresh and go on.
			d.resync(i, batch, gots)
			i += len(batch)
			continue
		}
		for j, cmd := range batch {
			if !sameReply(cmd, refs[j], gots[j]) && !d.encodingAfterReadSort(cmd, refs[j], gots[j]) {
				d.diverged(i+j, cmd, refs[j], gots[j])
				if d.divergence >= *flagDiffMax {
					d.t.Fatalf("stopping after %d divergences", d.divergence)
				}
				break // the rest of the batch ran on diverged state
			}
			d.history = append(d.history, diffStep{cmd, refs[j], gots[j]})
			d.noteReadSort(cmd)
			if len(cmd) == 2 && strings.EqualFold(cmd[0], "SELECT") && refs[j] == "+OK\r\n" {
				d.db, _ = strconv.Atoi(cmd[1])
			}
			if len(cmd) > 1 && strings.EqualFold(cmd[0], "CONFIG") && strings.EqualFold(cmd[1], "SET") && refs[j] == "+OK\r\n" {
				d.configs = append(d.configs, cmd)
				if d.noteLimits(cmd) {
					d.limitsChanged = true
				}
				for _, n := range d.peers {
					if n != d.kvs {
						if v := dialRaw(d.t, n.Addr).DoRetry(cmd...); string(v.Raw) != "+OK\r\n" {
							d.t.Fatalf("%s on %s: %s", showCommand(cmd), n.Name, v)
						}
					}
				}
			}
		}
		if restarts && (i+len(batch))/1000 > i/1000 {
			d.compareState(fmt.Sprintf("before restart at op %d", i))
			d.flushIfLimitsChanged(i)
			d.restart()
			d.compareState(fmt.Sprintf("after restart at op %d", i))
		}
		i += len(batch)
	}
	d.compareState("at the end")
	if restarts {
		d.flushIfLimitsChanged(ops)
		d.restart()
		d.compareState("after the final restart")
	}
}

// leaderTrouble reports whether a reply is one of a cluster's errors
// while it changes leaders.
func leaderTrouble(replies []string) bool {
	for _, r := range replies {
		for _, p := range leaderChangeErrors {
			if strings.HasPrefix(r, "-"+p) {
				return true
			}
		}
	}
	return false
}

// resync flushes both servers after a batch that met a leader change,
// retrying on kvs until the cluster answers again.
func (d *differ) resync(i int, batch [][]string, gots []string) {
	d.t.Helper()
	d.resyncs++
	d.t.Logf("op %d: a batch of %d met a leader change (%q); both servers flushed", i, len(batch), firstTrouble(gots))
	d.flushBoth()
	if d.resyncs > 20 {
		d.t.Fatalf("%d leader changes in one run: the cluster is not keeping a leader", d.resyncs)
	}
}

func firstTrouble(replies []string) string {
	for _, r := range replies {
		if leaderTrouble([]string{r}) {
			return strings.TrimSpace(r)
		}
	}
	return ""
}

// noteReadSort records the key of a SORT or SORT_RO that does not store,
// and the key such a key is renamed or copied to (RENAME, RENAMENX, COPY
// keep the value, and so its encoding: a RENAME of a sorted set a read
// SORT made a skiplist in Redis gave a divergence the excuse missed).
func (d *differ) noteReadSort(cmd []string) {
	if len(cmd) >= 3 && d.readSorted[cmd[1]] &&
		(strings.EqualFold(cmd[0], "RENAME") || strings.EqualFold(cmd[0], "RENAMENX") || strings.EqualFold(cmd[0], "COPY")) {
		d.readSorted[cmd[2]] = true
		return
	}
	if len(cmd) < 2 || !strings.EqualFold(cmd[0], "SORT") && !strings.EqualFold(cmd[0], "SORT_RO") {
		return
	}
	for _, a := range cmd[2:] {
		if strings.EqualFold(a, "STORE") {
			return
		}
	}
	if d.readSorted == nil {
		d.readSorted = map[string]bool{}
	}
	d.readSorted[cmd[1]] = true
}

// encodingAfterReadSort excuses OBJECT ENCODING of a key a read SORT ran
// on answering skiplist on redis and listpack on kvs, and nothing else.
func (d *differ) encodingAfterReadSort(cmd []string, ref, got string) bool {
	return len(cmd) == 3 && strings.EqualFold(cmd[0], "OBJECT") && strings.EqualFold(cmd[1], "ENCODING") &&
		d.readSorted[cmd[2]] && ref == "$8\r\nskiplist\r\n" && got == "$8\r\nlistpack\r\n"
}

// flushIfLimitsChanged flushes both servers before a restart when an
// encoding threshold changed since they were last flushed. A restart
// replays every write under the thresholds set last, as Redis replays its
// AOF under the configuration it starts with; the reference never
// restarts and keeps each collection as the thresholds of its last write
// built it. A hash that got a 70-byte value under hash-max-listpack-value
// 1kb, lost it, and then saw the limit set to 64 is a listpack in Redis
// and, replayed, a hashtable in kvs; a sorted set's encoding when a write
// stored it decides a score of -0 (the packed form keeps 0, the skiplist
// -0). After the flush every key the restart rebuilds was written under
// the thresholds it is rebuilt with.
func (d *differ) flushIfLimitsChanged(i int) {
	d.t.Helper()
	if !d.limitsChanged {
		return
	}
	d.t.Logf("op %d: an encoding threshold changed since the last flush; both servers flushed before the restart", i)
	d.flushBoth()
}

// flushBoth empties both servers and starts the history afresh.
func (d *differ) flushBoth() {
	d.t.Helper()
	if v := d.rc.Do("FLUSHALL"); v.IsError() {
		d.t.Fatalf("redis: FLUSHALL: %s", v)
	}
	// A cluster node may be between leaders.
	err := retryLeaderChange(d.t, func() error {
		if v := d.kc.Do("FLUSHALL"); v.IsError() {
			return errors.New(v.Str)
		}
		return nil
	})
	if err != nil {
		d.t.Fatalf("kvs: FLUSHALL: %v\n%s", err, d.kvs.LogTail(20))
	}
	d.history = nil
	d.limitsChanged = false
}

// restart restarts kvs with the configuration set so far in its config
// file, as an operator's redis.conf would give it: the encoding thresholds
// in it apply before the data is restored, so collections are rebuilt as
// Redis built them (run-time configuration is per process, and the
// reference never restarts).
func (d *differ) restart() {
	d.t.Helper()
	var conf strings.Builder
	for _, cmd := range d.configs {
		for k := 2; k+1 < len(cmd); k += 2 {
			fmt.Fprintf(&conf, "%s %s\n", cmd[k], confQuote(cmd[k+1]))
		}
	}
	if err := os.WriteFile(diffConfigPath(d.kvs), []byte(conf.String()), 0o644); err != nil {
		d.t.Fatal(err)
	}
	d.kvs.Restart()
	if d.ready != nil {
		d.ready()
	}
	d.connect()
}

// diffConfigPath is the config file a restarting node of the differential
// test is started with.
func diffConfigPath(n *Node) string { return filepath.Join(n.Dir, "diff.conf") }

// withConfigFile has n started with --config diffConfigPath(n) from its
// next start, the file empty until a restart writes it.
func withConfigFile(t testing.TB, n *Node) {
	t.Helper()
	if err := os.WriteFile(diffConfigPath(n), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	args := n.Args
	n.Args = func(n *Node) []string { return append(args(n), "--config", diffConfigPath(n)) }
}

// confQuote quotes a value for a config file in redis.conf's syntax (a
// double-quoted string with sdssplitargs's escapes).
func confQuote(v string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\' || c == '"':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, "\\x%02x", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func isScan(cmd []string) bool { return strings.EqualFold(cmd[0], "SCAN") && len(cmd) >= 2 }

// exec runs a batch on both servers, pipelined (one write, then every
// reply), and returns the raw replies. A batch holding a SCAN holds
// nothing else: a whole SCAN iteration is summarised as the sorted set of
// keys it returned.
func (d *differ) exec(batch [][]string) (refs, gots []string) {
	if isScan(batch[0]) {
		return []string{d.scanAll(d.rc, batch[0])}, []string{d.scanAll(d.kc, batch[0])}
	}
	return d.doBatch(d.rc, "redis", batch), d.doBatch(d.kc, "kvs", batch)
}

func (d *differ) doBatch(c *rawConn, who string, batch [][]string) []string {
	var req []byte
	for _, cmd := range batch {
		req = append(req, encodeCommand(cmd...)...)
	}
	err := c.write(req)
	replies := make([]string, 0, len(batch))
	for err == nil && len(replies) < len(batch) {
		var v Value
		v, err = c.read()
		replies = append(replies, string(v.Raw))
	}
	if err != nil {
		d.t.Fatalf("%s: batch of %d, reply %d, to %s: %v (partial reply %q)\n%s%s", who, len(batch), len(replies),
			showCommand(batch[len(replies)-1]), err, replies[len(replies)-1], d.showHistory(), d.kvs.LogTail(20))
	}
	return replies
}

// scanAll follows the cursor to the end; an error reply on any page is
// returned as is. Duplicates are allowed by SCAN's contract and removed.
func (d *differ) scanAll(c *rawConn, cmd []string) string {
	args := slices.Clone(cmd)
	seen := map[string]bool{}
	for pages := 0; ; pages++ {
		raw := d.doBatch(c, "scan", [][]string{args})[0]
		v, _ := parseValue(raw)
		if v.Kind != '*' || len(v.Elems) != 2 || v.Elems[1].Kind != '*' {
			return raw
		}
		for _, e := range v.Elems[1].Elems {
			seen[e.Str] = true
		}
		if v.Elems[0].Str == "0" {
			break
		}
		if pages > 100000 {
			d.t.Fatalf("%s: SCAN did not finish after %d pages", showCommand(cmd), pages)
		}
		args[1] = v.Elems[0].Str
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return "SCAN keys: " + strings.Join(keys, " ")
}

func (d *differ) diverged(i int, cmd []string, ref, got string) {
	d.divergence++
	d.t.Errorf("divergence %d at op %d (resp%d):\n%s  > %s\n    redis: %q\n    kvs:   %q",
		d.divergence, i, d.proto, d.showHistory(cmd...), showCommand(cmd), ref, got)
	// Start again from an empty keyspace so later divergences are
	// independent of this one.
	for _, c := range []*rawConn{d.rc, d.kc} {
		c.Do("FLUSHALL")
	}
	d.history = nil
	d.limitsChanged = false
}

// showHistory lists the commands since the last flush that name a key of
// cmd (nil: all keys), and the last few whatever they name: enough to
// replay a divergence by hand without wading through thousands of lines.
func (d *differ) showHistory(cmd ...string) string {
	const recent = 10
	const limit = 60
	names := map[string]bool{}
	for _, a := range cmd {
		names[a] = true
	}
	var shown []diffStep
	for i, s := range d.history {
		relevant := len(cmd) == 0 || i >= len(d.history)-recent || !strings.EqualFold(s.cmd[0], "PING") && slices.ContainsFunc(s.cmd[1:], func(a string) bool { return names[a] }) ||
			strings.HasPrefix(strings.ToUpper(s.cmd[0]), "FLUSH")
		if relevant {
			shown = append(shown, s)
		}
	}
	omitted := len(d.history) - len(shown)
	if len(shown) > limit {
		omitted += len(shown) - limit
		shown = shown[len(shown)-limit:]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  %d commands since the last flush; %d not touching these keys are left out:\n", len(d.history), omitted)
	for _, s := range shown {
		fmt.Fprintf(&b, "  > %s\n    %q\n", showCommand(s.cmd), s.ref)
		if s.got != s.ref {
			fmt.Fprintf(&b, "    kvs (accepted): %q\n", s.got)
		}
	}
	return b.String()
}

// compareState checks that both servers hold the same keys, values and
// (within timing tolerance) expiries.
func (d *differ) compareState(when string) {
	d.t.Helper()
	ref, got := d.dump(d.rc), d.dump(d.kc)
	if len(ref) != len(got) {
		d.t.Errorf("keyspace %s: redis has %d keys %v, kvs %d keys %v\n%s", when, len(ref), keysOf(ref), len(got), keysOf(got), d.showHistory())
		return
	}
	for i := range ref {
		r, g := ref[i], got[i]
		if r.key != g.key || r.value != g.value || !withinTolerance(r.pttl, g.pttl, pttlTolerance) {
			d.t.Errorf("keyspace %s differs: redis %+v, kvs %+v\n%s", when, r, g, d.showHistory())
			return
		}
	}
}

type keyState struct {
	key, value string
	pttl       int64
}

func keysOf(s []keyState) []string {
	ks := make([]string, len(s))
	for i, k := range s {
		ks[i] = k.key
	}
	return ks
}

func (d *differ) dump(c *rawConn) []keyState {
	var out []keyState
	for db := range max(d.dbs, 1) {
		if d.dbs > 1 {
			if v := c.Do("SELECT", strconv.Itoa(db)); v.Str != "OK" {
				d.t.Fatalf("SELECT %d: %s", db, v)
			}
		}
		out = append(out, d.dumpDB(c, db)...)
	}
	if d.dbs > 1 {
		if v := c.Do("SELECT", strconv.Itoa(d.db)); v.Str != "OK" {
			d.t.Fatalf("SELECT %d: %s", d.db, v)
		}
	}
	return out
}

// dumpDB is dump of the selected database, db.
func (d *differ) dumpDB(c *rawConn, db int) []keyState {
	keys := c.Do("KEYS", "*")
	var out []keyState
	for _, k := range keys.Elems {
		typ := c.Do("TYPE", k.Str).Str
		value := typ + ":"
		if dt := diffTypeByName(typ); dt != nil {
			value += dt.dump(c, k.Str)
		} else {
			value += c.Do("GET", k.Str).Str
		}
		key := k.Str
		if db != 0 {
			key = strconv.Itoa(db) + ":" + key
		}
		out = append(out, keyState{
			key:   key,
			value: value,
			pttl:  atoi64(c.Do("PTTL", k.Str).Str),
		})
	}
	slices.SortFunc(out, func(a, b keyState) int { return strings.Compare(a.key, b.key) })
	return out
}

// Tolerances for replies that depend on each server's clock: both compute
// a deadline from their own "now" a moment apart, and report time left
// from their own "now" again.
const (
	ttlTolerance  = 2    // seconds
	pttlTolerance = 2000 // milliseconds
)

// sameReply reports whether two replies to cmd are equivalent. Apart from
// exact equality it allows only what differs legitimately between two
// correct servers: KEYS order, which key RANDOMKEY picks, and time left or
// deadlines computed from slightly different clocks.
func sameReply(cmd []string, ref, got string) bool {
	if ref == got {
		return true
	}
	rv, err1 := parseValue(ref)
	gv, err2 := parseValue(got)
	if err1 != nil || err2 != nil {
		return false
	}
	name := strings.ToUpper(cmd[0])
	for _, dt := range diffTypes {
		if dt.sameKinds != nil {
			if equal, handled := dt.sameKinds(cmd, rv, gv); handled {
				return equal
			}
		}
	}
	if rv.Kind != gv.Kind {
		return false
	}
	for _, dt := range diffTypes {
		if dt.same != nil {
			if equal, handled := dt.same(cmd, rv, gv); handled {
				return equal
			}
		}
		switch dt.unordered[name] {
		case "pairs":
			return slices.Equal(sortedPairs(rv.Elems), sortedPairs(gv.Elems))
		case "elems":
			return slices.Equal(sortedRaw(rv.Elems), sortedRaw(gv.Elems))
		}
	}
	switch name {
	case "KEYS":
		return slices.Equal(sortedStrs(rv.Elems), sortedStrs(gv.Elems))
	case "RANDOMKEY":
		return rv.Null == gv.Null
	case "TTL", "EXPIRETIME":
		return rv.Kind == ':' && withinTolerance(atoi64(rv.Str), atoi64(gv.Str), ttlTolerance)
	case "PTTL", "PEXPIRETIME":
		return rv.Kind == ':' && withinTolerance(atoi64(rv.Str), atoi64(gv.Str), pttlTolerance)
	}
	return false
}

// withinTolerance: negative values (-1 no expiry, -2 no key) must match
// exactly; time left or deadlines may differ by tol.
func withinTolerance(a, b, tol int64) bool {
	if a < 0 || b < 0 {
		return a == b
	}
	return a-b <= tol && b-a <= tol
}

// sortedRaw is the elements' raw bytes, sorted: a multiset that keeps each
// element's type (bulk or double, nested arrays and all).
func sortedRaw(vs []Value) []string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v.Raw)
	}
	slices.Sort(s)
	return s
}

// sortedPairs is sortedRaw of consecutive pairs (a map's or a flat
// field-value array's entries); an odd element count never matches.
func sortedPairs(vs []Value) []string {
	if len(vs)%2 != 0 {
		return []string{"odd"}
	}
	s := make([]string, 0, len(vs)/2)
	for i := 0; i < len(vs); i += 2 {
		s = append(s, string(vs[i].Raw)+string(vs[i+1].Raw))
	}
	slices.Sort(s)
	return s
}

func sortedStrs(vs []Value) []string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = v.Str
	}
	slices.Sort(s)
	return s
}

// parseValue parses one complete raw reply.
func parseValue(raw string) (Value, error) {
	v, err := readValue(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		return v, err
	}
	if len(v.Raw) != len(raw) {
		return v, fmt.Errorf("trailing bytes after reply: %q", raw[len(v.Raw):])
	}
	return v, nil
}

// TestNoteLimits: only a CONFIG SET that changes an encoding threshold
// (under either of its names, in any unit) counts as a change.
func TestNoteLimits(t *testing.T) {
	d := &differ{limits: map[string]int64{"hash-max-listpack-value": 64, "list-max-listpack-size": -2}}
	for _, c := range []struct {
		cmd  string
		want bool
	}{
		{"CONFIG SET hash-max-ziplist-value 64", false},
		{"CONFIG SET hash-max-listpack-value 1kb", true},
		{"CONFIG SET hash-max-ziplist-value 1024", false},
		{"CONFIG SET maxmemory-samples 3 list-max-ziplist-size -2", false},
		{"CONFIG SET list-max-listpack-size 4", true},
		{"CONFIG SET zset-max-ziplist-entries 128", true}, // not read yet
		{"CONFIG SET zset-max-listpack-entries 128", false},
	} {
		if got := d.noteLimits(strings.Fields(c.cmd)); got != c.want {
			t.Errorf("%s: changed %v, want %v", c.cmd, got, c.want)
		}
	}
}
