package test

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"net"
	"strings"
	"sync"
	"time"
)

// A history is what clients saw: for each operation, when it was sent, when
// its reply came back and what the reply said. linearizable_test.go checks
// histories; this file records them from workers that talk raw RESP to kvs
// nodes, so that nothing between the client and the wire (retries, pools,
// redirects) hides what the server answered.

// HistKind is the command an operation ran.
type HistKind string

const (
	KindGet  HistKind = "get"  // GET key
	KindSet  HistKind = "set"  // SET key value
	KindIncr HistKind = "incr" // INCR key
	KindDel  HistKind = "del"  // DEL key; makes the key absent so CAS can apply again
	// KindCAS is kvs's one truly conditional write on a string:
	// SET key value NX GET, a compare-and-set from "absent" to value. kvs
	// has no WATCH/MULTI and no SET IFEQ, and SET XX or a GET followed by a
	// SET would not be atomic. With GET the reply says which branch was
	// taken: nil when the key was absent and is now set, the current value
	// (left unchanged) otherwise, so a refused CAS is also a read.
	KindCAS HistKind = "cas"
)

// Outcome says what the reply proves about an operation's effect.
type Outcome string

const (
	OutcomeOK Outcome = "ok" // a reply that is not an error: the operation took effect
	// OutcomeFailed: a CLUSTERDOWN, TRYAGAIN or LOADING error, which kvs
	// uses only when the command certainly did not take effect, or a
	// MOVED redirection (a node that does not serve the slot ran nothing;
	// a plain client should not get one, which unexpectedErrors reports).
	OutcomeFailed Outcome = "failed"
	// OutcomeUnknown: an UNCERTAIN error, a timeout, a broken connection or
	// an error reply kvs should never send for this workload. The operation
	// may take effect at any time after its invocation, or never.
	OutcomeUnknown Outcome = "unknown"
)

// HistOp is one operation in a history. Times are nanoseconds since the
// History's origin, read from the monotonic clock.
type HistOp struct {
	ClientID int      // the porcupine client: a worker gets a new one after an unknown outcome
	Node     string   // name of the node the connection went to
	Kind     HistKind //
	Key      string   //
	Arg      string   // the value written by Set and CAS; empty otherwise
	Invoke   int64    // just before the request was written
	Return   int64    // just after the reply was read; math.MaxInt64 for OutcomeUnknown
	Outcome  Outcome  //
	Result   string   // reply text: GET's value, INCR's new value, DEL's count, CAS's old value, or the error
	Nil      bool     // the reply was nil: GET of an absent key, or a CAS that applied
	ErrReply bool     // Result is an error reply's text (not a network error's)
}

func (o HistOp) String() string {
	res := o.Result
	if o.Nil {
		res = "nil"
	}
	ret := "inf"
	if o.Return != math.MaxInt64 {
		ret = fmt.Sprint(o.Return)
	}
	return fmt.Sprintf("c%d@%s %s(%s %s) [%d,%s] %s %s", o.ClientID, o.Node, o.Kind, o.Key, o.Arg, o.Invoke, ret, o.Outcome, res)
}

// History collects operations from concurrent workers.
type History = opHistory[HistOp]

func NewHistory() *History { return &History{origin: time.Now()} }

// opHistory collects finished operations of any workload (the string
// workload's HistOp, the list workload's listOp) with one clock.
type opHistory[T any] struct {
	origin time.Time // Invoke and Return count from here

	mu  sync.Mutex // guards ops
	ops []T
}

// Now is the current time on h's clock.
func (h *opHistory[T]) Now() int64 { return int64(time.Since(h.origin)) }

// Add appends a finished operation.
func (h *opHistory[T]) Add(op T) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// Ops returns a copy of the operations added so far, in the order they
// finished.
func (h *opHistory[T]) Ops() []T {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]T(nil), h.ops...)
}

// histOpTimeout bounds one request. Past it the outcome is unknown and the
// connection is dropped; it is long enough to ride out an election on a
// loaded machine, so that most operations get a definite answer.
const histOpTimeout = 5 * time.Second

// histWorker issues random operations on a few keys against kvs nodes over
// raw RESP, one at a time, and records each in a History.
//
// Keys come in three sorts. Mixed keys (keys) get every operation, INCR
// and SET alike: porcupine can check them, the stale-read checker cannot
// (it needs to know the order of writes from the values alone). Register
// keys get SET, CAS, DEL and GET with unique values; counter keys get INCR
// and GET only. Those two the stale-read checker can judge.
type histWorker struct {
	id        int      // first ClientID; later ones add stride
	stride    int      // the number of workers, so ClientIDs never collide
	nodes     []*Node  // tried in turn, starting at id % len(nodes)
	keys      []string // mixed keys
	registers []string // SET, CAS, DEL and GET only
	counters  []string // INCR and GET only
	// label names a node in the history (HistOp.Node); nil means its
	// Name. It is asked after each successful dial, so a node whose data
	// was wiped can be told apart from its earlier self.
	label   func(*Node) string
	rng     *rand.Rand
	h       *History
	seq     int // makes every written value unique within the worker
	client  int // current ClientID
	attempt int // how many connections were opened, to pick the next node
}

func newHistWorker(h *History, id, workers int, nodes []*Node, keys []string, seed int64) *histWorker {
	return &histWorker{
		id: id, stride: workers, nodes: nodes, keys: keys, h: h, client: id,
		rng: rand.New(rand.NewSource(seed + int64(id))),
	}
}

// run works until stop closes. A failed dial (the node is down) moves to
// the next node; so does a broken connection.
func (w *histWorker) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		n := w.nodes[(w.id+w.attempt)%len(w.nodes)]
		w.attempt++
		c, err := net.DialTimeout("tcp", n.Addr, time.Second)
		if err != nil {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond): // the node is down; try another
			}
			continue
		}
		name := n.Name
		if w.label != nil {
			name = w.label(n)
		}
		w.session(c, name, stop)
		c.Close()
	}
}

// session issues operations on one connection until it breaks or stop
// closes.
func (w *histWorker) session(c net.Conn, node string, stop <-chan struct{}) {
	r := bufio.NewReader(c)
	for {
		select {
		case <-stop:
			return
		default:
		}
		op, args := w.next()
		op.Node = node
		op.ClientID = w.client
		if !w.do(c, r, &op, args) {
			return
		}
		if op.Outcome == OutcomeFailed {
			// No leader yet: back off as a client would, rather than
			// filling the history with refusals.
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// next picks an operation. Written values are integers so that INCR always
// finds one, and unique (worker id and sequence) so that a read names the
// write it saw.
func (w *histWorker) next() (HistOp, []string) {
	i := w.rng.Intn(len(w.keys) + len(w.registers) + len(w.counters))
	w.seq++
	val := fmt.Sprint((w.id+1)*1_000_000 + w.seq)
	p := w.rng.Intn(100)
	var key string
	switch {
	case i < len(w.keys):
		key = w.keys[i]
	case i < len(w.keys)+len(w.registers):
		key = w.registers[i-len(w.keys)]
		if p >= 60 && p < 80 {
			p -= 20 // a SET where a mixed key would get INCR
		}
	default:
		key = w.counters[i-len(w.keys)-len(w.registers)]
		if p < 50 {
			return HistOp{Kind: KindGet, Key: key}, []string{"GET", key}
		}
		return HistOp{Kind: KindIncr, Key: key}, []string{"INCR", key}
	}
	switch {
	case p < 40:
		return HistOp{Kind: KindGet, Key: key}, []string{"GET", key}
	case p < 60:
		return HistOp{Kind: KindSet, Key: key, Arg: val}, []string{"SET", key, val}
	case p < 80:
		return HistOp{Kind: KindIncr, Key: key}, []string{"INCR", key}
	case p < 92:
		return HistOp{Kind: KindCAS, Key: key, Arg: val}, []string{"SET", key, val, "NX", "GET"}
	default:
		return HistOp{Kind: KindDel, Key: key}, []string{"DEL", key}
	}
}

// do runs one operation, records it and reports whether the connection is
// still usable.
func (w *histWorker) do(c net.Conn, r *bufio.Reader, op *HistOp, args []string) bool {
	op.Invoke = w.h.Now()
	c.SetDeadline(time.Now().Add(histOpTimeout))
	var v Value
	_, err := c.Write(encodeCommand(args...))
	if err == nil {
		v, err = readValue(r)
	}
	op.Return = w.h.Now()
	classify(op, v, err)
	w.h.Add(*op)
	if op.Outcome == OutcomeUnknown {
		// The operation may still be pending; a real client would not
		// wait for it either. Porcupine needs a client's operations not to
		// overlap, so what follows is another client.
		w.client += w.stride
	}
	return err == nil
}

// classify sets op's Outcome, Result and Nil from the reply (or the error
// reading it).
func classify(op *HistOp, v Value, err error) {
	switch {
	case err != nil:
		op.Outcome, op.Result = OutcomeUnknown, err.Error()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			op.Result = "timeout: " + err.Error()
		}
	case v.IsError():
		op.Result, op.ErrReply = v.Str, true
		if strings.HasPrefix(v.Str, "CLUSTERDOWN") || strings.HasPrefix(v.Str, "TRYAGAIN") || strings.HasPrefix(v.Str, "LOADING") ||
			strings.HasPrefix(v.Str, "MOVED ") {
			op.Outcome = OutcomeFailed
		} else {
			op.Outcome = OutcomeUnknown // UNCERTAIN, or a surprise the checker must not trust
		}
	default:
		op.Outcome, op.Result, op.Nil = OutcomeOK, v.Str, v.Null
	}
	if op.Outcome == OutcomeUnknown {
		op.Return = math.MaxInt64
	}
}

// runHistWorkers starts workers over nodes and mixed keys; the returned
// function stops them and waits until each has recorded its last
// operation.
func runHistWorkers(h *History, workers int, nodes []*Node, keys []string, seed int64) (stop func()) {
	return runHistWorkersWith(h, histConfig{Workers: workers, Nodes: nodes, Keys: keys, Seed: seed})
}

// histConfig sets up a group of histWorkers; see histWorker for the key
// sorts.
type histConfig struct {
	Workers   int
	Nodes     []*Node
	Keys      []string // mixed
	Registers []string
	Counters  []string
	Seed      int64
	Label     func(*Node) string // nil: Node.Name
}

// runHistWorkersWith starts cfg.Workers workers; the returned function
// stops them and waits until each has recorded its last operation.
func runHistWorkersWith(h *History, cfg histConfig) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < cfg.Workers; i++ {
		w := newHistWorker(h, i, cfg.Workers, cfg.Nodes, cfg.Keys, cfg.Seed)
		w.registers, w.counters, w.label = cfg.Registers, cfg.Counters, cfg.Label
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(done)
		}()
	}
	return func() {
		close(done)
		wg.Wait()
	}
}

// unexpectedErrors lists operations whose reply was an error other than
// the CLUSTERDOWN, TRYAGAIN, UNCERTAIN and LOADING a failover or restart
// may cause: the workload never provokes one, so each is a finding.
func unexpectedErrors(ops []HistOp) []HistOp {
	var out []HistOp
	for _, o := range ops {
		code, _, _ := strings.Cut(o.Result, " ")
		if o.ErrReply && code != "CLUSTERDOWN" && code != "TRYAGAIN" && code != "UNCERTAIN" && code != "LOADING" {
			out = append(out, o)
		}
	}
	return out
}

// countOps counts ops by outcome, and the acknowledged ones by kind.
func countOps(ops []HistOp) (byOutcome map[Outcome]int, byKind map[HistKind]int) {
	byOutcome, byKind = map[Outcome]int{}, map[HistKind]int{}
	for _, o := range ops {
		byOutcome[o.Outcome]++
		if o.Outcome == OutcomeOK {
			byKind[o.Kind]++
		}
	}
	return byOutcome, byKind
}
