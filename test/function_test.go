package test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis 7 functions as applications use them, through go-redis's
// FunctionLoad, FCall and FCallRO: the lock release, the limiter's shape
// and the scheduled-job promotion of script_test.go as one library.

const appLibrary = `#!lua name=app
local function unlock(keys, args)
	if redis.call("GET", keys[1]) == args[1] then
		return redis.call("DEL", keys[1])
	end
	return 0
end

local function hit(keys, args)
	local n = redis.call("INCR", keys[1])
	if n == 1 then redis.call("EXPIRE", keys[1], args[1]) end
	return n
end

local function promote(keys, args)
	local due = redis.call("ZRANGEBYSCORE", keys[1], "-inf", args[1])
	for _, job in ipairs(due) do
		redis.call("ZREM", keys[1], job)
		redis.call("RPUSH", keys[2], job)
	end
	return #due
end

redis.register_function("unlock", unlock)
redis.register_function("hit", hit)
redis.register_function("promote", promote)
redis.register_function{function_name = "peek", callback = function(keys) return redis.call("GET", keys[1]) end,
	flags = {"no-writes"}, description = "reads a key"}
`

func TestFunctionApplications(t *testing.T) {
	for _, mode := range []string{"memory", "durable", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			rdb := scriptModes(t)[mode](t)
			defer rdb.Close()
			ctx := context.Background()
			if name, err := rdb.FunctionLoad(ctx, appLibrary).Result(); err != nil || name != "app" {
				t.Fatalf("FUNCTION LOAD: %q %v", name, err)
			}
			if err := rdb.FunctionLoad(ctx, appLibrary).Err(); err == nil || err.Error() != "ERR Library 'app' already exists" {
				t.Fatalf("FUNCTION LOAD again: %v", err)
			}

			rdb.Set(ctx, "lock", "token-a", time.Minute)
			if n, err := rdb.FCall(ctx, "unlock", []string{"lock"}, "token-b").Int(); err != nil || n != 0 {
				t.Fatalf("unlock with another token: %d %v", n, err)
			}
			if n, err := rdb.FCall(ctx, "UNLOCK", []string{"lock"}, "token-a").Int(); err != nil || n != 1 {
				t.Fatalf("unlock: %d %v", n, err)
			}
			for i := 1; i <= 3; i++ {
				if n, err := rdb.FCall(ctx, "hit", []string{"hits"}, 60).Int(); err != nil || n != i {
					t.Fatalf("hit %d: %d %v", i, n, err)
				}
			}
			if v, err := rdb.FCallRO(ctx, "peek", []string{"hits"}).Text(); err != nil || v != "3" {
				t.Fatalf("FCALL_RO peek: %q %v", v, err)
			}
			if err := rdb.FCallRO(ctx, "hit", []string{"hits"}, 60).Err(); err == nil ||
				err.Error() != "ERR Can not execute a script with write flag using *_ro command." {
				t.Fatalf("FCALL_RO of a writing function: %v", err)
			}

			rdb.ZAdd(ctx, "scheduled", redis.Z{Score: 10, Member: "job1"}, redis.Z{Score: 1e12, Member: "later"})
			if n, err := rdb.FCall(ctx, "promote", []string{"scheduled", "ready"}, 100).Int(); err != nil || n != 1 {
				t.Fatalf("promote: %d %v", n, err)
			}
			if got, err := rdb.BLMove(ctx, "ready", "working", "LEFT", "RIGHT", time.Second).Result(); err != nil || got != "job1" {
				t.Fatalf("BLMOVE: %q %v", got, err)
			}

			libs, err := rdb.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: "app"}).Result()
			if err != nil || len(libs) != 1 || len(libs[0].Functions) != 4 {
				t.Fatalf("FUNCTION LIST: %+v %v", libs, err)
			}
			if f := libs[0].Functions[1]; f.Name != "peek" || f.Description != "reads a key" || strings.Join(f.Flags, ",") != "no-writes" {
				t.Fatalf("FUNCTION LIST peek: %+v", f)
			}
			if err := rdb.FunctionDelete(ctx, "app").Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.FCall(ctx, "hit", []string{"hits"}, 60).Err(); err == nil || err.Error() != "ERR Function not found" {
				t.Fatalf("FCALL after FUNCTION DELETE: %v", err)
			}
		})
	}
}

// TestFunctionSurvivesRestart: a library loaded on a durable node, and
// what its functions and a script wrote, are there after a restart, which
// replays the log: the replayed FCALL and EVAL must run their commands as
// they did the first time.
func TestFunctionSurvivesRestart(t *testing.T) {
	n := startKVS(t, KVSOptions{Durable: true})
	ctx := context.Background()
	rdb := scriptClient(n.Addr)
	if err := rdb.FunctionLoad(ctx, appLibrary).Err(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := rdb.FCall(ctx, "hit", []string{"h"}, 60).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Eval(ctx, "return redis.call('SET', KEYS[1], ARGV[1])", []string{"e"}, "from eval").Err(); err != nil {
		t.Fatal(err)
	}
	rdb.Close()
	n.Restart()
	rdb = scriptClient(n.Addr)
	defer rdb.Close()
	if v, err := rdb.Get(ctx, "e").Result(); err != nil || v != "from eval" {
		t.Fatalf("a script's write after restart: %q %v", v, err)
	}
	if v, err := rdb.FCall(ctx, "hit", []string{"h"}, 60).Int(); err != nil || v != 3 {
		t.Fatalf("FCALL after restart: %d %v, want 3", v, err)
	}
	if err := rdb.FunctionLoad(ctx, appLibrary).Err(); err == nil {
		t.Fatal("FUNCTION LOAD after restart: the library is gone")
	}
}

// TestFunctionReplicated checks that FUNCTION LOAD through a follower
// reaches every node, that FCALL works on every node after the leader is
// killed, that FCALL_RO runs on a follower, and that FUNCTION FLUSH
// reaches every node.
func TestFunctionReplicated(t *testing.T) {
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	ctx := context.Background()
	via := scriptClient(followers(nodes, leader)[0].Addr)
	if err := via.FunctionLoad(ctx, appLibrary).Err(); err != nil {
		t.Fatal(err)
	}
	via.Close()
	for _, n := range nodes {
		c := scriptClient(n.Addr)
		waitFor(t, "the library on "+n.Name, func() error {
			if err := c.FCallRO(ctx, "peek", []string{"h"}).Err(); err != redis.Nil {
				return fmt.Errorf("peek: %v", err)
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
		waitFor(t, "FCALL on "+n.Name, func() error {
			return c.FCall(ctx, "hit", []string{"h"}, 60).Err()
		})
		c.Close()
	}
	c := scriptClient(followers(rest, newLeader)[0].Addr)
	defer c.Close()
	waitFor(t, "the counter on a follower", func() error {
		v, err := c.FCallRO(ctx, "peek", []string{"h"}).Int()
		if err != nil {
			return err
		}
		if v < 2 {
			return fmt.Errorf("counter %d", v)
		}
		return nil
	})
	if err := c.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for _, n := range rest {
		c := scriptClient(n.Addr)
		waitFor(t, "FUNCTION FLUSH on "+n.Name, func() error {
			err := c.FCallRO(ctx, "peek", []string{"h"}).Err()
			if err == nil || err.Error() != "ERR Function not found" {
				return errors.New("peek still there")
			}
			return nil
		})
		c.Close()
	}
}

// TestScriptLoadedEarlierInPipeline: a function or script loaded by an
// earlier command of the same pipeline is there for the commands after
// it, as in Redis, although the pipeline's commands are parsed before the
// load is applied.
func TestScriptLoadedEarlierInPipeline(t *testing.T) {
	for _, mode := range []string{"memory", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			rdb := scriptModes(t)[mode](t)
			defer rdb.Close()
			ctx := context.Background()
			body := "return 'from ' .. ARGV[1]"
			var load *redis.StringCmd
			var eval, evalsha, fc, fcro, gone *redis.Cmd
			_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				eval = p.Eval(ctx, body, nil, "eval")
				evalsha = p.EvalSha(ctx, sha1hex(body), nil, "evalsha")
				load = p.FunctionLoad(ctx, "#!lua name=pipe\nredis.register_function('pf', function(k, a) return a[1] end)")
				fc = p.FCall(ctx, "pf", nil, "fcall")
				p.FunctionDelete(ctx, "pipe")
				p.FunctionLoad(ctx, "#!lua name=pipe\nredis.register_function{function_name='pf', callback=function(k, a) return 'ro ' .. a[1] end, flags={'no-writes'}}")
				fcro = p.FCallRO(ctx, "pf", nil, "fcall_ro")
				p.FunctionFlush(ctx)
				gone = p.FCall(ctx, "pf", nil, "gone")
				return nil
			})
			if err != nil && err.Error() != "ERR Function not found" {
				t.Fatal(err)
			}
			for _, c := range []struct {
				cmd  *redis.Cmd
				want string
			}{{eval, "from eval"}, {evalsha, "from evalsha"}, {fc, "fcall"}, {fcro, "ro fcall_ro"}} {
				if v, err := c.cmd.Text(); err != nil || v != c.want {
					t.Errorf("%v: %q %v, want %q", c.cmd.Args(), v, err, c.want)
				}
			}
			if load.Val() != "pipe" {
				t.Errorf("FUNCTION LOAD: %v", load)
			}
			if err := gone.Err(); err == nil || err.Error() != "ERR Function not found" {
				t.Errorf("FCALL after FUNCTION FLUSH: %v", err)
			}
		})
	}
}

func sha1hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestFunctionDumpRestoreWithRedis: a payload FUNCTION DUMP of
// redis-server wrote restores into kvs (in a cluster, through a follower,
// reaching every node), and kvs's payload restores into redis-server:
// both end with the same libraries.
func TestFunctionDumpRestoreWithRedis(t *testing.T) {
	requireRedis(t)
	ctx := context.Background()
	ref := scriptClient(startRedis(t).Addr)
	defer ref.Close()
	libs := []string{appLibrary,
		"#!lua name=small\nredis.register_function('small', function() return 'small' end)",
		"#!lua name=long\n" + strings.Repeat("redis.log(redis.LOG_DEBUG, 'padding padding padding')\n", 50) +
			"redis.register_function('long', function() return 'long' end)",
	}
	for _, lib := range libs {
		if err := ref.FunctionLoad(ctx, lib).Err(); err != nil {
			t.Fatal(err)
		}
	}
	payload, err := ref.FunctionDump(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	want := functionListing(t, ref)

	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	via := scriptClient(followers(nodes, leader)[0].Addr)
	defer via.Close()
	if err := via.FunctionRestore(ctx, payload).Err(); err != nil {
		t.Fatalf("FUNCTION RESTORE of redis-server's payload: %v", err)
	}
	for _, n := range nodes {
		c := scriptClient(n.Addr)
		waitFor(t, "the libraries on "+n.Name, func() error {
			if got := functionListing(t, c); got != want {
				return fmt.Errorf("FUNCTION LIST %s, want %s", got, want)
			}
			return nil
		})
		c.Close()
	}
	if v, err := via.FCall(ctx, "small", nil).Text(); err != nil || v != "small" {
		t.Fatalf("FCALL small: %q %v", v, err)
	}
	err = via.FunctionRestore(ctx, payload).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "ERR Library ") || !strings.HasSuffix(err.Error(), " already exists") {
		t.Fatalf("FUNCTION RESTORE again: %v", err)
	}

	back, err := via.FunctionDump(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := ref.FunctionRestore(ctx, back+"x").Err(); err == nil || err.Error() != "ERR DUMP payload version or checksum are wrong" {
		t.Fatalf("redis-server given a bad payload: %v", err)
	}
	if err := ref.Do(ctx, "FUNCTION", "RESTORE", back, "FLUSH").Err(); err != nil {
		t.Fatalf("redis-server restoring kvs's payload: %v", err)
	}
	if got := functionListing(t, ref); got != want {
		t.Fatalf("redis-server after restoring kvs's payload: %s, want %s", got, want)
	}
}

// functionListing is FUNCTION LIST WITHCODE as sorted text: libraries
// and functions in name order (Redis lists them in its hash tables'
// order).
func functionListing(t *testing.T, c *redis.Client) string {
	t.Helper()
	libs, err := c.FunctionList(context.Background(), redis.FunctionListQuery{WithCode: true}).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range libs {
		var fns []string
		for _, f := range l.Functions {
			fns = append(fns, fmt.Sprintf("%s%v%s", f.Name, f.Flags, f.Description))
		}
		slices.Sort(fns)
		out = append(out, l.Name+"="+strings.Join(fns, ",")+"\n"+l.Code)
	}
	slices.Sort(out)
	return strings.Join(out, "|")
}
