package test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestACLCategories compares, for every command kvs and redis-server
// both have, COMMAND INFO's ACL categories, and ACL CAT's list of every
// category restricted to those commands.
func TestACLCategories(t *testing.T) {
	requireRedis(t)
	t.Parallel()
	ref, kvs := startRedis(t), startKVS(t, KVSOptions{})
	rc, kc := dialRaw(t, ref.Addr), dialRaw(t, kvs.Addr)
	names := func(c *rawConn, args ...string) []string {
		var out []string
		for _, e := range c.Do(args...).Elems {
			out = append(out, e.Str)
		}
		return out
	}
	kvsCmds := names(kc, "COMMAND", "LIST")
	redisCmds := names(rc, "COMMAND", "LIST")
	both := map[string]bool{}
	for _, name := range kvsCmds {
		if slices.Contains(redisCmds, name) {
			both[name] = true
		}
	}
	if len(both) < 150 {
		t.Fatalf("only %d commands in common: COMMAND LIST is broken", len(both))
	}
	for name := range both {
		r, k := rc.Do("COMMAND", "INFO", name).Elems[0], kc.Do("COMMAND", "INFO", name).Elems[0]
		if len(r.Elems) < 7 || len(k.Elems) < 7 {
			t.Fatalf("COMMAND INFO %s: redis %s, kvs %s", name, r, k)
		}
		if got, want := string(k.Elems[6].Raw), string(r.Elems[6].Raw); got != want {
			t.Errorf("COMMAND INFO %s categories: kvs %q, redis %q", name, got, want)
		}
	}
	// Subcommands Redis 7.0 lacks (CLUSTER MIGRATESLOTS, kvs answers
	// Valkey's) are left out of kvs's lists.
	inRedis := map[string]bool{}
	for _, cat := range names(rc, "ACL", "CAT") {
		for _, name := range names(rc, "ACL", "CAT", cat) {
			inRedis[name] = true
		}
	}
	for _, cat := range names(rc, "ACL", "CAT") {
		var want []string
		for _, name := range names(rc, "ACL", "CAT", cat) {
			top, _, _ := strings.Cut(name, "|")
			if both[top] {
				want = append(want, name)
			}
		}
		var got []string
		for _, name := range names(kc, "ACL", "CAT", cat) {
			top, _, _ := strings.Cut(name, "|")
			if both[top] && (inRedis[name] || !strings.Contains(name, "|")) {
				got = append(got, name)
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("ACL CAT %s: kvs %v, redis %v", cat, got, want)
		}
	}
}

// TestACLGoRedis: go-redis's Username/Password and Password options log
// in (HELLO 3 AUTH, AUTH), in memory and durable mode; wrong ones fail
// with Redis's error.
func TestACLGoRedis(t *testing.T) {
	t.Parallel()
	for _, opts := range []KVSOptions{{}, {Durable: true}} {
		n := startKVS(t, KVSOptions{Durable: opts.Durable, Extra: []string{"--requirepass", "s3cret"}})
		ctx := testCtx(t)
		if err := newClient(t, n, nil).Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH ") {
			t.Fatalf("%s: PING without a password: %v", n.Name, err)
		}
		admin := newClient(t, n, func(o *redis.Options) { o.Password = "s3cret" })
		if err := admin.Do(ctx, "ACL", "SETUSER", "app", "on", ">apppw", "~app:*", "+@all", "-flushall").Err(); err != nil {
			t.Fatalf("%s: ACL SETUSER: %v", n.Name, err)
		}
		for _, proto := range []int{2, 3} {
			c := newClient(t, n, func(o *redis.Options) { o.Username, o.Password, o.Protocol = "app", "apppw", proto })
			if err := c.Set(ctx, "app:k", "v", 0).Err(); err != nil {
				t.Fatalf("%s RESP%d: SET as app: %v", n.Name, proto, err)
			}
			if who, err := c.Do(ctx, "ACL", "WHOAMI").Text(); err != nil || who != "app" {
				t.Fatalf("%s RESP%d: WHOAMI %q %v", n.Name, proto, who, err)
			}
			if err := c.Set(ctx, "other", "v", 0).Err(); err == nil || !strings.Contains(err.Error(), "no permissions to access one of the keys") {
				t.Fatalf("%s RESP%d: SET outside app:*: %v", n.Name, proto, err)
			}
			if err := c.FlushAll(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM ") {
				t.Fatalf("%s RESP%d: FLUSHALL: %v", n.Name, proto, err)
			}
		}
		bad := newClient(t, n, func(o *redis.Options) { o.Username, o.Password = "app", "nope" })
		if err := bad.Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS ") {
			t.Fatalf("%s: wrong password: %v", n.Name, err)
		}
	}
}

// TestACLDurableRestart: users and the password are in the log, and a
// restart (and a compaction) keeps them; --requirepass seeds only a new
// data dir, so a password changed since wins over the flag.
func TestACLDurableRestart(t *testing.T) {
	t.Parallel()
	n := newKVS(t, "kvs-durable", KVSOptions{Durable: true, Extra: []string{"--requirepass", "first", "--wal-compact-bytes", "4096"}})
	n.Start()
	ctx := testCtx(t)
	c := newClient(t, n, func(o *redis.Options) { o.Password = "first" })
	for _, cmd := range [][]any{
		{"ACL", "SETUSER", "app", "on", ">apppw", "~app:*", "+@all"},
		{"CONFIG", "SET", "requirepass", "second"},
	} {
		if err := c.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	c2 := newClient(t, n, func(o *redis.Options) { o.Password = "second" })
	for i := range 200 { // enough log for a compaction
		if err := c2.Set(ctx, fmt.Sprintf("k%d", i), strings.Repeat("v", 64), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	n.Restart()
	if err := newClient(t, n, func(o *redis.Options) { o.Password = "first" }).Ping(ctx).Err(); err == nil {
		t.Fatal("the --requirepass of the first start came back after a restart")
	}
	if err := newClient(t, n, func(o *redis.Options) { o.Password = "second" }).Ping(ctx).Err(); err != nil {
		t.Fatalf("the password set by CONFIG SET: %v", err)
	}
	app := newClient(t, n, func(o *redis.Options) { o.Username, o.Password = "app", "apppw" })
	if err := app.Set(ctx, "app:x", "1", 0).Err(); err != nil {
		t.Fatalf("user app after restart: %v", err)
	}
}

// TestACLFile: --aclfile seeds the users; ACL SAVE writes them in Redis's
// format and ACL LOAD reads them back, all or nothing.
func TestACLFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "users.acl")
	if err := os.WriteFile(file, []byte("user default on nopass ~* &* +@all\n\nuser app on >apppw ~app:* -@all +get +set\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startKVS(t, KVSOptions{Durable: true, Extra: []string{"--aclfile", file}})
	c := dialRaw(t, n.Addr)
	if v := c.Do("ACL", "GETUSER", "app"); v.IsError() || v.Null {
		t.Fatalf("user from --aclfile: %s", v)
	}
	if v := c.Do("ACL", "SETUSER", "ops", "on", ">opspw", "+@admin"); v.Str != "OK" {
		t.Fatalf("SETUSER: %s", v)
	}
	before := c.Do("ACL", "LIST")
	if v := c.Do("ACL", "SAVE"); v.Str != "OK" {
		t.Fatalf("ACL SAVE: %s", v)
	}
	saved, _ := os.ReadFile(file)
	var want []string
	for _, e := range before.Elems {
		want = append(want, e.Str)
	}
	if got := strings.Split(strings.TrimSuffix(string(saved), "\n"), "\n"); !slices.Equal(got, want) {
		t.Fatalf("saved file:\n%s\nACL LIST:\n%s", saved, strings.Join(want, "\n"))
	}
	if v := c.Do("ACL", "DELUSER", "ops", "app"); v.Str != "2" {
		t.Fatalf("DELUSER: %s", v)
	}
	if v := c.Do("ACL", "LOAD"); v.Str != "OK" {
		t.Fatalf("ACL LOAD: %s", v)
	}
	if after := c.Do("ACL", "LIST"); string(after.Raw) != string(before.Raw) {
		t.Fatalf("after LOAD: %s, want %s", after, before)
	}
	// A bad file changes nothing, and says where it is bad.
	os.WriteFile(file, []byte("user app on +nosuchcommand\nnot a user line\n"), 0o600)
	v := c.Do("ACL", "LOAD")
	if !v.IsError() || !strings.Contains(v.Str, "users.acl:1: Error in applying operation '+nosuchcommand'") ||
		!strings.Contains(v.Str, "users.acl:2 should start with user keyword") {
		t.Fatalf("ACL LOAD of a bad file: %s", v)
	}
	if after := c.Do("ACL", "LIST"); string(after.Raw) != string(before.Raw) {
		t.Fatalf("a failed LOAD changed the users: %s", after)
	}
}

// TestACLLogAndDisconnect: denials and failed logins are in ACL LOG with
// Redis's fields; deleting a user closes its connections.
func TestACLLogAndDisconnect(t *testing.T) {
	t.Parallel()
	n := startKVS(t, KVSOptions{})
	admin := dialRaw(t, n.Addr)
	admin.Do("ACL", "SETUSER", "app", "on", ">pw", "~app:*", "-@all", "+get")
	u := dialRaw(t, n.Addr)
	u.Do("AUTH", "app", "wrong")
	u.Do("AUTH", "app", "pw")
	u.Do("SET", "app:1", "x")
	u.Do("GET", "zz")
	u.Do("GET", "zz")
	log := admin.Do("ACL", "LOG")
	if len(log.Elems) != 3 {
		t.Fatalf("ACL LOG has %d entries, want 3: %s", len(log.Elems), log)
	}
	type entry map[string]string
	var entries []entry
	for _, e := range log.Elems {
		m := entry{}
		for i := 0; i+1 < len(e.Elems); i += 2 {
			m[e.Elems[i].Str] = e.Elems[i+1].Str
		}
		entries = append(entries, m)
	}
	for i, want := range []entry{
		{"count": "2", "reason": "key", "context": "toplevel", "object": "zz", "username": "app", "entry-id": "2"},
		{"count": "1", "reason": "command", "context": "toplevel", "object": "set", "username": "app", "entry-id": "1"},
		{"count": "1", "reason": "auth", "context": "toplevel", "object": "AUTH", "username": "app", "entry-id": "0"},
	} {
		for k, v := range want {
			if entries[i][k] != v {
				t.Errorf("entry %d: %s = %q, want %q (%v)", i, k, entries[i][k], v, entries[i])
			}
		}
		if !strings.Contains(entries[i]["client-info"], "user=") || entries[i]["age-seconds"] == "" {
			t.Errorf("entry %d lacks client-info or age-seconds: %v", i, entries[i])
		}
		// Redis 7.2's fields: made no later than last updated, both in
		// Unix milliseconds of this run.
		created, updated := atoi64(entries[i]["timestamp-created"]), atoi64(entries[i]["timestamp-last-updated"])
		if since := time.Now().Add(-time.Hour).UnixMilli(); created < since || updated < created {
			t.Errorf("entry %d: timestamp-created %d, timestamp-last-updated %d", i, created, updated)
		}
	}
	if v := admin.Do("ACL", "LOG", "1"); len(v.Elems) != 1 {
		t.Errorf("ACL LOG 1: %s", v)
	}
	if v := admin.Do("ACL", "DELUSER", "app"); v.Str != "1" {
		t.Fatalf("DELUSER: %s", v)
	}
	if _, err := u.do("GET", "app:1"); err == nil {
		t.Fatal("a connection of a deleted user was answered")
	}
	var ue interface{ Timeout() bool }
	if _, err := u.read(); errors.As(err, &ue) && ue.Timeout() {
		t.Fatal("the connection of a deleted user stayed open")
	}
}

// TestACLCluster: users and the password are cluster state. A user made on
// the leader can log in on every follower; a follower refuses a write of a
// key the user may only read, and forwards one it may write; a new node
// joins only with the password and gets the users; after every node has
// snapshotted past the ACL change, a restart of every node (each restoring
// from its snapshot) keeps them.
func TestACLCluster(t *testing.T) {
	t.Parallel()
	const pw = "clusterpw"
	small := []string{"--raft-snapshot-entries", "64", "--raft-trailing-logs", "16", "--raft-snapshot-interval", "100ms",
		"--masterauth", pw}
	nodes := startCluster(t, 3, small...)
	leader := waitLeader(t, nodes)
	ctx := testCtx(t)
	if err := newClient(t, leader, nil).ConfigSet(ctx, "requirepass", pw).Err(); err != nil {
		t.Fatalf("CONFIG SET requirepass: %v", err)
	}
	for _, n := range nodes {
		n.Password = pw
	}
	admin := newClient(t, leader, func(o *redis.Options) { o.Password = pw })
	if err := admin.Do(ctx, "ACL", "SETUSER", "app", "on", ">apppw", "~app:*", "%R~ro:*", "+@all").Err(); err != nil {
		t.Fatalf("ACL SETUSER on the leader: %v", err)
	}
	checkApp := func(n *Node) error {
		c := newClient(t, n, func(o *redis.Options) { o.Username, o.Password, o.MaxRetries = "app", "apppw", -1 })
		defer c.Close()
		if err := c.Set(ctx, "app:"+n.Name, n.Name, 0).Err(); err != nil {
			return fmt.Errorf("%s: SET app:%s: %v", n.Name, n.Name, err)
		}
		if err := c.Set(ctx, "ro:"+n.Name, "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			return fmt.Errorf("%s: SET of a read-only key: %v", n.Name, err)
		}
		if err := c.Get(ctx, "ro:"+n.Name).Err(); err != redis.Nil {
			return fmt.Errorf("%s: GET of a read-only key: %v", n.Name, err)
		}
		return nil
	}
	for _, n := range nodes {
		waitFor(t, "user app on "+n.Name, func() error { return checkApp(n) })
	}
	if err := newClient(t, followers(nodes, leader)[0], nil).Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH ") {
		t.Fatalf("a follower without the password: %v", err)
	}

	// A new node joins with the password only.
	fresh := newClusterNode(t, "n4", small...)
	fresh.Password = pw
	fresh.Start()
	if out, code := runKVS(t, clusterWait, "join", "--timeout", "2s", leader.Addr, fresh.Addr); code == 0 {
		t.Fatalf("kvs join without the password succeeded:\n%s", out)
	}
	// Writes until every member has taken a snapshot, and so cut the
	// start of its log, where ACL SETUSER is.
	i := 0
	snapshotted := func(nodes []*Node) func() error {
		return func() error {
			for range 50 {
				if err := retryLeaderChange(t, func() error { return admin.Set(ctx, fmt.Sprintf("s%d", i), i, 0).Err() }); err != nil {
					return err
				}
				i++
			}
			for _, n := range nodes {
				if !hasSnapshot(n) {
					return fmt.Errorf("%s has no snapshot yet", n.Name)
				}
			}
			return nil
		}
	}
	waitFor(t, "a snapshot on every member", snapshotted(nodes))
	if out, code := runKVS(t, clusterWait, "join", "--password", pw, leader.Addr, fresh.Addr); code != 0 {
		t.Fatalf("kvs join --password: exit %d\n%s", code, out)
	}
	nodes = append(nodes, fresh)
	waitMembers(t, nodes, 4)
	waitFor(t, "user app on the new node", func() error { return checkApp(fresh) })
	// Whether raft sends the newcomer a snapshot or entries is raft's
	// choice; after the restarts below every node restores its users from
	// a snapshot of its own.
	waitFor(t, "a snapshot on every node", snapshotted(nodes))

	for _, n := range nodes {
		n.Stop()
	}
	for _, n := range nodes {
		n.Start()
	}
	waitMembers(t, nodes, 4)
	for _, n := range nodes {
		waitFor(t, "user app on "+n.Name+" after restarts", func() error { return checkApp(n) })
	}
}

// TestACLClusterRequirePass: --requirepass seeds a new cluster's default
// user on every node; `kvs join` needs --password, which the joining node
// then shares with the others through the log.
func TestACLClusterRequirePass(t *testing.T) {
	t.Parallel()
	const pw = "seeded"
	n1 := newClusterNode(t, "n1", "--bootstrap", "--requirepass", pw)
	n2 := newClusterNode(t, "n2", "--requirepass", pw)
	nodes := []*Node{n1, n2}
	for _, n := range nodes {
		n.Password = pw
		n.Start()
	}
	ctx := testCtx(t)
	waitFor(t, "the seeded password on n1", func() error {
		if err := newClient(t, n1, nil).Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH ") {
			return fmt.Errorf("PING without a password: %v", err)
		}
		return nil
	})
	if out, code := runKVS(t, clusterWait, "join", "--password", pw, n1.Addr, n2.Addr); code != 0 {
		t.Fatalf("kvs join --password: exit %d\n%s", code, out)
	}
	waitMembers(t, nodes, 2)
	leader := waitLeader(t, nodes)
	c := newClient(t, leader, func(o *redis.Options) { o.Password = pw })
	if err := c.Do(ctx, "ACL", "SETUSER", "app", "on", ">apppw", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		waitFor(t, "user app on "+n.Name, func() error {
			return newClient(t, n, func(o *redis.Options) { o.Username, o.Password = "app", "apppw" }).Set(ctx, "k", n.Name, 0).Err()
		})
	}
}

// hasSnapshot reports whether n's raft snapshot store holds a complete
// snapshot (not one still being written, in a .tmp directory).
func hasSnapshot(n *Node) bool {
	metas, _ := filepath.Glob(filepath.Join(n.DataDir(), "raft", "snapshots", "*", "meta.json"))
	for _, m := range metas {
		if !strings.HasSuffix(filepath.Dir(m), ".tmp") {
			return true
		}
	}
	return false
}

// TestUnauthenticatedEveryCommand is the attack of a client without the
// password trying every command kvs has: each, sent with as many
// arguments as its arity asks (a container with one of its subcommands),
// is refused with NOAUTH except the few Redis runs before AUTH (AUTH,
// HELLO, QUIT, RESET); with the wrong number, or an unknown subcommand,
// it gets Redis's arity or unknown-subcommand error, which Redis also
// answers before the password; EXEC refused ends its transaction, with
// EXECABORT. Nothing in the store changes, and the server serves on.
func TestUnauthenticatedEveryCommand(t *testing.T) {
	t.Parallel()
	for _, durable := range []bool{false, true} {
		n := startKVS(t, KVSOptions{Durable: durable, Extra: []string{"--requirepass", "s3cret"}})
		admin := dialRaw(t, n.Addr)
		if v := admin.Do("AUTH", "s3cret"); v.Str != "OK" {
			t.Fatalf("AUTH: %s", v)
		}
		admin.Do("SET", "kept", "1")
		infos := admin.Do("COMMAND", "INFO")
		if len(infos.Elems) < 150 {
			t.Fatalf("COMMAND INFO has %d commands", len(infos.Elems))
		}
		noAuth := map[string]bool{"auth": true, "hello": true, "quit": true, "reset": true}
		// A subcommand of each container, of arity 2.
		subs := map[string]string{"acl": "whoami", "client": "id", "cluster": "info", "config": "resetstat",
			"function": "stats", "latency": "latest", "memory": "help", "object": "help", "pubsub": "numpat",
			"script": "kill", "slowlog": "len", "xgroup": "help", "xinfo": "help"}
		// A refused EXEC says so with EXECABORT.
		abort := map[string]string{"exec": "-EXECABORT Transaction discarded because of: "}
		refusal := func(name, text string) string {
			if p := abort[name]; p != "" {
				return p + strings.TrimPrefix(text, "ERR ") + "\r\n"
			}
			return "-" + text + "\r\n"
		}
		for _, info := range infos.Elems {
			if len(info.Elems) < 2 {
				t.Fatalf("COMMAND INFO entry %q", info.Raw)
			}
			name := info.Elems[0].Str
			arity, err := strconv.Atoi(info.Elems[1].Str)
			if err != nil {
				t.Fatalf("%s's arity %q", name, info.Elems[1].Raw)
			}
			if noAuth[name] {
				continue
			}
			args := []string{name}
			if sub, ok := subs[name]; ok {
				args, arity = append(args, sub), 2
			}
			for len(args) < max(arity, -arity) {
				args = append(args, "kept")
			}
			// A fresh connection per command, so that none can spoil
			// the next.
			c := dialRaw(t, n.Addr)
			want := refusal(name, "NOAUTH Authentication required.")
			if name == "debug" {
				// Redis refuses a protected command it does not allow
				// before it asks for authentication (processCommand).
				want = "-" + errDebugNotAllowed + "\r\n"
			}
			if v := c.Do(args...); string(v.Raw) != want {
				t.Errorf("%q without AUTH: %q", args, v.Raw)
			}
			if _, ok := subs[name]; ok {
				want := "-ERR unknown subcommand 'kept'. Try " + strings.ToUpper(name) + " HELP.\r\n"
				if v := c.Do(name, "kept"); string(v.Raw) != want {
					t.Errorf("%q kept without AUTH: %q, want %q", name, v.Raw, want)
				}
			}
			if arity > 0 {
				wrong := append(args, "extra")
				full := name
				if _, ok := subs[name]; ok {
					full = name + "|" + args[1]
				}
				want := refusal(name, "ERR wrong number of arguments for '"+full+"' command")
				if v := c.Do(wrong...); string(v.Raw) != want {
					t.Errorf("%q without AUTH: %q, want %q", wrong, v.Raw, want)
				}
			}
		}
		if v := admin.Do("DBSIZE"); string(v.Raw) != ":1\r\n" {
			t.Errorf("DBSIZE after the attack: %q", v.Raw)
		}
		if v := admin.Do("GET", "kept"); v.Str != "1" {
			t.Errorf("GET kept after the attack: %q", v.Raw)
		}
	}
}

// TestACLScriptReplay: the commands a script calls are checked as the
// user who called it, against the users as they stood at the script's
// place in the log. A denied call logs a "lua" entry in ACL LOG; after a
// kill -9 the durable log replays the script with the same refusals, even
// though the user was given the refused key afterwards.
func TestACLScriptReplay(t *testing.T) {
	t.Parallel()
	n := newKVS(t, "kvs-durable", KVSOptions{Durable: true})
	n.Start()
	ctx := testCtx(t)
	admin := newClient(t, n, nil)
	if err := admin.Do(ctx, "ACL", "SETUSER", "app", "on", ">pw", "~app:*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	app := newClient(t, n, func(o *redis.Options) { o.Username, o.Password = "app", "pw" })
	const script = `redis.call('set', KEYS[1], 'v')
local r = redis.pcall('set', 'x:1', 'v')
return {r['err'] or 'written', redis.call('get', KEYS[1])}`
	got, err := app.Eval(ctx, script, []string{"app:1"}).StringSlice()
	want := []string{"ERR The user executing the script can't access at least one of the keys mentioned in the command arguments", "v"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("EVAL = %q, %v; want %q", got, err, want)
	}
	log, err := admin.Do(ctx, "ACL", "LOG", "1").Slice()
	if err != nil || len(log) != 1 {
		t.Fatalf("ACL LOG 1 = %v, %v", log, err)
	}
	entry := fmt.Sprint(log[0])
	for _, f := range []string{"reason:key", "context:lua", "object:x:1", "username:app"} {
		if !strings.Contains(entry, f) {
			t.Errorf("ACL LOG entry lacks %s: %s", f, entry)
		}
	}
	if err := admin.Do(ctx, "ACL", "SETUSER", "app", "~x:*").Err(); err != nil {
		t.Fatal(err)
	}
	n.Kill()
	n.Start()
	admin = newClient(t, n, nil)
	if v, err := admin.Get(ctx, "app:1").Result(); err != nil || v != "v" {
		t.Fatalf("after the replay, app:1 = %q, %v", v, err)
	}
	if err := admin.Get(ctx, "x:1").Err(); err != redis.Nil {
		t.Fatalf("after the replay x:1 exists (%v): the script's refused call was written", err)
	}
	// With the rights it has now, the same script writes x:1.
	app = newClient(t, n, func(o *redis.Options) { o.Username, o.Password = "app", "pw" })
	if got, err := app.Eval(ctx, script, []string{"app:1"}).StringSlice(); err != nil || got[0] != "written" {
		t.Fatalf("EVAL with ~x:* = %q, %v", got, err)
	}
}

// errDebugNotAllowed is redis-server 7's refusal of DEBUG while
// enable-debug-command is no.
const errDebugNotAllowed = `ERR DEBUG command not allowed. If the enable-debug-command option is set to "local", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.`
