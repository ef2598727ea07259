package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"kvs/fsm"
)

func TestReplication(t *testing.T) {
	h := newHarness(t, nil)
	lead := h.cluster3()
	// Concurrent writers: raft batches them; every one must apply once.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := range 25 {
				k := fmt.Sprintf("w%d-%d", w, i)
				if err := h.onLeader(lead, func(l *testNode) error {
					_, err := l.n.Apply(setEntry(k, strconv.Itoa(i)))
					return err
				}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	meta := fsm.EncodeEntry(nil, 0, []fsm.Command{{Op: fsm.OpMetaSet, Args: [][]byte{[]byte("node/n1/resp"), []byte("127.0.0.1:7001")}}})
	if err := h.onLeader(lead, func(l *testNode) error { _, err := l.n.Apply(meta); return err }); err != nil {
		t.Fatal(err)
	}
	h.converged(lead, lead.store.AppliedIndex())
	lead = h.leader() // a busy machine may have moved leadership meanwhile
	for _, tn := range h.running() {
		if n := tn.store.Stats(time.Now().UnixMilli()).Keys; n != 200 {
			t.Errorf("%s: %d keys, want 200", tn.id, n)
		}
		if v, _ := tn.store.Meta("node/n1/resp"); v != "127.0.0.1:7001" {
			t.Errorf("%s: metadata %q", tn.id, v)
		}
	}

	members, err := lead.n.Members()
	if err != nil {
		t.Fatal(err)
	}
	want := []Member{
		{ID: "n1", RaftAddr: h.nodes["n1"].addr, Voter: true, Leader: lead.id == "n1"},
		{ID: "n2", RaftAddr: h.nodes["n2"].addr, Voter: true, Leader: lead.id == "n2"},
		{ID: "n3", RaftAddr: h.nodes["n3"].addr, Voter: true, Leader: lead.id == "n3"},
	}
	if fmt.Sprint(members) != fmt.Sprint(want) {
		t.Errorf("Members = %v, want %v", members, want)
	}
	// Adding a voter already there at that address is a no-op.
	last := lead.n.Raft().LastIndex()
	if err := lead.n.AddVoter("n2", h.nodes["n2"].addr); err != nil || lead.n.Raft().LastIndex() != last {
		t.Errorf("repeated AddVoter: %v, last index %d -> %d", err, last, lead.n.Raft().LastIndex())
	}

	st := lead.n.Status()
	if st.ID != lead.id || st.State != "leader" || st.LeaderID != lead.id || st.LeaderRaftAddr != lead.addr ||
		st.Term == 0 || st.CommitIndex < lead.store.AppliedIndex() || st.LastIndex < st.CommitIndex {
		t.Errorf("leader Status = %+v", st)
	}
	f := h.followers(lead)[0]
	if st := f.n.Status(); st.State != "follower" || st.LeaderID != lead.id {
		t.Errorf("follower Status = %+v", st)
	}
}

func TestFollowerRefusesWrites(t *testing.T) {
	h := newHarness(t, nil)
	lead := h.cluster3()
	put(t, lead, "a", "1")
	lead = h.leader()
	for _, f := range h.followers(lead) {
		if _, err := f.n.Apply(setEntry("b", "2")); !errors.Is(err, ErrNotLeader) {
			t.Errorf("Apply on follower %s: %v, want ErrNotLeader", f.id, err)
		}
		if err := f.n.AddVoter("x", "127.0.0.1:1"); !errors.Is(err, ErrNotLeader) {
			t.Errorf("AddVoter on follower %s: %v", f.id, err)
		}
		if err := f.n.Remove("n1"); !errors.Is(err, ErrNotLeader) {
			t.Errorf("Remove on follower %s: %v", f.id, err)
		}
		if err := f.n.TransferLeadership(); err != nil {
			t.Errorf("TransferLeadership on follower %s: %v", f.id, err)
		}
	}
	h.converged(lead, lead.store.AppliedIndex())
	for _, tn := range h.running() {
		if r := tn.store.Read(0, fsm.Command{Op: fsm.OpExists, Args: [][]byte{[]byte("b")}}); r.Int != 0 {
			t.Errorf("%s: a refused write was applied", tn.id)
		}
	}
}

func TestReadIndex(t *testing.T) {
	h := newHarness(t, nil)
	lead := h.cluster3()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	// readIndex checks one ReadIndex on l; a leadership change fails it
	// with ErrNotLeader, and onLeader asks the new leader.
	readIndex := func(l *testNode) error {
		commit := l.n.Raft().CommitIndex()
		if err := l.n.ReadIndex(ctx); err != nil {
			return err
		}
		if got := l.n.applied.index.Load(); got < commit {
			return fmt.Errorf("after ReadIndex the FSM applied %d < commit index %d", got, commit)
		}
		return nil
	}
	for i := range 20 {
		put(t, lead, "k"+strconv.Itoa(i), "v")
		if err := h.onLeader(lead, readIndex); err != nil {
			t.Fatalf("ReadIndex on the leader: %v", err)
		}
	}
	// Right after a barrier the last committed entry is one the FSM never
	// sees; ReadIndex must still return.
	if err := h.onLeader(lead, func(l *testNode) error {
		if err := l.n.Raft().Barrier(time.Second).Error(); err != nil {
			return classify(err, true)
		}
		return l.n.ReadIndex(ctx)
	}); err != nil {
		t.Fatalf("ReadIndex after a barrier: %v", err)
	}
	// Concurrent readers and a writer: every read sees at least what was
	// committed when it began (the FSM's progress, counting entries the
	// store does not see, such as the barriers above).
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := h.onLeader(lead, func(l *testNode) error {
				_, err := l.n.Apply(setEntry("w", strconv.Itoa(i)))
				return err
			}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var readers sync.WaitGroup
	for range 8 {
		readers.Go(func() {
			for range 20 {
				if err := h.onLeader(lead, readIndex); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	readers.Wait()
	close(stop)
	wg.Wait()

	lead = h.leader()
	for _, f := range h.followers(lead) {
		if err := f.n.ReadIndex(ctx); !errors.Is(err, ErrNotLeader) {
			t.Errorf("ReadIndex on follower %s: %v, want ErrNotLeader", f.id, err)
		}
	}
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if err := lead.n.ReadIndex(done); err == nil {
		// A cancelled context may still succeed if nothing had to
		// wait; it must not hang either way.
		t.Log("ReadIndex with a cancelled context returned nil")
	}
}

func TestLeaderFailover(t *testing.T) {
	h := newHarness(t, nil)
	old := h.cluster3()
	for i := range 50 {
		put(t, old, "before"+strconv.Itoa(i), "v")
	}
	old = h.leader() // the one to stop, should leadership have moved
	changes := old.n.LeaderChanges()
	h.stop(old)
	// Close handed leadership over and closed the channel.
	for range changes {
	}

	lead := h.leader()
	if lead == old {
		t.Fatal("closed node still leads")
	}
	for i := range 50 {
		put(t, lead, "after"+strconv.Itoa(i), "v")
	}
	h.converged(lead, lead.store.AppliedIndex())

	// The old leader comes back on its Dir and address and catches up.
	h.open(old, false)
	put(t, lead, "last", "v")
	h.converged(lead, lead.store.AppliedIndex())
	if n := old.store.Stats(time.Now().UnixMilli()).Keys; n != 101 {
		t.Errorf("restarted node has %d keys, want 101", n)
	}
	if err := old.n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := old.n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := old.n.Apply(setEntry("x", "y")); !errors.Is(err, ErrShutdown) {
		t.Errorf("Apply after Close: %v, want ErrShutdown", err)
	}
	old.n = nil
}

func TestSnapshotInstall(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.SnapshotThreshold = 32
		c.TrailingLogs = 8
		c.SnapshotInterval = 20 * time.Millisecond
	})
	lead := h.cluster3()
	for i := range 300 {
		put(t, lead, "k"+strconv.Itoa(i%120), strconv.Itoa(i))
	}
	// Every node snapshots and truncates its log.
	h.converged(lead, lead.store.AppliedIndex())
	for _, tn := range h.running() {
		eventually(t, tn.id+" snapshotting", func() error {
			if s := tn.n.Raft().Stats()["last_snapshot_index"]; s == "0" {
				return errors.New("no snapshot yet")
			}
			return nil
		})
	}
	eventually(t, "log truncation", func() error {
		first, err := lead.n.logs.FirstIndex()
		if err != nil || first <= 1 {
			return fmt.Errorf("first log index %d (%v)", first, err)
		}
		return nil
	})

	// Replace n3 by a fresh node: the log it would need is gone, so it
	// must install the leader's snapshot.
	victim := h.nodes["n3"]
	if lead == victim {
		victim = h.nodes["n2"]
	}
	remove := func(l *testNode) error { return l.n.Remove(victim.id) }
	if err := h.onLeader(lead, remove); err != nil {
		t.Fatal(err)
	}
	h.stop(victim)
	delete(h.nodes, victim.id)
	if err := h.onLeader(lead, remove); err != nil {
		t.Errorf("removing a removed node: %v", err)
	}
	fresh := h.start("n4", false)
	if err := h.onLeader(lead, func(l *testNode) error { return l.n.AddVoter("n4", fresh.addr) }); err != nil {
		t.Fatal(err)
	}
	put(t, lead, "after", "install")
	h.converged(lead, lead.store.AppliedIndex())
	if s := fresh.n.Raft().Stats()["last_snapshot_index"]; s == "0" {
		t.Error("the fresh node caught up without installing a snapshot")
	}
	members, err := lead.n.Members()
	if err != nil || len(members) != 3 {
		t.Fatalf("Members = %v, %v", members, err)
	}
	for _, m := range members {
		if m.ID == victim.id {
			t.Errorf("%s still a member", victim.id)
		}
	}

	// HasState: true for a node's Dir (after Close, which frees bolt's
	// lock), false for an empty or missing one.
	h.stop(fresh)
	delete(h.nodes, "n4")
	for dir, want := range map[string]bool{
		fresh.dir:                               true,
		t.TempDir():                             false,
		filepath.Join(t.TempDir(), "no", "dir"): false,
	} {
		if got, err := HasState(dir); err != nil || got != want {
			t.Errorf("HasState(%s) = %v, %v; want %v", dir, got, err, want)
		}
	}
}

func TestHasStateLogOnly(t *testing.T) {
	h := newHarness(t, nil)
	tn := h.start("n1", true)
	h.leader()
	put(t, tn, "a", "1")
	h.stop(tn)
	if _, err := os.Stat(filepath.Join(tn.dir, "snapshots")); err != nil {
		t.Fatal(err)
	}
	if ok, err := HasState(tn.dir); err != nil || !ok {
		t.Errorf("HasState of a node with a log and no snapshot = %v, %v", ok, err)
	}
}

func TestBootstrapIgnoredWithState(t *testing.T) {
	h := newHarness(t, nil)
	tn := h.start("n1", true)
	h.leader()
	put(t, tn, "a", "1")
	put(t, tn, "b", "2")
	applied := tn.store.AppliedIndex()
	h.stop(tn)

	// Reopen with Bootstrap set again: no error, same cluster and data.
	h.open(tn, true)
	h.leader()
	eventually(t, "replaying the log", func() error {
		if got := tn.store.AppliedIndex(); got < applied {
			return fmt.Errorf("applied %d of %d", got, applied)
		}
		return nil
	})
	if got := tn.store.Read(0, fsm.Command{Op: fsm.OpGet, Args: [][]byte{[]byte("b")}}); string(got.Bulk) != "2" {
		t.Errorf("GET b after restart = %v", got)
	}
	members, err := tn.n.Members()
	if err != nil || len(members) != 1 || members[0].ID != "n1" {
		t.Errorf("Members = %v, %v", members, err)
	}
}

func TestLeaderChanges(t *testing.T) {
	h := newHarness(t, nil)
	tn := h.start("n1", true)
	select {
	case v := <-tn.n.LeaderChanges():
		if !v {
			t.Fatal("first leadership change is false")
		}
	case <-time.After(8 * time.Second):
		t.Fatal("no leadership change after bootstrap")
	}
	if !tn.n.IsLeader() {
		t.Fatal("IsLeader false after LeaderChanges said true")
	}
	n := tn.n
	h.stop(tn)
	if _, ok := <-n.LeaderChanges(); ok {
		// A final false may be pending; then the channel closes.
		if _, ok := <-n.LeaderChanges(); ok {
			t.Fatal("LeaderChanges not closed after Close")
		}
	}
}

// errFSM answers the entry "fail" with an error, as an FSM may.
type errFSM struct{ *fsm.RaftFSM }

func (e errFSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	for i, l := range logs {
		if string(l.Data) == "fail" {
			out[i] = errors.New("boom")
		}
	}
	return out
}

func TestApplyFSMError(t *testing.T) {
	n, err := Open(Config{
		NodeID: "n1", RaftAddr: "127.0.0.1:0", Dir: t.TempDir(), Bootstrap: true,
		FSM: errFSM{fsm.NewRaftFSM(fsm.NewStore())}, Logger: testLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	eventually(t, "leadership", func() error {
		if !n.IsLeader() {
			return errors.New("not leader")
		}
		return nil
	})
	if _, err := n.Apply([]byte("fail")); err == nil || err.Error() != "boom" {
		t.Errorf("Apply of an entry the FSM rejects: %v, want boom", err)
	}
	if resp, err := n.Apply([]byte("ok")); err != nil || resp != nil {
		t.Errorf("Apply: %v, %v", resp, err)
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{NodeID: "n1", RaftAddr: "127.0.0.1:7000", Dir: "/tmp/x", FSM: fsm.NewRaftFSM(fsm.NewStore())}
	if err := good.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for name, mod := range map[string]func(*Config){
		"no id":      func(c *Config) { c.NodeID = "" },
		"no addr":    func(c *Config) { c.RaftAddr = "" },
		"bad addr":   func(c *Config) { c.RaftAddr = "localhost" },
		"no dir":     func(c *Config) { c.Dir = "" },
		"no fsm":     func(c *Config) { c.FSM = nil },
		"negative":   func(c *Config) { c.ApplyTimeout = -time.Second },
		"max append": func(c *Config) { c.MaxAppendEntries = 1025 },
	} {
		c := good
		mod(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, c)
		}
		if _, err := Open(c); err == nil {
			t.Errorf("%s: Open accepted it", name)
		}
	}
	// raft's own checks run in Open.
	c := good
	c.Dir = t.TempDir()
	c.LeaderLeaseTimeout = time.Hour
	if _, err := Open(c); err == nil {
		t.Error("Open accepted a lease longer than the heartbeat timeout")
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err        error
		dispatched bool
		want       error
	}{
		{raft.ErrNotLeader, false, ErrNotLeader},
		{raft.ErrLeadershipTransferInProgress, false, ErrNotLeader},
		{raft.ErrEnqueueTimeout, false, ErrNotLeader},
		{raft.ErrRaftShutdown, false, ErrShutdown},
		{raft.ErrRaftShutdown, true, ErrUnknownOutcome},
		{raft.ErrLeadershipLost, true, ErrUnknownOutcome},
		{raft.ErrAbortedByRestore, true, ErrUnknownOutcome},
		{errors.New("bolt: disk full"), true, ErrUnknownOutcome},
	} {
		got := classify(tc.err, tc.dispatched)
		if !errors.Is(got, tc.want) {
			t.Errorf("classify(%v, %v) = %v, want %v", tc.err, tc.dispatched, got, tc.want)
		}
		n := 0
		for _, s := range []error{ErrNotLeader, ErrUnknownOutcome, ErrShutdown} {
			if errors.Is(got, s) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("classify(%v) = %v wraps %d sentinels", tc.err, got, n)
		}
	}
}

// TestSealDetectsCorruption: an entry damaged after it was sealed is
// caught before the FSM sees it, whichever bit flipped.
func TestSealDetectsCorruption(t *testing.T) {
	entry := []byte("an entry of the fsm's encoding")
	sealed := seal(entry)
	if got, ok := unsealEntry(sealed); !ok || string(got) != string(entry) {
		t.Fatalf("unseal(seal(e)) = %q, %v", got, ok)
	}
	for bit := 0; bit < len(sealed)*8; bit++ {
		damaged := append([]byte(nil), sealed...)
		damaged[bit/8] ^= 1 << (bit % 8)
		if _, ok := unsealEntry(damaged); ok {
			t.Fatalf("a flip of bit %d went unnoticed", bit)
		}
	}
	if _, ok := unsealEntry(sealed[:3]); ok {
		t.Fatal("a 3-byte entry unsealed")
	}

	// The FSM wrapper refuses to apply a damaged command entry, and leaves
	// the log it was given untouched.
	tf := &trackingFSM{BatchingFSM: fsm.NewRaftFSM(fsm.NewStore()), applied: &progress{}, fsmApplied: &progress{}, boltPath: "raft.db"}
	good := &raft.Log{Index: 1, Type: raft.LogCommand, Data: seal(setEntry("k", "v"))}
	tf.ApplyBatch([]*raft.Log{good})
	if _, ok := unsealEntry(good.Data); !ok {
		t.Fatal("applying changed the log's data")
	}
	bad := &raft.Log{Index: 2, Type: raft.LogCommand, Data: append([]byte(nil), good.Data...)}
	bad.Data[len(bad.Data)-1] ^= 0x20
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "corrupt") {
			t.Fatalf("a damaged entry was applied (recover: %v)", r)
		}
	}()
	tf.ApplyBatch([]*raft.Log{bad})
}

// TestCaughtUp: a fresh node is caught up at once; a restarted one only
// once it has replayed what its log held, which needs a leader, and by then
// its store holds every key it held before.
func TestCaughtUp(t *testing.T) {
	h := newHarness(t, nil)
	lead := h.cluster3()
	for _, tn := range h.running() {
		if !tn.n.CaughtUp() {
			t.Fatalf("%s: a node that never restarted is not caught up", tn.id)
		}
	}
	for i := 0; i < 50; i++ {
		put(t, lead, fmt.Sprintf("k%d", i), "v")
	}
	h.converged(lead, 0)
	f := h.followers(lead)[0]
	h.stop(f)
	h.open(f, false) // its log holds the 50 entries; its new store is empty
	waitCaughtUp(t, f, 50)
}

// waitCaughtUp waits until the restarted node f reports itself caught up,
// and checks that its store then holds at least keys keys.
func waitCaughtUp(t *testing.T, f *testNode, keys int) {
	t.Helper()
	eventually(t, "the restarted node to catch up", func() error {
		if !f.n.CaughtUp() {
			return errors.New("not caught up")
		}
		return nil
	})
	if got := f.store.Stats(time.Now().UnixMilli()).Keys; got < keys {
		t.Fatalf("caught up with %d keys, want %d", got, keys)
	}
}

// gatedFSM holds its first ApplyBatch until release is closed.
type gatedFSM struct {
	raft.BatchingFSM
	entered chan struct{}
	release chan struct{}
}

func (g gatedFSM) ApplyBatch(logs []*raft.Log) []any {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.release
	return g.BatchingFSM.ApplyBatch(logs)
}

// raft counts an entry applied once it hands it to the FSM; a restarted
// node is caught up only once the FSM itself has applied its old log.
func TestCaughtUpWaitsForTheFSM(t *testing.T) {
	h := newHarness(t, nil)
	lead := h.cluster3()
	for i := 0; i < 50; i++ {
		put(t, lead, fmt.Sprintf("k%d", i), "v")
	}
	h.converged(lead, 0)
	f := h.followers(lead)[0]
	h.stop(f)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	h.tune = func(c *Config) { c.FSM = gatedFSM{c.FSM, entered, release} }
	h.open(f, false)
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	select {
	case <-entered:
	case <-time.After(8 * time.Second):
		t.Fatal("the restarted node's FSM was never handed its log")
	}
	eventually(t, "raft to hand the FSM the whole old log", func() error {
		if got := f.n.raft.AppliedIndex(); got < f.n.startIndex {
			return fmt.Errorf("raft applied %d of %d", got, f.n.startIndex)
		}
		return nil
	})
	if f.n.CaughtUp() {
		t.Fatal("caught up while the FSM still holds the old log")
	}
	close(release)
	waitCaughtUp(t, f, 50)
}

// TestTransferLeadershipTo hands leadership to a chosen follower, and
// only a leader may do so.
func TestTransferLeadershipTo(t *testing.T) {
	h := newHarness(t, nil)
	lead := h.cluster3()
	target := h.followers(lead)[1]
	if err := h.followers(lead)[0].n.TransferLeadershipTo(target.id, target.addr); !errors.Is(err, ErrNotLeader) {
		t.Errorf("TransferLeadershipTo on a follower: %v, want ErrNotLeader", err)
	}
	eventually(t, "the leader hearing from "+target.id, func() error {
		if !lead.n.InContact(target.id, waitTimeout) {
			return errors.New("no answer yet")
		}
		return nil
	})
	// A leader change before the call (a late heartbeat on a busy
	// machine) makes it ErrNotLeader: ask whoever leads then, until the
	// target leads.
	eventually(t, "leadership moving to "+target.id, func() error {
		l, err := h.leaderNow()
		if err != nil {
			return err
		}
		if l == target {
			return nil
		}
		if err := l.n.TransferLeadershipTo(target.id, target.addr); err != nil {
			return err
		}
		return fmt.Errorf("%s still leads", l.id)
	})
}
