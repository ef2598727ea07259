package test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Scripts as real applications use them, through go-redis's Script
// (EVALSHA, then EVAL on NOSCRIPT), in every mode: a lock released with a
// compare-and-delete (redsync's shape), a GCRA rate limiter, and a job
// queue whose scheduled jobs (a sorted set) a script moves to a list that
// a worker takes from with BLMOVE.

// unlockScript is redsync's release: delete the lock only if it is still ours.
var unlockScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("DEL", KEYS[1])
else
	return 0
end`)

// gcraScript is a GCRA limiter in the shape of go-redis/redis_rate's
// allow script (written anew): KEYS[1] holds the theoretical arrival
// time; ARGV = burst, rate per period, period (s), cost. It returns
// {allowed, remaining}.
var gcraScript = redis.NewScript(`
redis.replicate_commands()
local key = KEYS[1]
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local emission = period / rate
local increment = emission * cost
local tolerance = emission * burst
local t = redis.call("TIME")
local now = (t[1] - 1700000000) + t[2] / 1000000
local tat = redis.call("GET", key)
if not tat then tat = now else tat = tonumber(tat) end
tat = math.max(tat, now)
local new_tat = tat + increment
local allow_at = new_tat - tolerance
if now - allow_at < 0 then
	return {0, 0}
end
redis.call("SET", key, new_tat, "EX", math.ceil(tolerance))
return {1, math.floor((now - (new_tat - tolerance)) / emission + 0.5)}`)

// promoteScript moves the scheduled jobs due by ARGV[1] from the sorted
// set KEYS[1] to the list KEYS[2], returning how many it moved.
var promoteScript = redis.NewScript(`
local due = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[1])
for _, job in ipairs(due) do
	redis.call("ZREM", KEYS[1], job)
	redis.call("RPUSH", KEYS[2], job)
end
return #due`)

func scriptModes(t *testing.T) map[string]func(t *testing.T) *redis.Client {
	return map[string]func(t *testing.T) *redis.Client{
		"memory":  func(t *testing.T) *redis.Client { return scriptClient(startKVS(t, KVSOptions{}).Addr) },
		"durable": func(t *testing.T) *redis.Client { return scriptClient(startKVS(t, KVSOptions{Durable: true}).Addr) },
		"cluster": func(t *testing.T) *redis.Client {
			nodes := startCluster(t, 3)
			leader := waitLeader(t, nodes)
			// Through a follower: the scripts are forwarded to the leader.
			return scriptClient(followers(nodes, leader)[0].Addr)
		},
	}
}

func scriptClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
}

func TestScriptApplications(t *testing.T) {
	for _, mode := range []string{"memory", "durable", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			rdb := scriptModes(t)[mode](t)
			defer rdb.Close()
			ctx := context.Background()

			// The lock: only its holder's token releases it.
			if ok, err := rdb.SetNX(ctx, "lock", "token-a", time.Minute).Result(); err != nil || !ok {
				t.Fatalf("acquire: %v %v", ok, err)
			}
			if n, err := unlockScript.Run(ctx, rdb, []string{"lock"}, "token-b").Int(); err != nil || n != 0 {
				t.Fatalf("release with another token: %d %v", n, err)
			}
			if n, err := unlockScript.Run(ctx, rdb, []string{"lock"}, "token-a").Int(); err != nil || n != 1 {
				t.Fatalf("release: %d %v", n, err)
			}
			if n, _ := rdb.Exists(ctx, "lock").Result(); n != 0 {
				t.Fatal("lock still held after release")
			}

			// The limiter: a burst of 5 at 1 a minute allows exactly 5.
			allowed := 0
			for i := 0; i < 12; i++ {
				res, err := gcraScript.Run(ctx, rdb, []string{"rate:user"}, 5, 1, 60, 1).Int64Slice()
				if err != nil {
					t.Fatalf("limiter: %v", err)
				}
				allowed += int(res[0])
			}
			if allowed != 5 {
				t.Fatalf("limiter allowed %d of 12 with a burst of 5", allowed)
			}

			// The queue: two jobs due, one in the future.
			rdb.ZAdd(ctx, "scheduled", redis.Z{Score: 10, Member: "job1"}, redis.Z{Score: 20, Member: "job2"},
				redis.Z{Score: 1e12, Member: "later"})
			if n, err := promoteScript.Run(ctx, rdb, []string{"scheduled", "ready"}, 100).Int(); err != nil || n != 2 {
				t.Fatalf("promote: %d %v", n, err)
			}
			for _, want := range []string{"job1", "job2"} {
				got, err := rdb.BLMove(ctx, "ready", "working", "LEFT", "RIGHT", time.Second).Result()
				if err != nil || got != want {
					t.Fatalf("BLMOVE: %q %v, want %q", got, err, want)
				}
			}
			if n, _ := rdb.ZCard(ctx, "scheduled").Result(); n != 1 {
				t.Fatalf("scheduled left: %d, want 1", n)
			}
		})
	}
}

// TestScriptReplicated checks that SCRIPT LOAD on one node of a cluster
// makes EVALSHA work on every node, also after the leader is killed, and
// that a read-only script runs on a follower.
func TestScriptReplicated(t *testing.T) {
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	ctx := context.Background()
	via := scriptClient(followers(nodes, leader)[0].Addr)
	defer via.Close()
	sha, err := via.ScriptLoad(ctx, "return redis.call('INCR', KEYS[1])").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		c := scriptClient(n.Addr)
		waitFor(t, "the script on "+n.Name, func() error {
			ok, err := c.ScriptExists(ctx, sha).Result()
			if err != nil || !ok[0] {
				return fmt.Errorf("SCRIPT EXISTS: %v %v", ok, err)
			}
			return nil
		})
		c.Close()
	}
	leader.Kill()
	var rest []*Node
	for _, n := range nodes {
		if n != leader {
			rest = append(rest, n)
		}
	}
	newLeader := waitLeader(t, rest)
	for _, n := range rest {
		c := scriptClient(n.Addr)
		waitFor(t, "EVALSHA on "+n.Name, func() error {
			return c.EvalSha(ctx, sha, []string{"counter"}).Err()
		})
		c.Close()
	}
	c := scriptClient(followers(rest, newLeader)[0].Addr)
	defer c.Close()
	waitFor(t, "the counter on a follower", func() error {
		v, err := c.EvalRO(ctx, "return redis.call('GET', KEYS[1])", []string{"counter"}).Text()
		if err != nil {
			return err
		}
		if n, _ := strconv.Atoi(v); n < 2 {
			return errors.New("counter " + v)
		}
		return nil
	})
	err = c.EvalRO(ctx, "return redis.call('SET', KEYS[1], 1)", []string{"counter"}).Err()
	if err == nil || err.Error()[:len("ERR Write commands are not allowed from read-only scripts.")] != "ERR Write commands are not allowed from read-only scripts." {
		t.Fatalf("a write from EVAL_RO: %v", err)
	}
}

// TestScriptErrorsLeaveServerAnswering runs scripts that fail inside and
// around the interpreter's C functions and callbacks: unpack of a huge
// table (which once panicked kvs's interpreter through the store's lock
// and hung the server), deep recursion, error objects of every type, a
// reply nesting itself. Each gets an error reply, and the server, in
// memory and durable mode, goes on answering.
func TestScriptErrorsLeaveServerAnswering(t *testing.T) {
	for _, mode := range []string{"memory", "durable"} {
		t.Run(mode, func(t *testing.T) {
			rdb := scriptModes(t)[mode](t)
			defer rdb.Close()
			ctx := context.Background()
			for _, body := range []string{
				`return unpack({}, 1, 1e7)`,
				`local t = {} for i = 1, 100000 do t[i] = i end return unpack(t)`,
				`local t = {} for i = 1, 7999 do t[i] = 'k' end return redis.call('DEL', unpack(t))`,
				`local function f(n) return f(n + 1) + 1 end return f(1)`,
				`local function f() return pcall(f) end return f()`,
				`local function f() return redis.call('GET', f()) end return f()`,
				`error(nil)`, `error(true)`, `error(1.5)`, `error({})`, `error({err = 'X y'})`,
				`error(function() end)`, `error(coroutine.create(function() end))`,
				`error(setmetatable({}, {__index = function() error('again') end}))`,
				`local a = {} a[1] = a return a`,
				`return cjson.decode(string.rep('[', 100000))`,
				`return cmsgpack.unpack(string.rep('\145', 100000))`,
			} {
				_ = rdb.Eval(ctx, body, nil).Err()
				if err := rdb.Ping(ctx).Err(); err != nil {
					t.Fatalf("after %q: PING: %v", body, err)
				}
			}
			if n, err := rdb.Eval(ctx, `return redis.call('INCR', KEYS[1])`, []string{"after"}).Int(); err != nil || n != 1 {
				t.Fatalf("a script afterwards: %d %v", n, err)
			}
		})
	}
}

// queueMemoryScript sums MEMORY USAGE over a sample of a job queue's
// jobs and the queue itself, as job queues' statistics scripts do (asynq
// calls MEMORY USAGE from a script), and stores the total: a script that
// writes what MEMORY USAGE answered.
const queueMemoryScript = `
local sample = tonumber(ARGV[1])
local ids = redis.call('LRANGE', KEYS[1], 0, sample - 1)
local total = 0
for _, id in ipairs(ids) do
	total = total + redis.call('MEMORY', 'USAGE', ARGV[2] .. id)
end
if table.getn(ids) > 0 then
	total = total / table.getn(ids) * redis.call('LLEN', KEYS[1])
end
total = total + (redis.call('MEMORY', 'USAGE', KEYS[1], 'SAMPLES', 0) or 0)
redis.call('SET', KEYS[2], total)
return total`

// TestScriptMemoryUsage runs queueMemoryScript on a three-node cluster
// whose nodes hold the queue's jobs differently (one node keeps the hashes
// packed, the others do not): the total it stores is the same on every
// node.
func TestScriptMemoryUsage(t *testing.T) {
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	ctx := context.Background()
	for _, n := range followers(nodes, leader)[:1] {
		c := scriptClient(n.Addr)
		if err := c.ConfigSet(ctx, "hash-max-listpack-entries", "1").Err(); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	rdb := scriptClient(leader.Addr)
	defer rdb.Close()
	for i := range 20 {
		id := strconv.Itoa(i)
		rdb.HSet(ctx, "task:"+id, "type", "email", "payload", strings.Repeat("x", 10*i), "retry", i)
		rdb.RPush(ctx, "queue", id)
	}
	total, err := rdb.Eval(ctx, queueMemoryScript, []string{"queue", "queue:memory"}, 5, "task:").Int64()
	if err != nil || total < 1000 {
		t.Fatalf("the script: %d %v", total, err)
	}
	want := strconv.FormatInt(total, 10)
	for _, n := range nodes {
		c := scriptClient(n.Addr)
		waitFor(t, "the total on "+n.Name, func() error {
			v, err := c.Get(ctx, "queue:memory").Result()
			if err != nil || v != want {
				return fmt.Errorf("%q %v, want %s", v, err, want)
			}
			return nil
		})
		c.Close()
	}
}
