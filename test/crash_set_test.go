package test

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// setLedger records what set writers were told: members whose SADD was
// acknowledged must be present after a crash unless a later acknowledged
// SREM or SMOVE took them out, and then they must be absent. A command
// whose reply never came may or may not have been applied.
type setLedger struct {
	mu      sync.Mutex
	present map[string]map[string]bool // key -> members acknowledged in it
	absent  map[string]map[string]bool // key -> members acknowledged removed
	sent    map[string]bool            // every member ever sent, acknowledged or not
	acks    int
}

func newSetLedger() *setLedger {
	return &setLedger{present: map[string]map[string]bool{}, absent: map[string]map[string]bool{}, sent: map[string]bool{}}
}

func (l *setLedger) mark(m map[string]map[string]bool, key, member string, on bool) {
	if m[key] == nil {
		m[key] = map[string]bool{}
	}
	if on {
		m[key][member] = true
	} else {
		delete(m[key], member)
	}
}

// setWriter adds unique members (strings to one key, integers to another,
// so intsets and their conversion are both written), removes some of them
// again and moves others to a third key, until its connection breaks.
func (l *setLedger) setWriter(addr string, w, round int, stop <-chan struct{}) {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	strKey, intKey, movedKey := fmt.Sprintf("set:%d", w), fmt.Sprintf("iset:%d", w), fmt.Sprintf("moved:%d", w)
	var mine []string // acknowledged string members still in strKey
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		member := fmt.Sprintf("w%d-r%d-%d", w, round, i)
		number := strconv.Itoa(w*100_000_000 + round*1_000_000 + i)
		l.mu.Lock()
		l.sent[member], l.sent[number] = true, true
		l.mu.Unlock()
		if err := c.SAdd(ctx, strKey, member).Err(); err != nil {
			return
		}
		l.ack(strKey, member, true)
		mine = append(mine, member)
		if err := c.SAdd(ctx, intKey, number).Err(); err != nil {
			return
		}
		l.ack(intKey, number, true)
		switch {
		case i%5 == 4:
			gone := mine[0]
			mine = mine[1:]
			l.forget(strKey, gone)
			if err := c.SRem(ctx, strKey, gone).Err(); err != nil {
				return
			}
			l.ack(strKey, gone, false)
		case i%7 == 6:
			moved := mine[0]
			mine = mine[1:]
			l.forget(strKey, moved)
			if err := c.SMove(ctx, strKey, movedKey, moved).Err(); err != nil {
				return
			}
			l.ack(strKey, moved, false)
			l.ack(movedKey, moved, true)
		}
	}
}

// forget makes member's presence in key unknown, until the reply to the
// command that removes it arrives.
func (l *setLedger) forget(key, member string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mark(l.present, key, member, false)
}

func (l *setLedger) ack(key, member string, added bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acks++
	l.mark(l.present, key, member, added)
	l.mark(l.absent, key, member, !added)
}

// verify reads every key the writers wrote on n and checks it against the
// ledger: no acknowledged write lost, nothing that was never sent.
func (l *setLedger) verify(t *testing.T, n *Node) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: n.Addr})
	defer c.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := map[string]bool{}
	for k := range l.present {
		keys[k] = true
	}
	for k := range l.absent {
		keys[k] = true
	}
	for k := range keys {
		members, err := c.SMembers(context.Background(), k).Result()
		if err != nil {
			t.Fatalf("SMEMBERS %s: %v", k, err)
		}
		if card, err := c.SCard(context.Background(), k).Result(); err != nil || card != int64(len(members)) {
			t.Errorf("SCARD %s = %d, %v; SMEMBERS has %d", k, card, err, len(members))
		}
		for m := range l.present[k] {
			if !slices.Contains(members, m) {
				t.Errorf("%s lost acknowledged member %s", k, m)
			}
		}
		for _, m := range members {
			if l.absent[k][m] {
				t.Errorf("%s still holds %s, whose removal was acknowledged", k, m)
			}
			if !l.sent[m] {
				t.Errorf("%s holds %q, which no writer sent", k, m)
			}
		}
	}
}

// TestCrashSets: set writers against a durable node with --fsync always,
// killed with SIGKILL at random moments; segments and the compaction
// threshold are tiny, so kills land in rolls and compactions too and most
// restarts restore the sets from a snapshot. After each restart every
// acknowledged SADD, SREM and SMOVE is there.
func TestCrashSets(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	n := newKVS(t, "kvs-sets", KVSOptions{Durable: true, Fsync: "always",
		Extra: []string{"--wal-segment-bytes", "16384", "--wal-compact-bytes", "65536"}})
	n.Start()
	ledger := newSetLedger()
	const writers = 8
	for round := range 4 {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ledger.setWriter(n.Addr, w, round, stop)
			}()
		}
		time.Sleep(time.Duration(300+rng.Intn(700)) * time.Millisecond) // load for a random while; not synchronisation
		n.Kill()
		close(stop)
		wg.Wait()
		n.Start()
		ledger.verify(t, n)
		t.Logf("round %d: %d set writes acknowledged", round, ledger.acks)
		if t.Failed() {
			t.Fatalf("round %d lost acknowledged set writes\n%s", round, n.LogTail(30))
		}
	}
	if ledger.acks == 0 {
		t.Fatal("no write was acknowledged; the test proves nothing")
	}
	n.Restart()
	ledger.verify(t, n)
}

// TestClusterSets: writes of every set command on the leader, SPOP's
// seeded picks included, leave each follower with the same sets.
func TestClusterSets(t *testing.T) {
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	c := redis.NewClient(&redis.Options{Addr: leader.Addr})
	defer c.Close()
	ctx := context.Background()
	do := func(args ...any) {
		t.Helper()
		if err := retryLeaderChange(t, func() error { return c.Do(ctx, args...).Err() }); err != nil && err != redis.Nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	for i := range 300 {
		k := "s" + strconv.Itoa(i%5)
		do("SADD", k, strconv.Itoa(i), "m"+strconv.Itoa(i), "m"+strconv.Itoa(i/2))
		switch i % 10 {
		case 3:
			do("SPOP", k, "3")
		case 5:
			do("SPOP", k)
		case 7:
			do("SREM", k, "m"+strconv.Itoa(i-3), strconv.Itoa(i-1))
		case 8:
			do("SMOVE", k, "s"+strconv.Itoa((i+1)%5), "m"+strconv.Itoa(i/2))
		case 9:
			do("SINTERSTORE", "inter", "s0", "s1")
			do("SUNIONSTORE", "union", "s0", "s1", "s2", "s3", "s4")
			do("SDIFFSTORE", "diff", "s4", "s0")
		}
	}
	keys := []string{"s0", "s1", "s2", "s3", "s4", "inter", "union", "diff"}
	contents := func(n *Node) (map[string][]string, error) {
		fc := redis.NewClient(&redis.Options{Addr: n.Addr})
		defer fc.Close()
		return setContents(ctx, fc, keys)
	}
	want, err := contents(leader)
	if err != nil {
		t.Fatal(err)
	}
	if len(want["union"]) == 0 {
		t.Fatal("the writes left no sets; the test proves nothing")
	}
	for _, f := range followers(nodes, leader) {
		waitFor(t, "follower "+f.Name+" to hold the leader's sets", func() error {
			got, err := contents(f)
			if err != nil {
				return err
			}
			for _, k := range keys {
				if !slices.Equal(got[k], want[k]) {
					return fmt.Errorf("%s: %d members, leader %d", k, len(got[k]), len(want[k]))
				}
			}
			return nil
		})
	}
}

// setContents reads the sets at keys, each member list sorted.
func setContents(ctx context.Context, rc *redis.Client, keys []string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, k := range keys {
		ms, err := rc.SMembers(ctx, k).Result()
		if err != nil {
			return nil, err
		}
		slices.Sort(ms)
		out[k] = ms
	}
	return out, nil
}
