package test

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestReplicaOfDatabases: kvs as the replica of a redis-server whose data
// is in several databases. The full sync loads each key into its
// database; the stream's SELECT switches the database of the writes
// after it, so writes to databases 0 and 5 under load land in their own
// (the same key names in both, different values), a FLUSHDB of database
// 7 empties that one alone, and a MOVE from 5 to 6 moves the key. At
// cut-over kvs has every database as the master has it. A node of
// several groups has database 0 alone: it replicates database 0 and
// skips the others' writes.
func TestReplicaOfDatabases(t *testing.T) {
	requireKVS(t)
	requireRedis(t)
	t.Parallel()
	master := newRedis(t, "master-dbs", "--repl-diskless-sync-delay", "0")
	master.Start()
	ctx := testCtx(t)
	mdb := func(db int) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: master.Addr, DB: db})
		t.Cleanup(func() { c.Close() })
		return c
	}
	// Before the sync: keys in databases 0, 3, 5 and 7.
	for _, db := range []int{0, 3, 5, 7} {
		m := mdb(db)
		for i := range 50 {
			m.Set(ctx, "pre:"+strconv.Itoa(i), "db"+strconv.Itoa(db)+":"+strconv.Itoa(i), 0)
		}
		m.HSet(ctx, "h", "db", db)
	}
	host, port, _ := net.SplitHostPort(master.Addr)

	for _, mode := range []string{"durable", "sharded"} {
		t.Run(mode, func(t *testing.T) {
			var n *Node
			if mode == "durable" {
				n = newKVS(t, "kvs-replica-dbs", KVSOptions{Durable: true})
				n.Start()
			} else {
				n = startShardedNode(t, 3)
			}
			kdb := func(db int) *redis.Client {
				c := redis.NewClient(&redis.Options{Addr: n.Addr, DB: db})
				t.Cleanup(func() { c.Close() })
				return c
			}
			k0 := kdb(0)
			if err := k0.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			acked := map[int]map[string]string{}
			errs := map[int]error{}
			var mu sync.Mutex
			for _, db := range []int{0, 5} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					a, err := replicaWorkload(ctx, mdb(db), stop)
					mu.Lock()
					acked[db], errs[db] = a, err
					mu.Unlock()
				}()
			}
			waitFor(t, "the link to come up", func() error {
				ki, err := replInfo(ctx, k0)
				if err != nil {
					return err
				}
				if ki["master_link_status"] != "up" {
					return fmt.Errorf("link %s", ki["master_link_status"])
				}
				return nil
			})
			// Writes of other databases in the stream, between those of
			// 0 and 5.
			m7 := mdb(7)
			if err := m7.FlushDB(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			moved := "pre:1"
			if mode == "sharded" {
				moved = "pre:2"
			}
			if v, err := mdb(5).Move(ctx, moved, 6).Result(); err != nil || !v {
				t.Fatalf("MOVE on the master: %v, %v", v, err)
			}
			waitFor(t, "writes to stream", func() error {
				if n, _ := k0.LLen(ctx, "list").Result(); n < 1000 {
					return fmt.Errorf("%d elements so far", n)
				}
				return nil
			})
			close(stop)
			wg.Wait()
			for db, err := range errs {
				if err != nil {
					t.Fatalf("the writer of db %d: %v", db, err)
				}
			}
			checkReplicated(t, ctx, mdb(0), k0, acked[0])
			if mode == "sharded" {
				// Database 0 alone; the others' writes were skipped.
				if err := kdb(5).Ping(ctx).Err(); err == nil {
					t.Fatal("SELECT 5 on a node of several groups succeeded")
				}
				if err := k0.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, db := range []int{3, 5, 6, 7} {
				a := acked[db]
				if a == nil {
					a = map[string]string{}
				}
				checkReplicated(t, ctx, mdb(db), kdb(db), a)
			}
			if v, err := kdb(6).Get(ctx, "pre:1").Result(); err != nil || v != "db5:1" {
				t.Fatalf("db 6's pre:1 after the master's MOVE: %q, %v", v, err)
			}
			if n, err := kdb(7).DBSize(ctx).Result(); err != nil || n != 0 {
				t.Fatalf("db 7 after the master's FLUSHDB: %d keys, %v", n, err)
			}
			if v, err := kdb(3).HGet(ctx, "h", "db").Result(); err != nil || v != "3" {
				t.Fatalf("db 3's h: %q, %v", v, err)
			}
			if err := k0.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
