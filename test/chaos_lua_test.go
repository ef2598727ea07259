package test

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestChaosLua is TestChaos's fault schedule with a Lua read-modify-write
// workload: workers on every node run, by EVALSHA (EVAL after a
// NOSCRIPT, as go-redis's Script.Run does), a script that reads a key,
// appends a unique element to what it read and writes the result back,
// answering it; others read the keys with GET and with EVALSHA of a
// no-writes script (--reads linearizable, so both are linearizable
// reads). Porcupine checks the history against a model of appends: a
// script that was not atomic, ran twice or was lost, a replica that ran
// it differently, or a read that missed an acknowledged append makes the
// history non-linearizable.
//
//	go test ./test/ -run TestChaosLua -v -args -chaos.lua-time=1m -seed=42
var flagChaosLuaTime = flag.Duration("chaos.lua-time", 10*time.Second, "how long TestChaosLua injects faults")

const (
	// chaosAppendScript appends ARGV[1] to the comma-separated list in
	// KEYS[1] and answers the new list.
	chaosAppendScript = `local v = redis.call('GET', KEYS[1])
if v then v = v .. ',' .. ARGV[1] else v = ARGV[1] end
redis.call('SET', KEYS[1], v)
return v`
	// chaosReadScript answers KEYS[1], '' when missing; a read, by its
	// shebang.
	chaosReadScript = "#!lua flags=no-writes\nreturn redis.call('GET', KEYS[1]) or ''"
)

func TestChaosLua(t *testing.T) {
	t.Parallel()
	seed := testSeed(t)
	nodes := startCluster(t, 3, "--reads", "linearizable")
	c := &chaos{
		t: t, nodes: nodes, rng: rand.New(rand.NewSource(seed)),
		start: time.Now(), faults: map[string]int{}, out: map[int]bool{}, gens: map[string]int{},
		schedule: chaosFaults,
	}
	t.Cleanup(c.resume)
	c.proxies = proxyRaft(t, nodes)

	// Loaded once, on the leader: the scripts are replicated state from
	// then on.
	scripts := map[string]string{}
	lc, err := net.DialTimeout("tcp", c.waitLeader().Addr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	lr := bufio.NewReader(lc)
	for _, body := range []string{chaosAppendScript, chaosReadScript} {
		sha, err := roundTrip(lc, lr, []string{"SCRIPT", "LOAD", body})
		if err != nil || sha.IsError() {
			t.Fatalf("SCRIPT LOAD: %v %s", err, sha)
		}
		scripts[body] = sha.Str
	}
	lc.Close()

	var keys []string
	for k := range 6 {
		keys = append(keys, fmt.Sprintf("chaoslua:%c", 'a'+k))
	}
	h := &listHistory{origin: time.Now()}
	var noscript sync.Map // node name -> NOSCRIPT replies, fallen back from
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range chaosWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lw := &listHistWorker{h: h, id: w, client: w, stride: chaosWorkers, nodes: nodes, keys: keys,
				rng: rand.New(rand.NewSource(seed + int64(w))), next: luaNext(scripts), send: evalFallback(scripts, &noscript)}
			lw.run(stop)
		}()
	}
	stopped := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopped)
	waitOK(t, h, chaosMinOK)
	for end := time.Now().Add(*flagChaosLuaTime); time.Now().Before(end); {
		f := c.draw(c.schedule)
		c.faults[f.name]++
		f.inject(c)
		c.settle()
		time.Sleep(c.between(0, 2*chaosElection)) // a quiet spell between faults; not synchronisation
	}
	waitOK(t, h, countOK(h.Ops())+chaosMinOK)
	stopped()

	// A final read of each key on the leader, part of the history, so an
	// append lost at the end shows too.
	leader := c.waitLeader()
	fw := &listHistWorker{h: h, id: chaosWorkers, client: 1 << 20, stride: 1}
	conn, err := net.DialTimeout("tcp", leader.Addr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	for _, k := range usedKeys(h, keys) {
		op := listOp{Kind: "get", Key: k, Node: leader.Name, ClientID: fw.client}
		fw.do(conn, r, &op, []string{"GET", k})
		if op.Outcome != OutcomeOK {
			t.Fatalf("final GET %s: %s", k, op.Result)
		}
	}

	ops := h.Ops()
	appends := 0
	byOutcome := map[Outcome]int{}
	for _, o := range ops {
		byOutcome[o.Outcome]++
		if o.Outcome == OutcomeOK && o.Kind == "append" {
			appends++
		}
		if o.ErrReply && o.Outcome == OutcomeUnknown && !strings.HasPrefix(o.Result, "UNCERTAIN") {
			t.Errorf("unexpected error reply: %+v", o)
		}
	}
	var faults []string
	for _, f := range chaosFaults {
		faults = append(faults, fmt.Sprintf("%s=%d", f.name, c.faults[f.name]))
	}
	var fallbacks []string
	noscript.Range(func(k, v any) bool { fallbacks = append(fallbacks, fmt.Sprintf("%s=%d", k, v)); return true })
	t.Logf("chaos lua: seed %d, faults %s; %d operations %v, %d appends acknowledged; NOSCRIPT fallbacks %v",
		seed, strings.Join(faults, " "), len(ops), byOutcome, appends, fallbacks)
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(luaModel, luaPorcupineOps(ops), linCheckTimeout)
	t.Logf("porcupine: %s in %v", res, time.Since(start).Round(time.Millisecond))
	if res != porcupine.Ok {
		dir := testDir(t)
		html := filepath.Join(dir, "lua-linearizability.html")
		if err := porcupine.VisualizePath(luaModel, info, html); err != nil {
			t.Errorf("writing %s: %v", html, err)
		}
		t.Errorf("Lua history of %d operations is %s; visualization %s", len(ops), res, html)
	}
	if appends == 0 {
		t.Errorf("no script append acknowledged")
	}
}

// luaNext is the Lua workload: its operations are listOps of kind
// "append" (Arg the element, Result the list the script answered), "get"
// and "read" (the read-only script; Result the list).
func luaNext(scripts map[string]string) func(w *listHistWorker, key string, op *listOp) []string {
	return func(w *listHistWorker, key string, op *listOp) []string {
		switch x := w.rng.Intn(4); {
		case x < 2:
			w.seq++
			op.Kind, op.Arg = "append", fmt.Sprintf("w%d-%d", w.id, w.seq)
			return []string{"EVALSHA", scripts[chaosAppendScript], "1", key, op.Arg}
		case x == 2:
			op.Kind = "get"
			return []string{"GET", key}
		}
		op.Kind = "read"
		return []string{"EVALSHA", scripts[chaosReadScript], "1", key}
	}
}

// roundTrip sends args and reads the reply.
func roundTrip(c net.Conn, r *bufio.Reader, args []string) (Value, error) {
	c.SetDeadline(time.Now().Add(histOpTimeout))
	if _, err := c.Write(encodeCommand(args...)); err != nil {
		return Value{}, err
	}
	return readValue(r)
}

// evalFallback sends a request, and an EVALSHA answered NOSCRIPT (which
// runs nothing) again as EVAL of the body, within the same operation,
// counting the fallbacks per node in noscript.
func evalFallback(scripts map[string]string, noscript *sync.Map) func(c net.Conn, r *bufio.Reader, op *listOp, args []string) (Value, error) {
	return func(c net.Conn, r *bufio.Reader, op *listOp, args []string) (Value, error) {
		v, err := roundTrip(c, r, args)
		if err == nil && v.IsError() && strings.HasPrefix(v.Str, "NOSCRIPT") {
			n, _ := noscript.LoadOrStore(op.Node, 0)
			noscript.Store(op.Node, n.(int)+1)
			for body, sha := range scripts {
				if sha == args[1] {
					args = append([]string{"EVAL", body}, args[2:]...)
				}
			}
			v, err = roundTrip(c, r, args)
		}
		return v, err
	}
}

// luaInput and luaOutput are porcupine's view of one operation; the state
// is the key's comma-separated list ("" when missing).
type luaInput struct {
	Kind, Key, Arg string
}

type luaOutput struct {
	Unknown bool
	List    string
}

var luaModel = porcupine.Model{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		return partitionBy(ops, func(o porcupine.Operation) string { return o.Input.(luaInput).Key })
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(string), input.(luaInput), output.(luaOutput)
		if in.Kind == "append" {
			next := in.Arg
			if s != "" {
				next = s + "," + in.Arg
			}
			return out.Unknown || out.List == next, next
		}
		return out.List == s, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(luaInput), output.(luaOutput)
		switch {
		case out.Unknown:
			return fmt.Sprintf("%s %s %s -> ?", in.Kind, in.Key, in.Arg)
		case in.Kind == "append":
			return fmt.Sprintf("append %s %s -> [%s]", in.Key, in.Arg, out.List)
		}
		return fmt.Sprintf("%s %s -> [%s]", in.Kind, in.Key, out.List)
	},
	DescribeState: func(state any) string { return "[" + state.(string) + "]" },
}

// luaPorcupineOps converts the history: failed operations had no effect
// and reads of unknown outcome returned nothing, so both are left out.
func luaPorcupineOps(ops []listOp) []porcupine.Operation {
	var out []porcupine.Operation
	for _, o := range ops {
		if o.Outcome == OutcomeFailed || (o.Outcome == OutcomeUnknown && o.Kind != "append") {
			continue
		}
		out = append(out, porcupine.Operation{
			ClientId: o.ClientID,
			Input:    luaInput{Kind: o.Kind, Key: o.Key, Arg: o.Arg},
			Call:     o.Invoke,
			Output:   luaOutput{Unknown: o.Outcome == OutcomeUnknown, List: o.Result},
			Return:   o.Return,
		})
	}
	return out
}
