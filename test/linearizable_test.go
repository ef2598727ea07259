package test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Two checkers read a History (history_test.go):
//
//   - checkLinearizable, for --reads linearizable: porcupine searches for
//     one order of the operations, consistent with real time, in which a
//     single-key register explains every reply.
//   - staleViolations, for stale follower reads, where no such order need
//     exist: it checks only what stale reads still promise (no acknowledged
//     write lost, no invented value, no read going back in time on one
//     connection's node).
//
// Both treat an operation of unknown outcome as a write that may take
// effect at any moment after its invocation, or never: its Return is
// +infinity, so nothing that follows can prove it did not happen, and a
// linearization may place it after everything (which is "never").

// regInput, regOutput and regState are porcupine's view of one key.
type regInput struct {
	Key  string
	Kind HistKind
	Arg  string
}

type regOutput struct {
	Unknown bool   // the reply was lost: any output is possible
	Nil     bool   // GET of an absent key; CAS that applied
	Value   string // GET's value, INCR's new value, DEL's count, refused CAS's current value
}

// regState is a key's value; comparable, so porcupine's default equality
// and the checker's state cache work on it.
type regState struct {
	Exists bool
	Value  string
}

// registerModel is a single-key register with INCR on integer values,
// partitioned by key: a history is linearizable if and only if each key's
// part is, which keeps porcupine's search small.
var registerModel = porcupine.Model{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		return partitionBy(ops, func(o porcupine.Operation) string { return o.Input.(regInput).Key })
	},
	PartitionEvent: func(evs []porcupine.Event) [][]porcupine.Event {
		// A return event's Value is the output, which has no key: take the
		// key from the call with the same Id, which comes first.
		keys := map[int]string{}
		return partitionBy(evs, func(e porcupine.Event) string {
			if in, ok := e.Value.(regInput); ok {
				keys[e.Id] = in.Key
			}
			return keys[e.Id]
		})
	},
	Init: func() any { return regState{} },
	Step: func(state, input, output any) (bool, any) {
		return stepRegister(state.(regState), input.(regInput), output.(regOutput))
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		res := out.Value
		switch {
		case out.Unknown:
			res = "?"
		case out.Nil:
			res = "nil"
		}
		if in.Arg != "" {
			return fmt.Sprintf("%s %s %s -> %s", in.Kind, in.Key, in.Arg, res)
		}
		return fmt.Sprintf("%s %s -> %s", in.Kind, in.Key, res)
	},
	DescribeState: func(state any) string {
		if s := state.(regState); s.Exists {
			return s.Value
		}
		return "nil"
	},
	DescribeOperationMetadata: func(info any) string { return fmt.Sprint(info) },
}

// stepRegister applies one operation to s and reports whether out is a
// reply kvs could have given in state s. An unknown output fits any state.
func stepRegister(s regState, in regInput, out regOutput) (bool, regState) {
	switch in.Kind {
	case KindGet:
		if out.Nil {
			return !s.Exists, s
		}
		return s.Exists && out.Value == s.Value, s
	case KindSet:
		return true, regState{Exists: true, Value: in.Arg}
	case KindDel:
		want := "0"
		if s.Exists {
			want = "1"
		}
		return out.Unknown || out.Value == want, regState{}
	case KindIncr:
		n := int64(0)
		if s.Exists {
			var err error
			if n, err = strconv.ParseInt(s.Value, 10, 64); err != nil {
				// INCR refuses a non-integer and changes nothing; the
				// workload never makes one, so only a lost reply fits.
				return out.Unknown, s
			}
		}
		next := strconv.FormatInt(n+1, 10)
		return out.Unknown || out.Value == next, regState{Exists: true, Value: next}
	case KindCAS:
		if !s.Exists {
			return out.Unknown || out.Nil, regState{Exists: true, Value: in.Arg}
		}
		return out.Unknown || (!out.Nil && out.Value == s.Value), s
	}
	panic(fmt.Sprintf("unknown operation kind %q", in.Kind))
}

// partitionBy groups xs by key, keeping their order within each group.
func partitionBy[T any](xs []T, key func(T) string) [][]T {
	idx := map[string]int{}
	var out [][]T
	for _, x := range xs {
		k := key(x)
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], x)
	}
	return out
}

// porcupineOps converts a history for porcupine. Failed operations had no
// effect and reads of unknown outcome returned nothing, so both are left
// out; writes of unknown outcome stay, with Return +infinity.
func porcupineOps(ops []HistOp) []porcupine.Operation {
	var out []porcupine.Operation
	for _, o := range ops {
		if o.Outcome == OutcomeFailed || (o.Outcome == OutcomeUnknown && o.Kind == KindGet) {
			continue
		}
		out = append(out, porcupine.Operation{
			ClientId: o.ClientID,
			Input:    regInput{Key: o.Key, Kind: o.Kind, Arg: o.Arg},
			Call:     o.Invoke,
			Output:   regOutput{Unknown: o.Outcome == OutcomeUnknown, Nil: o.Nil, Value: o.Result},
			Return:   o.Return,
			Metadata: o.Node,
		})
	}
	return out
}

// linearizable runs porcupine on ops; Unknown means it ran out of time.
func linearizable(ops []HistOp, timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	return porcupine.CheckOperationsVerbose(registerModel, porcupineOps(ops), timeout)
}

// linCheckTimeout bounds porcupine's search. It is NP-hard in the number of
// concurrent operations; per-key partitions of a few seconds' history
// finish in well under a second, so running out is itself a finding.
const linCheckTimeout = 10 * time.Second

// checkLinearizable fails t unless the history is linearizable, and
// reports whether it is. On a violation, or a search that ran out of time,
// it writes porcupine's visualization and the raw history into outDir and
// names both.
func checkLinearizable(t testing.TB, ops []HistOp, outDir string) bool {
	t.Helper()
	start := time.Now()
	res, info := linearizable(ops, linCheckTimeout)
	t.Logf("porcupine: %s for %d operations in %v", res, len(ops), time.Since(start).Round(time.Millisecond))
	if res == porcupine.Ok {
		return true
	}
	html, raw := filepath.Join(outDir, "linearizability.html"), filepath.Join(outDir, "history.json")
	if err := porcupine.VisualizePath(registerModel, info, html); err != nil {
		t.Errorf("writing %s: %v", html, err)
	}
	if err := writeHistoryJSON(raw, ops); err != nil {
		t.Errorf("writing %s: %v", raw, err)
	}
	what := "not linearizable"
	if res == porcupine.Unknown {
		what = fmt.Sprintf("not shown linearizable within %v", linCheckTimeout)
	}
	t.Errorf("history of %d operations %s; visualization %s, history %s", len(ops), what, html, raw)
	return false
}

func writeHistoryJSON(path string, ops []HistOp) error {
	b, err := json.MarshalIndent(ops, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// finalRead is a key's value read after the cluster healed.
type finalRead struct {
	Nil   bool
	Value string
}

// A staleViolation is one finding of the stale-read checker. Lost marks a
// final value that is missing an acknowledged write.
type staleViolation struct {
	Lost bool
	Msg  string
}

func (v staleViolation) String() string { return v.Msg }

func found(format string, args ...any) staleViolation {
	return staleViolation{Msg: fmt.Sprintf(format, args...)}
}

func lost(format string, args ...any) staleViolation {
	return staleViolation{Lost: true, Msg: fmt.Sprintf(format, args...)}
}

// staleViolations checks a history made with stale reads allowed, and the
// final value of each key, for what stale reads still promise. A key is
// checked as a counter when INCR is its only write, as a register when it
// is written only by SET, CAS and DEL with unique values; a key mixing the
// two is reported, since the order of its writes cannot be recovered.
// "Per client-node" groups reads by ClientID and node.
func staleViolations(ops []HistOp, final map[string]finalRead) []staleViolation {
	byKey := map[string][]HistOp{}
	for _, o := range ops {
		if o.Outcome != OutcomeFailed {
			byKey[o.Key] = append(byKey[o.Key], o)
		}
	}
	for k := range final {
		if _, ok := byKey[k]; !ok {
			byKey[k] = nil
		}
	}
	var out []staleViolation
	for _, k := range sortedKeys(byKey) {
		f, ok := final[k]
		if !ok {
			out = append(out, found("%s: no final read", k))
			continue
		}
		var incr, other bool
		for _, o := range byKey[k] {
			incr = incr || o.Kind == KindIncr
			other = other || o.Kind == KindSet || o.Kind == KindCAS || o.Kind == KindDel
		}
		switch {
		case incr && other:
			out = append(out, found("%s: INCR mixed with other writes cannot be checked for stale reads", k))
		case incr:
			out = append(out, counterViolations(k, byKey[k], f)...)
		default:
			out = append(out, registerViolations(k, byKey[k], f)...)
		}
	}
	return out
}

// counterViolations checks a key written only by INCR: a read of n needs n
// INCRs invoked before it returned; reads on one client-node never
// decrease; the final value counts every acknowledged INCR and at most the
// unknown ones besides.
func counterViolations(key string, ops []HistOp, f finalRead) []staleViolation {
	var out []staleViolation
	var incrInvokes []int64
	acked, unknown, maxAcked := 0, 0, int64(0)
	for _, o := range ops {
		if o.Kind != KindIncr {
			continue
		}
		incrInvokes = append(incrInvokes, o.Invoke)
		if o.Outcome == OutcomeUnknown {
			unknown++
			continue
		}
		acked++
		if n, err := strconv.ParseInt(o.Result, 10, 64); err == nil {
			maxAcked = max(maxAcked, n)
		}
	}
	last := map[string]HistOp{} // client-node -> its latest read
	for _, r := range readsOf(ops) {
		n := int64(0)
		if !r.Nil {
			var err error
			if n, err = strconv.ParseInt(r.Result, 10, 64); err != nil || n < 1 {
				out = append(out, found("%s: read %q, never written: %v", key, r.Result, r))
				continue
			}
		}
		if invoked := countBefore(incrInvokes, r.Return); n > int64(invoked) {
			out = append(out, found("%s: read %d with only %d INCRs invoked before it returned: %v", key, n, invoked, r))
		}
		g := fmt.Sprintf("c%d@%s", r.ClientID, r.Node)
		if p, ok := last[g]; ok && readCount(p) > n {
			out = append(out, found("%s: read %d after %d on %s: went backwards: %v then %v", key, n, readCount(p), g, p, r))
		}
		last[g] = r
	}
	fv := int64(0)
	if !f.Nil {
		var err error
		if fv, err = strconv.ParseInt(f.Value, 10, 64); err != nil {
			return append(out, found("%s: final value %q is not a count", key, f.Value))
		}
	}
	switch {
	case fv < int64(acked) || fv < maxAcked:
		out = append(out, lost("%s: final value %d lost acknowledged INCRs: %d acknowledged (the highest returning %d) and %d unknown",
			key, fv, acked, maxAcked, unknown))
	case fv > int64(acked+unknown):
		out = append(out, found("%s: final value %d; only %d INCRs acknowledged and %d unknown",
			key, fv, acked, unknown))
	}
	return out
}

func readCount(r HistOp) int64 {
	n, _ := strconv.ParseInt(r.Result, 10, 64) // a nil read is 0
	return n
}

// registerViolations checks a key written by SET, CAS and DEL with unique
// values: a read (a GET, or a refused CAS) names a write invoked before the
// read returned; a later GET on one client-node never names a write that
// finished before one an earlier GET named began; the final value is left
// by a write no acknowledged write followed in real time. Refused CASs
// are left out of the client-node order: they run on the leader.
func registerViolations(key string, ops []HistOp, f finalRead) []staleViolation {
	var out []staleViolation
	initial := HistOp{Kind: KindDel, Invoke: math.MinInt64, Return: math.MinInt64, Outcome: OutcomeOK}
	writers := map[string]HistOp{} // value -> the write that wrote it
	nilWriters := []HistOp{initial}
	var acked []HistOp // writes known to have taken effect
	for _, o := range ops {
		switch {
		case o.Kind == KindDel:
			nilWriters = append(nilWriters, o)
		case o.Kind == KindSet || (o.Kind == KindCAS && (o.Outcome == OutcomeUnknown || o.Nil)):
			if p, dup := writers[o.Arg]; dup {
				out = append(out, found("%s: value %s written twice (%v, %v): reads are ambiguous", key, o.Arg, p, o))
			}
			writers[o.Arg] = o
		default:
			continue
		}
		if o.Outcome == OutcomeOK {
			acked = append(acked, o)
		}
	}
	seen := map[string][]HistOp{} // client-node -> writes its reads named
	for _, r := range readsOf(ops) {
		if r.Nil {
			continue // which DEL (or the start) a nil read saw is ambiguous
		}
		w, ok := writers[r.Result]
		if !ok || w.Invoke > r.Return {
			out = append(out, found("%s: read %q, never written before it: %v", key, r.Result, r))
			continue
		}
		if r.Kind != KindGet {
			// A refused CAS is a write: the leader answers it from its
			// own state, which a follower's later GET may lag behind.
			continue
		}
		g := fmt.Sprintf("c%d@%s", r.ClientID, r.Node)
		for _, p := range seen[g] {
			if w.Return < p.Invoke {
				out = append(out, found("%s: read on %s went backwards: saw %s, then %s, written before it: %v", key, g, p.Arg, w.Arg, r))
				break
			}
		}
		seen[g] = append(seen[g], w)
	}
	candidates := nilWriters
	if !f.Nil {
		w, ok := writers[f.Value]
		if !ok {
			return append(out, found("%s: final value %q was never written", key, f.Value))
		}
		candidates = []HistOp{w}
	}
	for _, w := range candidates {
		if !supersededBy(w, acked) {
			return out
		}
	}
	last := "nil"
	if len(acked) > 0 {
		last = acked[len(acked)-1].String()
	}
	return append(out, lost("%s: final value %+v lost an acknowledged write (last acknowledged: %s)", key, f, last))
}

// supersededBy reports whether an acknowledged write began after w
// returned, so w's value cannot be the one left.
func supersededBy(w HistOp, acked []HistOp) bool {
	for _, a := range acked {
		if a.Invoke > w.Return {
			return true
		}
	}
	return false
}

// readsOf returns the successful operations that read the key (GETs and
// refused CASs, which return the current value), in invocation order.
func readsOf(ops []HistOp) []HistOp {
	var out []HistOp
	for _, o := range ops {
		if o.Outcome == OutcomeOK && (o.Kind == KindGet || (o.Kind == KindCAS && !o.Nil)) {
			out = append(out, o)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Invoke < out[j].Invoke })
	return out
}

func countBefore(times []int64, t int64) int {
	n := 0
	for _, x := range times {
		if x <= t {
			n++
		}
	}
	return n
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// hop builds a hand-made operation on key "k" for the checkers' own tests:
// ret < 0 is an unknown outcome, res "nil" a nil reply.
func hop(client int, kind HistKind, arg string, invoke, ret int64, res string) HistOp {
	o := HistOp{ClientID: client, Node: "n1", Kind: kind, Key: "k", Arg: arg, Invoke: invoke, Return: ret, Outcome: OutcomeOK, Result: res}
	if res == "nil" {
		o.Nil, o.Result = true, ""
	}
	if ret < 0 {
		o.Outcome, o.Return, o.Result = OutcomeUnknown, math.MaxInt64, "UNCERTAIN the write may or may not have been applied: test"
	}
	return o
}

// TestLinearizableChecker shows the porcupine check can fail: each
// history is small enough to judge by hand.
func TestLinearizableChecker(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		ops  []HistOp
		want porcupine.CheckResult
	}{
		{"sequential", []HistOp{
			hop(0, KindGet, "", 0, 1, "nil"),
			hop(0, KindCAS, "5", 2, 3, "nil"),
			hop(1, KindCAS, "7", 4, 5, "5"),
			hop(1, KindIncr, "", 6, 7, "6"),
			hop(0, KindGet, "", 8, 9, "6"),
			hop(0, KindDel, "", 10, 11, "1"),
			hop(1, KindIncr, "", 12, 13, "1"),
		}, porcupine.Ok},
		{"concurrent reads either side of a write", []HistOp{
			hop(0, KindSet, "1", 0, 1, "OK"),
			hop(1, KindSet, "2", 2, 10, "OK"),
			hop(2, KindGet, "", 3, 4, "2"),
			hop(3, KindGet, "", 3, 5, "1"),
		}, porcupine.Ok},
		{"old value read after a new one was seen", []HistOp{
			hop(0, KindSet, "1", 0, 1, "OK"),
			hop(1, KindSet, "2", 2, 10, "OK"),
			hop(2, KindGet, "", 3, 4, "2"),
			hop(3, KindGet, "", 5, 6, "1"),
		}, porcupine.Illegal},
		{"stale read after an acknowledged write", []HistOp{
			hop(0, KindSet, "1", 0, 1, "OK"),
			hop(0, KindSet, "2", 2, 3, "OK"),
			hop(1, KindGet, "", 4, 5, "1"),
		}, porcupine.Illegal},
		{"lost acknowledged write", []HistOp{
			hop(0, KindIncr, "", 0, 1, "1"),
			hop(1, KindIncr, "", 2, 3, "2"),
			hop(0, KindGet, "", 4, 5, "1"),
		}, porcupine.Illegal},
		{"INCR result skipping one", []HistOp{
			hop(0, KindIncr, "", 0, 1, "1"),
			hop(1, KindIncr, "", 2, 3, "3"),
		}, porcupine.Illegal},
		{"CAS applied twice", []HistOp{
			hop(0, KindCAS, "1", 0, 1, "nil"),
			hop(1, KindCAS, "2", 2, 3, "nil"),
		}, porcupine.Illegal},
		{"unknown write that later appears", []HistOp{
			hop(0, KindSet, "1", 0, 1, "OK"),
			hop(1, KindSet, "2", 2, -1, ""),
			hop(0, KindGet, "", 5, 6, "1"),
			hop(2, KindGet, "", 7, 8, "2"),
		}, porcupine.Ok},
		{"unknown write that never appears", []HistOp{
			hop(0, KindSet, "1", 0, 1, "OK"),
			hop(1, KindIncr, "", 2, -1, ""),
			hop(0, KindGet, "", 5, 6, "1"),
		}, porcupine.Ok},
		{"unknown write seen, then unseen", []HistOp{
			hop(0, KindSet, "1", 0, 1, "OK"),
			hop(1, KindSet, "2", 2, -1, ""),
			hop(0, KindGet, "", 5, 6, "2"),
			hop(2, KindGet, "", 7, 8, "1"),
		}, porcupine.Illegal},
		{"failed write that appears", []HistOp{
			hop(0, KindSet, "1", 0, 1, "OK"),
			func() HistOp {
				o := hop(1, KindSet, "2", 2, 3, "CLUSTERDOWN no leader")
				o.Outcome, o.ErrReply = OutcomeFailed, true
				return o
			}(),
			hop(0, KindGet, "", 5, 6, "2"),
		}, porcupine.Illegal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got, _ := linearizable(c.ops, 5*time.Second); got != c.want {
				t.Errorf("porcupine: %s, want %s", got, c.want)
			}
		})
	}
	// checkLinearizable writes its evidence on a violation.
	dir := t.TempDir()
	rec := &recordingTB{TB: t}
	checkLinearizable(rec, cases[3].ops, dir)
	if len(rec.errors) != 1 {
		t.Fatalf("checkLinearizable on a stale read reported %q", rec.errors)
	}
	for _, f := range []string{"linearizability.html", "history.json"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}
}

// recordingTB keeps the errors reported to it instead of failing the test,
// so a test can check that a checker fails.
type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// TestStaleReadChecker shows the stale-read checks can fail.
func TestStaleReadChecker(t *testing.T) {
	t.Parallel()
	val := func(v string) finalRead { return finalRead{Value: v} }
	cases := []struct {
		name  string
		ops   []HistOp
		final finalRead
		bad   bool
	}{
		{"counter, lagging reads on different nodes", []HistOp{
			hop(0, KindIncr, "", 0, 1, "1"),
			hop(0, KindIncr, "", 2, 3, "2"),
			hop(1, KindGet, "", 4, 5, "nil"), // a stale follower: allowed
			hop(1, KindGet, "", 6, 7, "1"),
		}, val("2"), false},
		{"counter going backwards on one node", []HistOp{
			hop(0, KindIncr, "", 0, 1, "1"),
			hop(0, KindIncr, "", 2, 3, "2"),
			hop(1, KindGet, "", 4, 5, "2"),
			hop(1, KindGet, "", 6, 7, "1"),
		}, val("2"), true},
		{"counter read ahead of the INCRs", []HistOp{
			hop(0, KindIncr, "", 0, 1, "1"),
			hop(1, KindGet, "", 2, 3, "2"),
		}, val("1"), true},
		{"counter losing an acknowledged INCR", []HistOp{
			hop(0, KindIncr, "", 0, 1, "1"),
			hop(0, KindIncr, "", 2, 3, "2"),
		}, val("1"), true},
		{"counter with an unknown INCR that appears", []HistOp{
			hop(0, KindIncr, "", 0, 1, "1"),
			hop(1, KindIncr, "", 2, -1, ""),
			hop(2, KindGet, "", 4, 5, "2"),
		}, val("2"), false},
		{"register with a stale read", []HistOp{
			hop(0, KindSet, "1", 0, 1, "OK"),
			hop(0, KindSet, "2", 2, 3, "OK"),
			hop(1, KindGet, "", 4, 5, "1"),
		}, val("2"), false},
		{"register going backwards on one node", []HistOp{
			hop(0, KindSet, "1", 0, 1, "OK"),
			hop(0, KindSet, "2", 2, 3, "OK"),
			hop(1, KindGet, "", 4, 5, "2"),
			hop(1, KindGet, "", 6, 7, "1"),
		}, val("2"), true},
		{"register CAS refused on the leader, then a lagging GET on a follower", []HistOp{
			hop(0, KindSet, "1", 0, 1, "OK"),
			hop(0, KindSet, "2", 2, 3, "OK"),
			hop(1, KindCAS, "3", 4, 5, "2"), // refused: the leader holds 2
			hop(1, KindGet, "", 6, 7, "1"),  // the client's node has not applied 2 yet
		}, val("2"), false},
		{"register read of a value never written", []HistOp{
			hop(0, KindSet, "1", 0, 1, "OK"),
			hop(1, KindGet, "", 2, 3, "9"),
		}, val("1"), true},
		{"register losing an acknowledged write", []HistOp{
			hop(0, KindSet, "1", 0, 1, "OK"),
			hop(0, KindSet, "2", 2, 3, "OK"),
		}, val("1"), true},
		{"register losing an acknowledged write to nil", []HistOp{
			hop(0, KindCAS, "1", 0, 1, "nil"),
		}, finalRead{Nil: true}, true},
		{"register with an unknown write that appears", []HistOp{
			hop(0, KindSet, "1", 0, 1, "OK"),
			hop(1, KindSet, "2", 2, -1, ""),
			hop(0, KindGet, "", 4, 5, "1"),
		}, val("2"), false},
		{"register with concurrent writes, either may win", []HistOp{
			hop(0, KindSet, "1", 0, 5, "OK"),
			hop(1, KindSet, "2", 1, 4, "OK"),
		}, val("1"), false},
	}
	// The cases whose violation is a lost acknowledged write, which the
	// chaos report counts apart.
	lostCases := map[string]bool{
		"counter losing an acknowledged INCR":          true,
		"register losing an acknowledged write":        true,
		"register losing an acknowledged write to nil": true,
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := staleViolations(c.ops, map[string]finalRead{"k": c.final})
			if (len(v) > 0) != c.bad {
				t.Errorf("violations %q, want some: %v", v, c.bad)
			}
			var gotLost bool
			for _, x := range v {
				gotLost = gotLost || x.Lost
			}
			if gotLost != lostCases[c.name] {
				t.Errorf("violations %q: a lost write among them %v, want %v", v, gotLost, lostCases[c.name])
			}
		})
	}
}

// TestLinearizableHistoryCluster records a history on a three-node cluster
// with linearizable reads while its leader is killed with SIGKILL and
// restarted, and checks it with porcupine, final reads included.
func TestLinearizableHistoryCluster(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3, "--reads", "linearizable")
	waitLeader(t, nodes)
	keys := []string{"lin:a", "lin:b", "lin:c", "lin:d"}
	h := NewHistory()
	stop := runHistWorkers(h, 8, nodes, keys, testSeed(t))
	waitOK(t, h, 150)
	old := waitLeader(t, nodes)
	old.Kill()
	newLeader := waitLeader(t, nodes)
	t.Logf("%s killed; %s leads", old.Name, newLeader.Name)
	old.Start()
	waitOK(t, h, countOK(h.Ops())+150)
	stop()

	// Reads after the workload end are linearized after every
	// acknowledged write, so a lost one shows up as a violation.
	for _, k := range keys {
		waitFor(t, "a final read of "+k, func() error {
			w := newHistWorker(h, 100, 1, nodes, keys, 0)
			return finalGet(w, newLeader, k)
		})
	}
	ops := h.Ops()
	byOutcome, byKind := countOps(ops)
	t.Logf("%d operations: %v; acknowledged %v", len(ops), byOutcome, byKind)
	for _, o := range unexpectedErrors(ops) {
		t.Errorf("unexpected error reply: %v", o)
	}
	for _, k := range []HistKind{KindGet, KindSet, KindIncr, KindCAS, KindDel} {
		if byKind[k] == 0 {
			t.Errorf("no %s acknowledged: the workload did not exercise it", k)
		}
	}
	checkLinearizable(t, ops, testDir(t))
}

// finalGet reads key on n and records the read in the worker's history.
func finalGet(w *histWorker, n *Node, key string) error {
	c, err := net.DialTimeout("tcp", n.Addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	op := HistOp{ClientID: w.client, Node: n.Name, Kind: KindGet, Key: key}
	w.do(c, bufio.NewReader(c), &op, []string{"GET", key})
	if op.Outcome != OutcomeOK {
		return fmt.Errorf("GET %s: %s", key, op.Result)
	}
	return nil
}

// finishedOp is an operation of any workload's history, for countOK and
// waitOK.
type finishedOp interface{ outcome() Outcome }

func (o HistOp) outcome() Outcome { return o.Outcome }

func countOK[T finishedOp](ops []T) int {
	n := 0
	for _, o := range ops {
		if o.outcome() == OutcomeOK {
			n++
		}
	}
	return n
}

// waitOK waits until h holds at least n acknowledged operations.
func waitOK[T finishedOp](t testing.TB, h *opHistory[T], n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d acknowledged operations", n), func() error {
		if got := countOK(h.Ops()); got < n {
			return fmt.Errorf("%d so far", got)
		}
		return nil
	})
}
