package test

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestChaosList is TestChaos's fault schedule with a list workload: workers
// on every node RPUSH unique values to a few lists and read them whole
// with LRANGE (--reads linearizable), and porcupine checks the history
// against a model of lists: each RPUSH appends its value and answers the
// new length, each LRANGE answers the list as it is. A lost, repeated or
// reordered element, or a read that misses an acknowledged push, makes
// the history non-linearizable.
//
//	go test ./test/ -run TestChaosList -v -args -chaos.list-time=1m -seed=42
var flagChaosListTime = flag.Duration("chaos.list-time", 10*time.Second, "how long TestChaosList injects faults")

func TestChaosList(t *testing.T) {
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

	var keys []string
	for k := range 8 {
		keys = append(keys, fmt.Sprintf("chaoslist:%c", 'a'+k))
	}
	h := &listHistory{origin: time.Now()}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range chaosWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lw := &listHistWorker{h: h, id: w, client: w, stride: chaosWorkers, nodes: nodes, keys: keys,
				rng: rand.New(rand.NewSource(seed + int64(w))), next: listNext}
			lw.run(stop)
		}()
	}
	stopped := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopped)
	waitOK(t, h, chaosMinOK)
	for end := time.Now().Add(*flagChaosListTime); time.Now().Before(end); {
		f := c.draw(c.schedule)
		c.faults[f.name]++
		f.inject(c)
		c.settle()
		time.Sleep(c.between(0, 2*chaosElection)) // a quiet spell between faults; not synchronisation
	}
	waitOK(t, h, countOK(h.Ops())+chaosMinOK)
	stopped()

	// A final linearizable read of each list, part of the history, so a
	// push lost at the end shows too.
	leader := c.waitLeader()
	fw := &listHistWorker{h: h, id: chaosWorkers, client: 1 << 20, stride: 1, nodes: []*Node{leader}, keys: keys}
	conn, err := net.DialTimeout("tcp", leader.Addr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	for _, k := range usedKeys(h, keys) {
		op := listOp{Kind: "lrange", Key: k, Node: leader.Name, ClientID: fw.client}
		fw.do(conn, r, &op, []string{"LRANGE", k, "0", "-1"})
		if op.Outcome != OutcomeOK {
			t.Fatalf("final LRANGE %s: %s", k, op.Result)
		}
	}

	ops := h.Ops()
	ok, pushes := 0, 0
	byOutcome := map[Outcome]int{}
	for _, o := range ops {
		byOutcome[o.Outcome]++
		if o.Outcome == OutcomeOK {
			ok++
			if o.Kind == "rpush" {
				pushes++
			}
		}
		if o.ErrReply && o.Outcome == OutcomeUnknown && !strings.HasPrefix(o.Result, "UNCERTAIN") {
			t.Errorf("unexpected error reply: %+v", o)
		}
	}
	var faults []string
	for _, f := range chaosFaults {
		faults = append(faults, fmt.Sprintf("%s=%d", f.name, c.faults[f.name]))
	}
	t.Logf("chaos list: seed %d, faults %s; %d operations %v, %d pushes acknowledged", seed, strings.Join(faults, " "), len(ops), byOutcome, pushes)
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(listModel, listPorcupineOps(ops), linCheckTimeout)
	t.Logf("porcupine: %s in %v", res, time.Since(start).Round(time.Millisecond))
	if res != porcupine.Ok {
		dir := testDir(t)
		html := filepath.Join(dir, "list-linearizability.html")
		if err := porcupine.VisualizePath(listModel, info, html); err != nil {
			t.Errorf("writing %s: %v", html, err)
		}
		t.Errorf("list history of %d operations is %s; visualization %s", len(ops), res, html)
	}
	if pushes == 0 {
		t.Errorf("no RPUSH acknowledged")
	}
}

// listOp is one operation of the list workload.
type listOp struct {
	ClientID int
	Node     string
	Kind     string // "rpush" or "lrange"
	Key      string
	Arg      string // the value pushed
	Invoke   int64
	Return   int64 // math.MaxInt64 for OutcomeUnknown
	Outcome  Outcome
	Result   string   // RPUSH's length, or the error
	Elems    []string // LRANGE's list
	ErrReply bool
}

// listHistory is the history of the list and Lua workloads.
type listHistory = opHistory[listOp]

func (o listOp) outcome() Outcome { return o.Outcome }

// listHistWorker issues the list or the Lua workload's operations, as
// next picks them, and records each in h.
type listHistWorker struct {
	h              *listHistory
	id             int
	client, stride int
	nodes          []*Node
	keys           []string
	rng            *rand.Rand
	seq            int
	// next picks the operation on key: it sets op's Kind and Arg and
	// returns the request.
	next func(w *listHistWorker, key string, op *listOp) []string
	// send runs a request; nil is one round trip.
	send func(c net.Conn, r *bufio.Reader, op *listOp, args []string) (Value, error)
}

// listKeyEpoch is how long the list workers keep to one set of keys
// before moving on to fresh ones. A key's history is one partition of the
// linearizability check, whose cost grows much faster than its length (and
// a list's state with it): bounding each key's history by time keeps the
// check's cost in proportion to the run's length, however fast the
// servers answer. (Before keys moved on, a faster kvs made 15,000
// operations on 8 keys, which porcupine could not decide in 10 s.)
const listKeyEpoch = 2 * time.Second

// keyEpoch is the number of the key epoch now, on h's clock.
func keyEpoch(h *listHistory) int { return int(time.Duration(h.Now()) / listKeyEpoch) }

// epochKey is base's key in epoch e.
func epochKey(base string, e int) string { return base + ":" + strconv.Itoa(e) }

// usedKeys is every key of bases in every epoch so far: those the
// workers may have written.
func usedKeys(h *listHistory, bases []string) []string {
	var out []string
	for e := range keyEpoch(h) + 1 {
		for _, b := range bases {
			out = append(out, epochKey(b, e))
		}
	}
	return out
}

// listNext is the list workload: an RPUSH of a unique value or an LRANGE
// of the whole list, evenly.
func listNext(w *listHistWorker, key string, op *listOp) []string {
	if w.rng.Intn(2) == 0 {
		w.seq++
		op.Kind, op.Arg = "rpush", fmt.Sprintf("w%d-%d", w.id, w.seq)
		return []string{"RPUSH", key, op.Arg}
	}
	op.Kind = "lrange"
	return []string{"LRANGE", key, "0", "-1"}
}

func (w *listHistWorker) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		n := w.nodes[w.rng.Intn(len(w.nodes))]
		c, err := net.DialTimeout("tcp", n.Addr, time.Second)
		if err != nil {
			time.Sleep(50 * time.Millisecond) // retry interval while a node is down
			continue
		}
		r := bufio.NewReader(c)
		for i := 0; i < 20; i++ {
			select {
			case <-stop:
				c.Close()
				return
			default:
			}
			key := epochKey(w.keys[w.rng.Intn(len(w.keys))], keyEpoch(w.h))
			op := listOp{ClientID: w.client, Node: n.Name, Key: key}
			if !w.do(c, r, &op, w.next(w, key, &op)) {
				break
			}
			if op.Outcome != OutcomeOK {
				time.Sleep(20 * time.Millisecond) // back off as a client would; not synchronisation
			}
		}
		c.Close()
	}
}

// do runs one operation and records it; it reports whether the
// connection is still usable.
func (w *listHistWorker) do(c net.Conn, r *bufio.Reader, op *listOp, args []string) bool {
	op.Invoke = w.h.Now()
	send := w.send
	if send == nil {
		send = func(c net.Conn, r *bufio.Reader, _ *listOp, args []string) (Value, error) {
			return roundTrip(c, r, args)
		}
	}
	v, err := send(c, r, op, args)
	op.Return = w.h.Now()
	switch {
	case err != nil:
		op.Outcome, op.Result = OutcomeUnknown, err.Error()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			op.Result = "timeout: " + err.Error()
		}
	case v.IsError():
		op.Result, op.ErrReply = v.Str, true
		op.Outcome = OutcomeUnknown
		if strings.HasPrefix(v.Str, "CLUSTERDOWN") || strings.HasPrefix(v.Str, "TRYAGAIN") || strings.HasPrefix(v.Str, "LOADING") {
			op.Outcome = OutcomeFailed
		}
	default:
		op.Outcome, op.Result = OutcomeOK, v.Str
		for _, e := range v.Elems {
			op.Elems = append(op.Elems, e.Str)
		}
	}
	if op.Outcome == OutcomeUnknown {
		op.Return = math.MaxInt64
	}
	w.h.Add(*op)
	if op.Outcome == OutcomeUnknown {
		w.client += w.stride // porcupine's clients must not overlap
	}
	return err == nil
}

// listInput and listOutput are porcupine's view of one operation; a list's
// state is its elements joined by commas (values never hold one).
type listInput struct {
	Kind, Key, Arg string
}

type listOutput struct {
	Unknown bool
	Length  int
	List    string
}

var listModel = porcupine.Model{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		return partitionBy(ops, func(o porcupine.Operation) string { return o.Input.(listInput).Key })
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(string), input.(listInput), output.(listOutput)
		if in.Kind == "rpush" {
			next := in.Arg
			if s != "" {
				next = s + "," + in.Arg
			}
			return out.Unknown || out.Length == strings.Count(next, ",")+1, next
		}
		return out.List == s, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(listInput), output.(listOutput)
		switch {
		case out.Unknown:
			return fmt.Sprintf("%s %s %s -> ?", in.Kind, in.Key, in.Arg)
		case in.Kind == "rpush":
			return fmt.Sprintf("rpush %s %s -> %d", in.Key, in.Arg, out.Length)
		}
		return fmt.Sprintf("lrange %s -> [%s]", in.Key, out.List)
	},
	DescribeState: func(state any) string { return "[" + state.(string) + "]" },
}

// listPorcupineOps converts the history: failed operations had no effect
// and reads of unknown outcome returned nothing, so both are left out.
func listPorcupineOps(ops []listOp) []porcupine.Operation {
	var out []porcupine.Operation
	for _, o := range ops {
		if o.Outcome == OutcomeFailed || (o.Outcome == OutcomeUnknown && o.Kind == "lrange") {
			continue
		}
		n, _ := strconv.Atoi(o.Result)
		out = append(out, porcupine.Operation{
			ClientId: o.ClientID,
			Input:    listInput{Kind: o.Kind, Key: o.Key, Arg: o.Arg},
			Call:     o.Invoke,
			Output:   listOutput{Unknown: o.Outcome == OutcomeUnknown, Length: n, List: strings.Join(o.Elems, ",")},
			Return:   o.Return,
		})
	}
	return out
}
