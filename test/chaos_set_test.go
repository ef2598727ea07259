package test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var flagChaosSetTime = flag.Duration("chaos.set-time", 10*time.Second, "how long TestChaosSets injects faults")

// TestChaosSets runs the chaos suite's faults (see TestChaos) against a
// three-node cluster while workers add unique members to a few sets
// through every node, string members and integers (intsets that convert
// as they grow). Once the cluster has healed, every member whose SADD was
// acknowledged must be in its set on the leader, no set may hold a member
// nobody sent, and every member must end with the leader's sets.
//
//	go test ./test/ -run TestChaosSets -v -args -chaos.set-time=2m -seed=42
func TestChaosSets(t *testing.T) {
	t.Parallel()
	seed := testSeed(t)
	nodes := startCluster(t, 3)
	c := &chaos{
		t: t, stale: true, nodes: nodes, rng: rand.New(rand.NewSource(seed)),
		start: time.Now(), faults: map[string]int{}, out: map[int]bool{}, gens: map[string]int{},
		schedule: chaosFaults,
	}
	t.Cleanup(c.resume)
	c.proxies = proxyRaft(t, nodes)

	ledger := &chaosSetLedger{acked: map[string][]string{}, sent: map[string]bool{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range chaosWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ledger.worker(nodes, w, stop)
		}()
	}
	stopWorkers := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopWorkers)
	waitFor(t, "set writes before the first fault", func() error { return ledger.atLeast(chaosMinOK) })

	for end := time.Now().Add(*flagChaosSetTime); time.Now().Before(end); {
		f := c.draw(c.schedule)
		c.faults[f.name]++
		f.inject(c)
		c.settle()
		time.Sleep(c.between(0, 2*chaosElection)) // a quiet spell between faults, as TestChaos has
	}
	before := ledger.count()
	waitFor(t, "set writes after the last fault", func() error { return ledger.atLeast(before + chaosMinOK) })
	stopWorkers()

	final := c.finalSets(ledger.keys())
	lost := 0
	for key, members := range ledger.acked {
		for _, m := range members {
			if !final[key][m] {
				lost++
				if lost <= 10 {
					t.Errorf("%s lost acknowledged member %s", key, m)
				}
			}
		}
	}
	for key, ms := range final {
		for m := range ms {
			if !ledger.sent[m] {
				t.Errorf("%s holds %q, which no worker sent", key, m)
			}
		}
	}
	t.Logf("chaos sets: seed %d, faults %v, %d SADDs acknowledged of %d sent, %d lost",
		seed, c.faults, ledger.count(), len(ledger.sent), lost)
}

// chaosSetLedger records which members the workers sent and which of
// those SADDs were acknowledged.
type chaosSetLedger struct {
	mu    sync.Mutex
	acked map[string][]string // key -> members acknowledged
	sent  map[string]bool
	n     int
}

var chaosSetKeys = []string{"chaos:set:a", "chaos:set:b", "chaos:iset"}

func (l *chaosSetLedger) keys() []string { return chaosSetKeys }

func (l *chaosSetLedger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

func (l *chaosSetLedger) atLeast(n int) error {
	if got := l.count(); got < n {
		return fmt.Errorf("%d acknowledged, want %d", got, n)
	}
	return nil
}

// worker sends SADDs of members never sent before to each node in turn
// (a follower forwards them) until stop is closed. An error leaves the
// member's fate unknown; the worker goes on with the next node.
func (l *chaosSetLedger) worker(nodes []*Node, w int, stop <-chan struct{}) {
	clients := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: n.Addr, PoolSize: 1, MaxRetries: -1,
			DialTimeout: time.Second, ReadTimeout: 3 * time.Second, WriteTimeout: time.Second})
		defer clients[i].Close()
	}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		key := chaosSetKeys[i%len(chaosSetKeys)]
		member := fmt.Sprintf("w%d-%d", w, i)
		if key == "chaos:iset" {
			member = strconv.Itoa(w*1_000_000_000 + i)
		}
		l.mu.Lock()
		l.sent[member] = true
		l.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := clients[i%len(clients)].SAdd(ctx, key, member).Err()
		cancel()
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				time.Sleep(20 * time.Millisecond) // back off from a node that is down; not synchronisation
			}
			continue
		}
		l.mu.Lock()
		l.acked[key] = append(l.acked[key], member)
		l.n++
		l.mu.Unlock()
	}
}

// finalSets reads the sets from the leader after a write through it (which
// the leader applies after everything committed before, acknowledged
// writes included), then waits until every member holds the same sets.
func (c *chaos) finalSets(keys []string) map[string]map[string]bool {
	t := c.t
	ctx := context.Background()
	read := func(n *Node) (map[string][]string, error) {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		defer rc.Close()
		return setContents(ctx, rc, keys)
	}
	var want map[string][]string
	waitFor(t, "the final sets", func() error {
		leader, err := leaderNow(c.members())
		if err != nil {
			return err
		}
		rc := redis.NewClient(&redis.Options{Addr: leader.Addr, MaxRetries: -1})
		defer rc.Close()
		if err := rc.Set(ctx, "chaos:barrier", time.Now().UnixNano(), 0).Err(); err != nil {
			return fmt.Errorf("barrier write on %s: %w", leader.Name, err)
		}
		want, err = read(leader)
		return err
	})
	waitFor(t, "every member to hold the final sets", func() error {
		for _, n := range c.members() {
			got, err := read(n)
			if err != nil {
				return fmt.Errorf("%s: %w", n.Name, err)
			}
			for _, k := range keys {
				if !slices.Equal(got[k], want[k]) {
					return fmt.Errorf("%s: %s has %d members, the leader %d", n.Name, k, len(got[k]), len(want[k]))
				}
			}
		}
		return nil
	})
	final := map[string]map[string]bool{}
	for k, ms := range want {
		final[k] = map[string]bool{}
		for _, m := range ms {
			final[k][m] = true
		}
	}
	return final
}
