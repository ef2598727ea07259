package test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestRecoverLostQuorum: a three-node cluster under a recorded workload
// loses two nodes for good (kill -9, data dirs deleted). The survivor is
// stopped, `kvs recover`ed into a one-node cluster, started, and joined by
// two fresh nodes; the history of the workload, with final reads of every
// key from the recovered cluster, must be linearizable: no write the
// cluster acknowledged is lost.
//
// What lost-quorum recovery can keep is what the survivor had: a write
// acknowledged by the other two alone would be lost, as expected. So the
// load stops first and the survivor is waited for until it has applied
// the leader's commit index; every acknowledged write is then on it, and
// the check is exact.
func TestRecoverLostQuorum(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3, "--reads", "linearizable")
	leader := waitLeader(t, nodes)
	survivor := followers(nodes, leader)[0]
	keys := []string{"rec:a", "rec:b", "rec:c", "rec:d"}
	registers := []string{"rec:r1", "rec:r2"}
	counters := []string{"rec:c1"}
	h := NewHistory()
	stop := runHistWorkersWith(h, histConfig{Workers: 6, Nodes: nodes, Keys: keys, Registers: registers, Counters: counters, Seed: testSeed(t)})
	waitOK(t, h, 400)
	stop()

	st, err := kvsStatus(leader.Addr)
	if err != nil {
		t.Fatal(err)
	}
	commit, _ := strconv.ParseUint(st.fields["commit_index"], 10, 64)
	waitFor(t, fmt.Sprintf("%s to apply the commit index %d", survivor.Name, commit), func() error {
		s, err := kvsStatus(survivor.Addr)
		if err != nil {
			return err
		}
		if a, _ := strconv.ParseUint(s.fields["applied_index"], 10, 64); a < commit {
			return fmt.Errorf("applied %d", a)
		}
		return nil
	})
	loseAllBut(t, nodes, survivor)
	out, code := runKVS(t, clusterWait, "recover", "--data-dir", survivor.DataDir(), "--node-id", survivor.Name)
	if code != 0 {
		t.Fatalf("kvs recover: exit %d\n%s", code, out)
	}
	t.Logf("kvs recover: %s", strings.TrimSpace(out))
	survivor.Start()
	recovered := []*Node{survivor}
	for _, id := range []string{"n4", "n5"} {
		n := newClusterNode(t, id, "--reads", "linearizable", "--join", survivor.Addr)
		n.Start()
		recovered = append(recovered, n)
	}
	waitMembers(t, recovered, 3)
	if l := waitLeader(t, recovered); l != survivor {
		t.Fatalf("%s leads the recovered cluster, want %s", l.Name, survivor.Name)
	}

	// Final reads, linearized after every operation of the workload: an
	// acknowledged write the recovery lost shows up as a violation.
	all := append(append(append([]string{}, keys...), registers...), counters...)
	final := map[string]finalRead{}
	for _, k := range all {
		waitFor(t, "a final read of "+k, func() error {
			w := newHistWorker(h, 100, 1, recovered, all, 0)
			return finalGet(w, survivor, k)
		})
		ops := h.Ops()
		last := ops[len(ops)-1]
		final[k] = finalRead{Nil: last.Nil, Value: last.Result}
	}
	// The fresh nodes hold the same.
	for _, n := range recovered[1:] {
		for _, k := range all {
			if f := final[k]; !f.Nil {
				waitValue(t, n, k, f.Value)
			}
		}
	}
	ops := h.Ops()
	byOutcome, byKind := countOps(ops)
	t.Logf("%d operations: %v; acknowledged %v", len(ops), byOutcome, byKind)
	for _, o := range unexpectedErrors(ops) {
		t.Errorf("unexpected error reply: %v", o)
	}
	checkLinearizable(t, ops, testDir(t))
	// The registers and counters, whose writes the stale-read checker can
	// order, are checked for lost writes by name as well.
	var checked []HistOp
	for _, o := range ops {
		if !slices.Contains(keys, o.Key) {
			checked = append(checked, o)
		}
	}
	for _, k := range keys {
		delete(final, k)
	}
	for _, v := range staleViolations(checked, final) {
		t.Errorf("%s", v)
	}
}

// loseAllBut kills every node of nodes but survivor and deletes their
// data dirs, lost for good, then stops survivor, for kvs recover.
func loseAllBut(t *testing.T, nodes []*Node, survivor *Node) {
	t.Helper()
	for _, n := range nodes {
		if n != survivor {
			n.Kill()
			if err := os.RemoveAll(n.DataDir()); err != nil {
				t.Fatal(err)
			}
		}
	}
	survivor.Stop()
}

// TestRecoverShardedScripts: a three-node cluster of three groups, whose
// writes include scripts, loses two nodes for good. `kvs recover` of the
// survivor recovers every group it holds, replaying each group's log with
// its scripts' calls as they first ran: started again, the survivor leads
// every group and holds every key, those the scripts wrote too.
func TestRecoverShardedScripts(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3, "--groups", "3")
	waitSpread(t, nodes)
	ctx := testCtx(t)
	const n = 60
	cc := setThroughClusterClient(t, ctx, nodes, "rs", n)
	script := "redis.call('SET', KEYS[1], ARGV[1]) return redis.call('INCRBY', KEYS[2], ARGV[1])"
	want := map[string]string{}
	for i := range n {
		want[fmt.Sprintf("rs:%d", i)] = itoa(i)
		k, c := fmt.Sprintf("{t%d}v", i), fmt.Sprintf("{t%d}c", i)
		if err := retryLeaderChange(t, func() error { return cc.Eval(ctx, script, []string{k, c}, i).Err() }); err != nil {
			t.Fatalf("EVAL on %s: %v", k, err)
		}
		want[k], want[c] = itoa(i), itoa(i)
	}
	survivor := nodes[1]
	rc := dialRaw(t, survivor.Addr)
	waitFor(t, survivor.Name+" to have applied every write", func() error {
		for k, v := range want {
			if got := rc.Do("GET", k); got.Str != v {
				return fmt.Errorf("GET %s: %s", k, got)
			}
		}
		return nil
	})
	loseAllBut(t, nodes, survivor)
	out, code := runKVS(t, clusterWait, "recover", "--data-dir", survivor.DataDir(), "--node-id", survivor.Name, "--group", "4")
	if code != 2 || !strings.Contains(out, "--group 4: the cluster's groups are 0 (meta) to 3") {
		t.Errorf("kvs recover --group 4 of a cluster of three groups: exit %d\n%s", code, out)
	}
	out, code = runKVS(t, clusterWait, "recover", "--data-dir", survivor.DataDir(), "--node-id", survivor.Name)
	if code != 0 {
		t.Fatalf("kvs recover: exit %d\n%s", code, out)
	}
	t.Logf("kvs recover: %s", strings.TrimSpace(out))
	for g := range 4 {
		if !strings.Contains(out, fmt.Sprintf("recovered group %d on %s:", g, survivor.Name)) {
			t.Errorf("kvs recover did not report group %d:\n%s", g, out)
		}
	}
	survivor.Start()
	waitLeadsEvery(t, survivor, 3)
	rc = dialRaw(t, survivor.Addr)
	for k, v := range want {
		if got := rc.Do("GET", k); got.Str != v {
			t.Errorf("GET %s on the recovered node: %s, want %q", k, got, v)
		}
	}
	if got := rc.Do("DBSIZE"); got.Str != itoa(len(want)) {
		t.Errorf("DBSIZE on the recovered node, leading every group: %s, want %d", got, len(want))
	}
}
