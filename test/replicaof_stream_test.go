package test

import (
	"fmt"
	"math/rand"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// streamState renders a stream as the master and its replicas must agree
// on it: XINFO STREAM FULL (entries, first and last IDs, entries added,
// max deleted ID, groups with their last ID, entries read, lag and PEL
// with delivery times and counts, consumers with their PELs) and XRANGE,
// without the consumers' seen-time and active-time, which each server
// sets from its own clock (a Redis replica too), and radix-tree-nodes,
// which counts the nodes of Redis's radix tree (kvs has none).
func streamState(c *rawConn, key string, skip ...string) string {
	var b strings.Builder
	var render func(v Value)
	render = func(v Value) {
		if v.Elems == nil {
			b.WriteString(v.Str)
			b.WriteByte(' ')
			return
		}
		b.WriteString("[")
		for i := 0; i < len(v.Elems); i++ {
			if s := v.Elems[i].Str; (s == "seen-time" || s == "active-time" || s == "radix-tree-nodes" || slices.Contains(skip, s)) && i+1 < len(v.Elems) {
				i++
				continue
			}
			render(v.Elems[i])
		}
		b.WriteString("] ")
	}
	render(c.Do("XINFO", "STREAM", key, "FULL", "COUNT", "0"))
	render(c.Do("XRANGE", key, "-", "+"))
	return b.String()
}

// streamWorkload runs XADD, XREADGROUP, XACK, XCLAIM, XAUTOCLAIM, XDEL,
// XTRIM, XSETID and XGROUP against the master until stop is closed.
func streamWorkload(t *testing.T, m *redis.Client, seed int64, stop <-chan struct{}) error {
	ctx := testCtx(t)
	r := rand.New(rand.NewSource(seed))
	keys := []string{"s1", "s2"}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		key := keys[r.Intn(len(keys))]
		p := m.Pipeline()
		for range 1 + r.Intn(4) {
			args := &redis.XAddArgs{Stream: key, Values: []any{"f", strconv.Itoa(i), "g", r.Intn(100)}}
			if r.Intn(10) == 0 {
				args.MaxLen, args.Approx = 300, r.Intn(2) == 0
			}
			p.XAdd(ctx, args)
		}
		consumer := fmt.Sprintf("c%d", r.Intn(3))
		p.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g1", Consumer: consumer, Streams: []string{key, ">"}, Count: int64(1 + r.Intn(5)), Block: -1, NoAck: r.Intn(8) == 0})
		if _, err := p.Exec(ctx); err != nil && err != redis.Nil {
			return fmt.Errorf("XADD/XREADGROUP: %w", err)
		}
		switch n := r.Intn(20); {
		case n < 8:
			pending, err := m.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: key, Group: "g1", Start: "-", End: "+", Count: 10}).Result()
			if err != nil {
				return fmt.Errorf("XPENDING: %w", err)
			}
			var ids []string
			for _, e := range pending {
				if r.Intn(2) == 0 {
					ids = append(ids, e.ID)
				}
			}
			if len(ids) > 0 {
				if err := m.XAck(ctx, key, "g1", ids...).Err(); err != nil {
					return fmt.Errorf("XACK: %w", err)
				}
			}
		case n < 10:
			pending, err := m.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: key, Group: "g1", Start: "-", End: "+", Count: 5}).Result()
			if err != nil {
				return fmt.Errorf("XPENDING: %w", err)
			}
			ids := []string{"0-1"} // not pending: left alone
			for _, e := range pending {
				ids = append(ids, e.ID)
			}
			args := []any{"XCLAIM", key, "g1", "c9", "0"}
			for _, id := range ids {
				args = append(args, id)
			}
			if r.Intn(2) == 0 {
				args = append(args, "JUSTID")
			}
			if err := m.Do(ctx, args...).Err(); err != nil && err != redis.Nil {
				return fmt.Errorf("XCLAIM: %w", err)
			}
		case n == 10:
			if err := m.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: key, Group: "g1", Consumer: "c8", Start: "0", Count: 3}).Err(); err != nil && err != redis.Nil {
				return fmt.Errorf("XAUTOCLAIM: %w", err)
			}
		case n == 11:
			ents, err := m.XRangeN(ctx, key, "-", "+", 3).Result()
			if err == nil && len(ents) > 0 {
				err = m.XDel(ctx, key, ents[r.Intn(len(ents))].ID).Err()
			}
			if err != nil {
				return fmt.Errorf("XDEL: %w", err)
			}
		case n == 12:
			if err := m.XTrimMaxLen(ctx, key, 200).Err(); err != nil {
				return fmt.Errorf("XTRIM: %w", err)
			}
		case n == 13:
			if err := m.Do(ctx, "XGROUP", "CREATECONSUMER", key, "g1", fmt.Sprintf("idle%d", r.Intn(4))).Err(); err != nil {
				return fmt.Errorf("XGROUP CREATECONSUMER: %w", err)
			}
		case n == 14:
			if err := m.Do(ctx, "XGROUP", "DELCONSUMER", key, "g1", fmt.Sprintf("idle%d", r.Intn(4))).Err(); err != nil {
				return fmt.Errorf("XGROUP DELCONSUMER: %w", err)
			}
		case n == 15:
			// A second group, made and dropped, set back and forth.
			m.Do(ctx, "XGROUP", "CREATE", key, "g2", "0")
			if err := m.Do(ctx, "XGROUP", "SETID", key, "g2", "$", "ENTRIESREAD", strconv.Itoa(r.Intn(5))).Err(); err != nil {
				return fmt.Errorf("XGROUP SETID: %w", err)
			}
			if r.Intn(3) == 0 {
				m.Do(ctx, "XGROUP", "DESTROY", key, "g2")
			}
		case n == 16:
			last, err := m.XInfoStream(ctx, key).Result()
			if err != nil {
				return fmt.Errorf("XINFO STREAM: %w", err)
			}
			// Moves the last ID on: the next XADD's * follows it.
			ms, _, _ := strings.Cut(last.LastGeneratedID, "-")
			n, _ := strconv.ParseInt(ms, 10, 64)
			if err := m.Do(ctx, "XSETID", key, fmt.Sprintf("%d-5", n+1)).Err(); err != nil {
				return fmt.Errorf("XSETID: %w", err)
			}
		}
	}
}

// TestReplicaOfStreams: kvs as the replica of a redis-server whose
// streams take XADD, XREADGROUP, XACK, XCLAIM, XAUTOCLAIM, XDEL, XTRIM,
// XSETID and XGROUP under load. The full sync loads the streams (with a
// group and a PEL made before it); the master propagates XADD with its
// concrete ID and XREADGROUP as XCLAIM ... LASTID (and XGROUP SETID,
// CREATECONSUMER), which kvs applies. At cut-over kvs has the same
// streams, groups, PELs (delivery times and counts) and consumers; its
// file, loaded by a redis-server, has them too.
func TestReplicaOfStreams(t *testing.T) {
	requireKVS(t)
	requireRedis(t)
	t.Parallel()
	seed := testSeed(t)
	master := newRedis(t, "master-streams", "--repl-diskless-sync-delay", "0")
	master.Start()
	ctx := testCtx(t)
	m := redis.NewClient(&redis.Options{Addr: master.Addr})
	defer m.Close()
	for _, key := range []string{"s1", "s2"} {
		for i := range 50 {
			m.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"pre", i}})
		}
		if err := m.XGroupCreate(ctx, key, "g1", "0").Err(); err != nil {
			t.Fatal(err)
		}
		m.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g1", Consumer: "c0", Streams: []string{key, ">"}, Count: 20, Block: -1})
	}
	host, port, _ := net.SplitHostPort(master.Addr)
	// A redis-server replica of the same master: what applying the
	// stream gives (a group's entries-read is not in the XCLAIM ...
	// LASTID that Redis 7.0 propagates for XREADGROUP, so a replica's
	// lags behind its master's).
	rr := newRedis(t, "redis-replica-streams", "--replicaof", host, port)
	rr.Start()
	n := newKVS(t, "kvs-replica-streams", KVSOptions{Durable: true})
	n.Start()
	k := redis.NewClient(&redis.Options{Addr: n.Addr})
	defer k.Close()
	rrc := redis.NewClient(&redis.Options{Addr: rr.Addr})
	defer rrc.Close()
	if err := k.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		werr = streamWorkload(t, m, seed, stop)
	}()
	waitFor(t, "the link to come up and writes to stream", func() error {
		ki, err := replInfo(ctx, k)
		if err != nil {
			return err
		}
		if ki["master_link_status"] != "up" {
			return fmt.Errorf("link %s", ki["master_link_status"])
		}
		if n, _ := k.Do(ctx, "XINFO", "STREAM", "s1").Result(); n == nil {
			return fmt.Errorf("no stream yet")
		}
		if l, _ := k.XInfoStream(ctx, "s1").Result(); l == nil || l.EntriesAdded < 2000 {
			return fmt.Errorf("not enough entries yet")
		}
		return nil
	})
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	for _, c := range []*redis.Client{k, rrc} {
		waitFor(t, "the replicas' offsets to reach the master's", func() error {
			mi, err := replInfo(ctx, m)
			if err != nil {
				return err
			}
			ki, err := replInfo(ctx, c)
			if err != nil {
				return err
			}
			if ki["master_link_status"] != "up" || ki["slave_repl_offset"] != mi["master_repl_offset"] {
				return fmt.Errorf("master at %s; replica at %s", mi["master_repl_offset"], ki["slave_repl_offset"])
			}
			return nil
		})
	}
	mc, kc, rrcRaw := dialRaw(t, master.Addr), dialRaw(t, n.Addr), dialRaw(t, rr.Addr)
	for _, key := range []string{"s1", "s2"} {
		want, got := streamState(rrcRaw, key), streamState(kc, key)
		if want != got {
			t.Errorf("%s differs from the redis-server replica's:\n%s", key, firstStringDifference(want, got))
		}
		// The master's, but for its groups' entries-read and lag.
		if want, got := streamState(mc, key, "entries-read", "lag"), streamState(kc, key, "entries-read", "lag"); want != got {
			t.Errorf("%s differs from the master's:\n%s", key, firstStringDifference(want, got))
		}
		if len(want) < 1000 || !strings.Contains(want, "pending [[") {
			t.Errorf("%s: a stream without a PEL: %.500s", key, want)
		}
	}
	if err := k.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	// And out again: kvs's file, loaded by a redis-server.
	file := filepath.Join(testDir(t), "streams", "dump.rdb")
	syncFile(t, n.Addr, []string{"SYNC"}, file)
	ref := redisOn(t, "redis-streams-out", file)
	rc := dialRaw(t, ref.Addr)
	for _, key := range []string{"s1", "s2"} {
		if want, got := streamState(kc, key), streamState(rc, key); want != got {
			t.Errorf("%s in redis-server from kvs's file differs:\n%s", key, firstStringDifference(want, got))
		}
	}
}

// firstStringDifference shows a and b around where they first differ.
func firstStringDifference(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(0, i-300)
	return fmt.Sprintf("want ...%.600s\ngot  ...%.600s", a[from:], b[from:])
}
