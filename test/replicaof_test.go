package test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// replInfo reads n's INFO replication as a map.
func replInfo(ctx context.Context, c *redis.Client) (map[string]string, error) {
	s, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(s, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

// replicaWorkload writes to the master until stop is closed: strings,
// counters, hashes, lists, TTLs and deletions. It returns the strings the
// master acknowledged, by key, and the counter's last value.
func replicaWorkload(ctx context.Context, m *redis.Client, stop <-chan struct{}) (map[string]string, error) {
	acked := map[string]string{}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return acked, nil
		default:
		}
		k := "w:" + strconv.Itoa(i%500)
		v := strconv.Itoa(i)
		p := m.Pipeline()
		p.Set(ctx, k, v, 0)
		p.Incr(ctx, "counter")
		p.HSet(ctx, "h:"+strconv.Itoa(i%50), "f"+strconv.Itoa(i%7), v)
		p.RPush(ctx, "list", v)
		if i%10 == 0 {
			p.Expire(ctx, k, time.Hour)
		}
		if i%13 == 0 {
			p.Del(ctx, "w:"+strconv.Itoa((i+250)%500))
		}
		cmds, err := p.Exec(ctx)
		if err != nil {
			return acked, err
		}
		acked[k] = v
		if i%13 == 0 && cmds[len(cmds)-1].Err() == nil {
			delete(acked, "w:"+strconv.Itoa((i+250)%500))
		}
	}
}

// checkReplicated waits until kvs's offset reaches the master's, then
// compares the keyspaces: every key, its type, its value (by DUMP's
// value through a comparison per type) and whether it has a TTL.
func checkReplicated(t *testing.T, ctx context.Context, m, k *redis.Client, acked map[string]string) {
	t.Helper()
	waitFor(t, "kvs's offset to reach the master's", func() error {
		mi, err := replInfo(ctx, m)
		if err != nil {
			return err
		}
		ki, err := replInfo(ctx, k)
		if err != nil {
			return err
		}
		if ki["master_link_status"] != "up" || ki["slave_repl_offset"] != mi["master_repl_offset"] {
			return fmt.Errorf("master at %s; kvs at %s (link %s)", mi["master_repl_offset"], ki["slave_repl_offset"], ki["master_link_status"])
		}
		return nil
	})
	keys, err := m.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := k.DBSize(ctx).Result(); err != nil || n != int64(len(keys)) {
		t.Fatalf("kvs DBSIZE = %d, %v; the master has %d keys", n, err, len(keys))
	}
	for _, key := range keys {
		typ := m.Type(ctx, key).Val()
		if got := k.Type(ctx, key).Val(); got != typ {
			t.Fatalf("%s: type %s in kvs; %s in the master", key, got, typ)
		}
		var want, got any
		switch typ {
		case "string":
			want, got = m.Get(ctx, key).Val(), k.Get(ctx, key).Val()
		case "hash":
			want, got = m.HGetAll(ctx, key).Val(), k.HGetAll(ctx, key).Val()
		case "list":
			want, got = m.LRange(ctx, key, 0, -1).Val(), k.LRange(ctx, key, 0, -1).Val()
		case "set":
			want, got = len(m.SMembers(ctx, key).Val()), len(k.SMembers(ctx, key).Val())
		case "zset":
			want, got = m.ZRangeWithScores(ctx, key, 0, -1).Val(), k.ZRangeWithScores(ctx, key, 0, -1).Val()
		}
		if fmt.Sprint(want) != fmt.Sprint(got) {
			t.Fatalf("%s: %v in kvs; %v in the master", key, got, want)
		}
		if wt, gt := m.TTL(ctx, key).Val() > 0, k.TTL(ctx, key).Val() > 0; wt != gt {
			t.Fatalf("%s: kvs has a TTL %v; the master %v", key, gt, wt)
		}
	}
	for key, v := range acked {
		if got, err := k.Get(ctx, key).Result(); err != nil || got != v {
			t.Fatalf("%s: %q, %v in kvs; the master acknowledged %q", key, got, err, v)
		}
	}
}

// TestReplicaOf: kvs started with --replicaof (and --masterauth) syncs
// from a redis-server under write load, through its RDB's diskless form,
// refuses client writes with READONLY meanwhile, and once the writer
// stops and its offset reaches the master's, holds every key the master
// acknowledged; REPLICAOF NO ONE makes it a master that takes writes.
// Linked again (REPLICAOF at run time) with a disk-based sync, the $len
// form, it starts over from the master's data. A kvs node of several
// groups replicates the same way.
func TestReplicaOf(t *testing.T) {
	t.Parallel()
	master := newRedis(t, "master", "--requirepass", "secret", "--repl-diskless-sync-delay", "0")
	master.Password = "secret"
	master.Start()
	ctx := testCtx(t)
	m := redis.NewClient(&redis.Options{Addr: master.Addr, Password: "secret"})
	defer m.Close()
	// Data before the sync, with types and TTLs the RDB carries.
	for i := range 300 {
		m.Set(ctx, "pre:"+strconv.Itoa(i), strings.Repeat("x", i), 0)
	}
	m.Set(ctx, "ttl", "v", time.Hour)
	m.SAdd(ctx, "set", 1, 2, 3, "a")
	m.ZAdd(ctx, "zset", redis.Z{Score: 1.5, Member: "m"}, redis.Z{Score: 2, Member: "n"})
	m.HSet(ctx, "bighash", bigFields(300)...)

	host, port, _ := net.SplitHostPort(master.Addr)
	// A redis-server replica of the same master: INFO replication's
	// fields, in order, are what kvs's must be.
	rr := newRedis(t, "redis-replica", "--replicaof", host, port, "--masterauth", "secret")
	rr.Start()
	rc := redis.NewClient(&redis.Options{Addr: rr.Addr})
	defer rc.Close()
	var wantFields string
	waitFor(t, "the redis-server replica's link", func() error {
		s, err := rc.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(s, "master_link_status:up") {
			return fmt.Errorf("link down")
		}
		wantFields = infoFieldNames(s)
		return nil
	})
	for _, mode := range []string{"durable", "sharded"} {
		t.Run(mode, func(t *testing.T) {
			var n *Node
			if mode == "durable" {
				n = newKVS(t, "kvs-replica", KVSOptions{Durable: true, Extra: []string{"--replicaof", host, port, "--masterauth", "secret"}})
				n.Start()
			} else {
				n = startShardedNode(t, 3)
			}
			k := redis.NewClient(&redis.Options{Addr: n.Addr})
			defer k.Close()
			if mode == "sharded" {
				if err := k.ConfigSet(ctx, "masterauth", "secret").Err(); err != nil {
					t.Fatal(err)
				}
				if err := k.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
					t.Fatal(err)
				}
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var acked map[string]string
			var werr error
			wg.Add(1)
			go func() {
				defer wg.Done()
				acked, werr = replicaWorkload(ctx, m, stop)
			}()
			waitFor(t, "the link to come up", func() error {
				ki, err := replInfo(ctx, k)
				if err != nil {
					return err
				}
				if ki["role"] != "slave" || ki["master_link_status"] != "up" {
					return fmt.Errorf("role %s, link %s", ki["role"], ki["master_link_status"])
				}
				return nil
			})
			if s, err := k.Info(ctx, "replication").Result(); err != nil || infoFieldNames(s) != wantFields {
				t.Fatalf("INFO replication's fields: %s, %v\nwant %s", infoFieldNames(s), err, wantFields)
			}
			if v, err := k.Do(ctx, "ROLE").Slice(); err != nil || len(v) != 5 || fmt.Sprint(v[:4]) != fmt.Sprintf("[slave %s %s connected]", host, port) {
				t.Fatalf("ROLE = %v, %v; want slave %s %s connected", v, err, host, port)
			}
			// A write to another database of the master's goes to kvs's
			// database 9; a node of several groups has database 0 alone
			// and skips it (checkReplicated's DBSIZE of database 0 holds
			// either way).
			m9 := redis.NewClient(&redis.Options{Addr: master.Addr, Password: "secret", DB: 9})
			defer m9.Close()
			if err := m9.Set(ctx, "db9", "1", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if mode == "durable" {
				k9 := redis.NewClient(&redis.Options{Addr: n.Addr, DB: 9})
				defer k9.Close()
				waitFor(t, "db 9's key", func() error {
					if v, err := k9.Get(ctx, "db9").Result(); err != nil || v != "1" {
						return fmt.Errorf("GET db9 in db 9: %q, %v", v, err)
					}
					return nil
				})
			}
			if err := k.Set(ctx, "x", "1", 0).Err(); err == nil || err.Error() != "READONLY You can't write against a read only replica." {
				t.Fatalf("SET on the replica: %v; want READONLY", err)
			}
			if err := k.Eval(ctx, "return redis.call('set', KEYS[1], '1')", []string{"x"}).Err(); err == nil || !strings.HasPrefix(err.Error(), "READONLY ") {
				t.Fatalf("a script that may write, on the replica: %v; want READONLY", err)
			}
			if v, err := k.EvalRO(ctx, "return redis.call('exists', KEYS[1])", []string{"pre:1"}).Result(); err != nil || v != int64(1) {
				t.Fatalf("EVAL_RO on the replica: %v, %v; want 1", v, err)
			}
			if v, err := k.ConfigGet(ctx, "replicaof").Result(); err != nil || v["replicaof"] != host+" "+port {
				t.Fatalf("CONFIG GET replicaof = %v, %v", v, err)
			}
			// Let the stream carry writes for a while.
			waitFor(t, "writes to stream", func() error {
				if n, _ := k.LLen(ctx, "list").Result(); n < 2000 {
					return fmt.Errorf("%d elements so far", n)
				}
				return nil
			})
			close(stop)
			wg.Wait()
			if werr != nil {
				t.Fatal(werr)
			}
			checkReplicated(t, ctx, m, k, acked)
			// The master's WAIT asks its replicas with REPLCONF GETACK:
			// kvs's acknowledgement counts, as the redis-server
			// replica's does.
			m.Set(ctx, "waited", "1", 0)
			if v, err := m.Do(ctx, "WAIT", "2", "10000").Result(); err != nil || v != int64(2) {
				t.Fatalf("WAIT 2 on the master = %v, %v; want 2 (kvs and the redis-server replica)", v, err)
			}
			if v, err := k.Get(ctx, "waited").Result(); err != nil || v != "1" {
				t.Fatalf("after the master's WAIT: GET = %q, %v; want 1", v, err)
			}
			if v, err := k.Do(ctx, "REPLICAOF", "NO", "ONE").Result(); err != nil || v != "OK" {
				t.Fatalf("REPLICAOF NO ONE: %v, %v", v, err)
			}
			if ki, err := replInfo(ctx, k); err != nil || ki["role"] != "master" {
				t.Fatalf("INFO replication after NO ONE: %v, %v", ki, err)
			}
			if err := k.Set(ctx, "mine", "1", 0).Err(); err != nil {
				t.Fatalf("SET after REPLICAOF NO ONE: %v", err)
			}

			// Again, with the file sent with its length.
			if err := m.ConfigSet(ctx, "repl-diskless-sync", "no").Err(); err != nil {
				t.Fatal(err)
			}
			defer m.ConfigSet(ctx, "repl-diskless-sync", "yes")
			m.Set(ctx, "later", "1", 0)
			if err := k.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
				t.Fatal(err)
			}
			checkReplicated(t, ctx, m, k, acked)
			if n, _ := k.Exists(ctx, "mine").Result(); n != 0 {
				t.Fatal("a key written while kvs was a master outlived the new full sync")
			}
			if err := k.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func bigFields(n int) []any {
	var out []any
	for i := range n {
		out = append(out, "f"+strconv.Itoa(i), strconv.Itoa(i))
	}
	return out
}

// infoFieldNames is the names of an INFO section's fields, in order.
func infoFieldNames(s string) string {
	var names []string
	for _, line := range strings.Split(s, "\r\n") {
		if name, _, ok := strings.Cut(line, ":"); ok {
			names = append(names, name)
		}
	}
	return strings.Join(names, " ")
}
