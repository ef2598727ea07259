package test

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var flagChaosTxTime = flag.Duration("chaos.tx-time", 10*time.Second, "how long TestChaosTransfers injects faults")

const (
	chaosAccounts = 8
	chaosBalance  = 100 // each account's opening balance
)

// TestChaosTransfers runs the chaos suite's faults (see TestChaos) against
// a three-node cluster while workers on every node move money between
// accounts: WATCH both accounts, read them, and MULTI/EXEC a DECRBY and an
// INCRBY when the source can pay. Others read every account in one
// MULTI/EXEC. The invariants: every transactional read sees the total
// unchanged and no balance below zero (a transaction applied in part, or
// a WATCH that missed a change, breaks one), and once the cluster has
// healed every member holds the same balances with the same total.
//
//	go test ./test/ -run TestChaosTransfers -v -args -chaos.tx-time=1m -seed=42
func TestChaosTransfers(t *testing.T) {
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

	accounts := make([]string, chaosAccounts)
	pairs := make([]any, 0, 2*chaosAccounts)
	for i := range accounts {
		accounts[i] = fmt.Sprintf("{bank}:%d", i)
		pairs = append(pairs, accounts[i], chaosBalance)
	}
	lc := newClient(t, waitLeader(t, nodes), func(o *redis.Options) { o.MaxRetries = -1 })
	if err := retryLeaderChange(t, func() error { return lc.MSet(context.Background(), pairs...).Err() }); err != nil {
		t.Fatal(err)
	}

	b := &chaosBank{accounts: accounts, total: chaosAccounts * chaosBalance}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range chaosWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.worker(t, nodes, w, rand.New(rand.NewSource(seed+int64(w))), stop)
		}()
	}
	stopWorkers := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopWorkers)
	waitFor(t, "transfers before the first fault", func() error { return b.atLeast(chaosMinOK) })

	for end := time.Now().Add(*flagChaosTxTime); time.Now().Before(end); {
		f := c.draw(c.schedule)
		c.faults[f.name]++
		f.inject(c)
		c.settle()
		time.Sleep(c.between(0, 2*chaosElection)) // a quiet spell between faults, as TestChaos has
	}
	before := b.transfers.Load()
	waitFor(t, "transfers after the last fault", func() error { return b.atLeast(before + chaosMinOK) })
	stopWorkers()

	// Every member ends with the leader's balances (after a write
	// through the leader), and those add up.
	var want []string
	waitFor(t, "the final balances", func() error {
		leader, err := leaderNow(c.members())
		if err != nil {
			return err
		}
		rc := redis.NewClient(&redis.Options{Addr: leader.Addr, MaxRetries: -1})
		defer rc.Close()
		if err := rc.Set(context.Background(), "{bank}:barrier", time.Now().UnixNano(), 0).Err(); err != nil {
			return err
		}
		want, err = b.balances(rc)
		return err
	})
	b.check(t, "final, on the leader", want)
	waitFor(t, "every member to hold the final balances", func() error {
		for _, n := range c.members() {
			rc := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
			got, err := b.balances(rc)
			rc.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", n.Name, err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("%s holds %v, the leader %v", n.Name, got, want)
			}
		}
		return nil
	})
	t.Logf("chaos transfers: seed %d, faults %v, %d transfers and %d audits acknowledged, %d transfers aborted by WATCH",
		seed, c.faults, b.transfers.Load(), b.audits.Load(), b.aborted.Load())
}

type chaosBank struct {
	accounts                   []string
	total                      int
	transfers, audits, aborted atomic.Int64
	mu                         sync.Mutex // serialises t.Errorf's counting below
	bad                        int
}

func (b *chaosBank) atLeast(n int64) error {
	if got := b.transfers.Load(); got < n {
		return fmt.Errorf("%d transfers acknowledged, want %d", got, n)
	}
	return nil
}

// balances reads every account in one transaction.
func (b *chaosBank) balances(c *redis.Client) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var mget *redis.SliceCmd
	if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		mget = p.MGet(ctx, b.accounts...)
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]string, len(b.accounts))
	for i, v := range mget.Val() {
		s, _ := v.(string)
		out[i] = s
	}
	return out, nil
}

// check reports balances that do not add up to the total or go below zero.
func (b *chaosBank) check(t *testing.T, what string, balances []string) {
	sum := 0
	for _, s := range balances {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			sum = -1
			break
		}
		sum += n
	}
	if sum != b.total {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.bad++; b.bad <= 10 {
			t.Errorf("%s: balances %v (sum %d), want sum %d and none negative", what, balances, sum, b.total)
		}
	}
}

// worker transfers between random accounts, and audits every fifth
// operation, through each node in turn until stop closes. Errors (a node
// down, no leader, an unknown outcome) are expected under faults: a
// transfer applies whole or not at all, so the invariants hold either way.
func (b *chaosBank) worker(t *testing.T, nodes []*Node, w int, rng *rand.Rand, stop <-chan struct{}) {
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
		c := clients[i%len(clients)]
		if i%5 == 4 {
			if bal, err := b.balances(c); err == nil {
				b.check(t, fmt.Sprintf("worker %d's audit through %s", w, nodes[i%len(nodes)].Name), bal)
				b.audits.Add(1)
			}
			continue
		}
		from, to := b.accounts[rng.Intn(len(b.accounts))], b.accounts[rng.Intn(len(b.accounts))]
		if from == to {
			continue
		}
		amount := 1 + rng.Intn(30)
		switch err := b.transfer(c, from, to, amount); {
		case err == nil:
			b.transfers.Add(1)
		case err == redis.TxFailedErr:
			b.aborted.Add(1)
		default:
			time.Sleep(20 * time.Millisecond) // back off from a node that is down; not synchronisation
		}
	}
}

// transfer moves amount from one account to another if the source holds
// that much when EXEC applies: WATCH makes the read and the writes one.
func (b *chaosBank) transfer(c *redis.Client, from, to string, amount int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Watch(ctx, func(tx *redis.Tx) error {
		n, err := tx.Get(ctx, from).Int()
		if err != nil || n < amount {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.DecrBy(ctx, from, int64(amount))
			p.IncrBy(ctx, to, int64(amount))
			return nil
		})
		return err
	}, from, to)
}
