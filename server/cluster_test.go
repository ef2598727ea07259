package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kvs/fsm"
)

// fakeCluster is a Cluster whose answers the test sets.
type fakeCluster struct {
	mu         sync.Mutex // guards the fields below
	selfID     string
	members    []Member // by ID; Leader marks the leader
	leaderOK   bool
	barrierErr error
	joinErr    error
	joins      []string
	term       uint64

	barriers atomic.Int64
	loading  atomic.Bool   // CaughtUp answers !loading
	good     atomic.Int64  // GoodReplicas answers it
	applied  atomic.Uint64 // AppliedIndex answers it
	waits    atomic.Int64  // WaitApplied calls
	waited   atomic.Uint64 // the index of the last one
}

func (f *fakeCluster) CaughtUp() bool { return !f.loading.Load() }

// GoodReplicas answers the good count the test set, whatever the lag.
func (f *fakeCluster) GoodReplicas(time.Duration) int { return int(f.good.Load()) }

// The fake's proposers apply to every store at once: nothing to wait for.
func (f *fakeCluster) AppliedIndex() uint64 { return f.applied.Load() }

func (f *fakeCluster) WaitApplied(ctx context.Context, index uint64) error {
	f.waits.Add(1)
	f.waited.Store(index)
	return nil
}

func (f *fakeCluster) Self() Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.members {
		if m.ID == f.selfID {
			return m
		}
	}
	return Member{ID: f.selfID}
}

func (f *fakeCluster) Leader() (Member, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.members {
		if m.Leader && f.leaderOK {
			return m, true
		}
	}
	return Member{}, false
}

func (f *fakeCluster) Members() ([]Member, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Member(nil), f.members...), nil
}

func (f *fakeCluster) ReadBarrier(ctx context.Context) error {
	f.barriers.Add(1)
	if !f.Self().Leader {
		return fmt.Errorf("%w: barrier on a follower", ErrNotLeader)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.barrierErr
}

func (f *fakeCluster) Join(ctx context.Context, id, raftAddr, respAddr string, level int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.joinErr != nil {
		return f.joinErr
	}
	j := id + " " + raftAddr + " " + respAddr
	if level >= 0 {
		j += " level " + strconv.Itoa(level)
	}
	f.joins = append(f.joins, j)
	return nil
}

func (f *fakeCluster) Remove(ctx context.Context, id string) error {
	return f.Join(ctx, id, "-", "-", -1)
}

func (f *fakeCluster) Status() ClusterStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := ClusterStatus{ID: f.selfID, State: "follower", Term: f.term, LastIndex: 12, CommitIndex: 11, AppliedIndex: 10,
		ApplyDelayP50: 250 * time.Microsecond, ApplyDelayP99: 1500 * time.Microsecond, ApplyLevel: 1}
	for _, m := range f.members {
		if m.Leader && f.leaderOK {
			st.LeaderID, st.LeaderAddr = m.ID, m.RESPAddr
			if m.ID == f.selfID {
				st.State = "leader"
			}
		}
	}
	return st
}

func (f *fakeCluster) set(fn func(f *fakeCluster)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// replicatingProposer applies each batch to the leader's store and to the
// replicas' stores, as a committed Raft entry would be; err, when set, is
// returned instead.
type replicatingProposer struct {
	stores []*fsm.Store
	mu     sync.Mutex
	err    error
	calls  int
}

func (p *replicatingProposer) Propose(cmds []fsm.Command) ([]fsm.Reply, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.err != nil {
		return nil, p.err
	}
	var replies []fsm.Reply
	for i, st := range p.stores {
		r := st.Apply(0, 1_700_000_000_000, cmds)
		if i == 0 {
			replies = r
		}
	}
	return replies, nil
}

func (p *replicatingProposer) setErr(err error) {
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
}

// refusingProposer fails the test if a follower proposes instead of
// forwarding.
type refusingProposer struct{ tb testing.TB }

func (p refusingProposer) Propose([]fsm.Command) ([]fsm.Reply, error) {
	p.tb.Errorf("a follower proposed a batch itself")
	return nil, errors.New("follower proposed")
}

// pair is a leader and a follower on loopback sockets.
type pair struct {
	leader, follower   *Server
	lc, fc             *fakeCluster
	proposer           *replicatingProposer
	leaderStore        *fsm.Store
	followerStore      *fsm.Store
	leaderID, followID string // Redis Cluster node ids
}

// startPair starts a two-node cluster. replicate says whether the
// leader's writes also reach the follower's store.
func startPair(t *testing.T, linearizable, replicate bool) *pair {
	t.Helper()
	p := &pair{leaderStore: fsm.NewStore(), followerStore: fsm.NewStore()}
	p.proposer = &replicatingProposer{stores: []*fsm.Store{p.leaderStore}}
	if replicate {
		p.proposer.stores = append(p.proposer.stores, p.followerStore)
	}
	p.lc = &fakeCluster{selfID: "n1", term: 3}
	p.fc = &fakeCluster{selfID: "n2", term: 3}
	p.leader = startServer(t, Config{Store: p.leaderStore, Proposer: p.proposer, Cluster: p.lc,
		LinearizableReads: linearizable, DisableActiveExpiry: true})
	p.follower = startServer(t, Config{Store: p.followerStore, Proposer: refusingProposer{t}, Cluster: p.fc,
		LinearizableReads: linearizable, DisableActiveExpiry: true})
	members := []Member{
		{ID: "n1", RaftAddr: "127.0.0.1:17001", RESPAddr: p.leader.Addr().String(), Leader: true, Voter: true},
		{ID: "n2", RaftAddr: "127.0.0.1:17002", RESPAddr: p.follower.Addr().String(), Voter: true},
		{ID: "n3", RaftAddr: "127.0.0.1:17003", Voter: false}, // no client address yet
	}
	for _, f := range []*fakeCluster{p.lc, p.fc} {
		f.set(func(f *fakeCluster) { f.members, f.leaderOK = members, true })
	}
	p.leaderID, p.followID = nodeID("n1"), nodeID("n2")
	return p
}

// script sends cmds as one pipeline and returns the replies' bytes.
func script(t *testing.T, rc *rawConn, cmds [][]string) []string {
	t.Helper()
	var req []byte
	for _, c := range cmds {
		req = append(req, encodeCommand(c...)...)
	}
	rc.send(req)
	out := make([]string, len(cmds))
	for i := range cmds {
		out[i] = rc.reply()
	}
	return out
}

// forwardScript mixes reads and writes, replies of every kind and errors
// decided by the store and by the server.
var forwardScript = [][]string{
	{"SET", "k", "v"},
	{"GET", "k"},
	{"SET", "k", "w", "GET"},
	{"SET", "k", "x", "NX"},
	{"GETDEL", "nokey"},
	{"INCR", "k"},
	{"INCR", "n"},
	{"INCRBY", "n", "notanumber"},
	{"INCRBYFLOAT", "f", "0.1"},
	{"INCRBYFLOAT", "f", "0.2"},
	{"MSET", "a", "1", "b", "2"},
	{"MGET", "a", "nokey", "b"},
	{"GETEX", "a", "EX", "-1"},
	{"GETEX", "nokey", "EX", "-1"},
	{"APPEND", "a", "23"},
	{"SET", "k"},
	{"DEL", "a", "b", "nokey"},
	{"EXISTS", "a", "k"},
	{"RENAME", "nokey", "x"},
	{"SETRANGE", "r", "2", "xy"},
	{"GETRANGE", "r", "0", "-1"},
	{"GET", "r"},
	{"PING"},
	{"SET", "e", "1", "EX", "100"},
	{"PERSIST", "e"},
	{"TTL", "e"},
}

// TestForwardRepliesMatchLeader runs one script on a follower, whose
// writes are forwarded, and on the leader of a fresh cluster: the replies
// must be the same bytes, in both protocols, with and without linearizable
// (forwarded) reads.
func TestForwardRepliesMatchLeader(t *testing.T) {
	for _, lin := range []bool{false, true} {
		for _, proto := range []string{"2", "3"} {
			t.Run(fmt.Sprintf("linearizable=%v/RESP%s", lin, proto), func(t *testing.T) {
				// Without forwarded reads the follower's reads need the
				// writes replicated; with them, they must not need them.
				a := startPair(t, lin, !lin)
				b := startPair(t, lin, !lin)
				viaFollower := dialRaw(t, a.follower)
				direct := dialRaw(t, b.leader)
				viaFollower.do("HELLO", proto)
				direct.do("HELLO", proto)
				got := script(t, viaFollower, forwardScript)
				want := script(t, direct, forwardScript)
				for i := range want {
					if got[i] != want[i] {
						t.Errorf("%q:\n via follower %q\n on leader    %q", forwardScript[i], got[i], want[i])
					}
				}
				if lin && a.lc.barriers.Load() == 0 {
					t.Error("the leader answered forwarded reads without a read barrier")
				}
				// One command at a time, too: every reply on its own.
				for _, cmd := range [][]string{{"GET", "k"}, {"INCR", "k"}, {"MGET", "k", "nokey"}} {
					if g, w := viaFollower.do(cmd...), direct.do(cmd...); g != w {
						t.Errorf("%q: via follower %q, on leader %q", cmd, g, w)
					}
				}
			})
		}
	}
}

func TestLinearizableReadsOnLeader(t *testing.T) {
	p := startPair(t, true, false)
	rc := dialRaw(t, p.leader)
	got := script(t, rc, [][]string{{"GET", "a"}, {"GET", "b"}, {"SET", "a", "1"}, {"GET", "a"}})
	want := []string{"$-1\r\n", "$-1\r\n", "+OK\r\n", "$1\r\n1\r\n"}
	if strings.Join(got, "") != strings.Join(want, "") {
		t.Fatalf("replies %q, want %q", got, want)
	}
	// One barrier for the first run of reads, one after the write.
	if n := p.lc.barriers.Load(); n != 2 {
		t.Errorf("%d read barriers, want 2", n)
	}
	p.lc.set(func(f *fakeCluster) { f.barrierErr = fmt.Errorf("%w: stepped down", ErrNotLeader) })
	if got := rc.do("GET", "a"); got != "-TRYAGAIN not the leader\r\n" {
		t.Errorf("GET when the barrier fails: %q", got)
	}
}

func TestStaleReadsAreLocal(t *testing.T) {
	p := startPair(t, false, false)
	f := dialRaw(t, p.follower)
	if got := f.do("SET", "k", "v"); got != "+OK\r\n" {
		t.Fatalf("SET via follower: %q", got)
	}
	// Not replicated in this pair: the follower's own store answers.
	if got := f.do("GET", "k"); got != "$-1\r\n" {
		t.Fatalf("GET on follower: %q (a local read was forwarded?)", got)
	}
	if got := dialRaw(t, p.leader).do("GET", "k"); got != "$1\r\nv\r\n" {
		t.Fatalf("GET on leader: %q", got)
	}
}

func TestMovedForReadonlyClients(t *testing.T) {
	p := startPair(t, false, true)
	rc := dialRaw(t, p.follower)
	if got := rc.do("READONLY"); got != "+OK\r\n" {
		t.Fatalf("READONLY: %q", got)
	}
	leader := p.leader.Addr().String()
	got := script(t, rc, [][]string{
		{"SET", "foo", "bar"},
		{"SET", "x"}, // a syntax error keeps its place
		{"FLUSHALL"}, // no key: forwarded
		{"INCR", "{foo}.n"},
		{"GET", "foo"},
	})
	want := []string{
		"-MOVED 12182 " + leader + "\r\n",
		"-ERR wrong number of arguments for 'set' command\r\n",
		"+OK\r\n",
		"-MOVED 12182 " + leader + "\r\n",
		"$-1\r\n",
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("reply %d: %q, want %q", i, got[i], want[i])
		}
	}
	if rc.do("READWRITE") != "+OK\r\n" || rc.do("SET", "foo", "bar") != "+OK\r\n" {
		t.Error("after READWRITE a write is not forwarded")
	}
	// On the leader READONLY changes nothing.
	lrc := dialRaw(t, p.leader)
	lrc.do("READONLY")
	if got := lrc.do("SET", "foo", "baz"); got != "+OK\r\n" {
		t.Errorf("SET on the leader after READONLY: %q", got)
	}
}

func TestClusterErrors(t *testing.T) {
	p := startPair(t, false, true)
	f := dialRaw(t, p.follower)
	l := dialRaw(t, p.leader)

	p.proposer.setErr(fmt.Errorf("%w: leadership lost while committing", ErrUnknownOutcome))
	want := "-UNCERTAIN the write may or may not have been applied: outcome unknown: leadership lost while committing\r\n"
	if got := l.do("SET", "k", "v"); got != want {
		t.Errorf("on leader: %q, want %q", got, want)
	}
	if got := f.do("SET", "k", "v"); got != want {
		t.Errorf("via follower: %q, want %q", got, want)
	}

	p.proposer.setErr(fmt.Errorf("%w: stepped down", ErrNotLeader))
	want = "-TRYAGAIN not the leader, the write was not applied\r\n"
	if got := l.do("SET", "k", "v"); got != want {
		t.Errorf("on leader: %q, want %q", got, want)
	}
	if got := f.do("SET", "k", "v"); got != want {
		t.Errorf("via follower: %q, want %q", got, want)
	}
	p.proposer.setErr(nil)

	// The leader stepped down but the follower still points at it.
	p.lc.set(func(f *fakeCluster) {
		f.members = append([]Member(nil), f.members...)
		f.members[0].Leader = false
	})
	if got := f.do("SET", "k", "v"); got != want {
		t.Errorf("forwarded to a former leader: %q, want %q", got, want)
	}

	p.fc.set(func(f *fakeCluster) { f.leaderOK = false })
	if got := f.do("SET", "k", "v"); got != "-CLUSTERDOWN no leader\r\n" {
		t.Errorf("no leader: %q", got)
	}
	f.do("READONLY")
	if got := f.do("SET", "k", "v"); got != "-CLUSTERDOWN no leader\r\n" {
		t.Errorf("no leader, READONLY client: %q", got)
	}
}

// TestForwardConnectionFailures: a leader that cannot be reached means the
// write was not applied; one that drops the connection after reading the
// request leaves the outcome unknown.
func TestForwardConnectionFailures(t *testing.T) {
	p := startPair(t, false, true)
	f := dialRaw(t, p.follower)
	pointAt := func(addr string) {
		p.fc.set(func(f *fakeCluster) {
			f.members = append([]Member(nil), f.members...)
			f.members[0].RESPAddr = addr
		})
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	pointAt(closed)
	got := f.do("SET", "k", "v")
	if !strings.HasPrefix(got, "-TRYAGAIN the leader could not be reached, the write was not applied: leader unreachable: ") {
		t.Errorf("unreachable leader: %q", got)
	}

	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4096)
			nc.Read(buf) // the request arrives, then the "leader" dies
			nc.Close()
		}
	}()
	pointAt(ln.Addr().String())
	got = f.do("SET", "k", "v")
	if !strings.HasPrefix(got, "-UNCERTAIN the write may or may not have been applied: outcome unknown: ") {
		t.Errorf("connection dropped after the request: %q", got)
	}
}

// TestForwardConcurrent: many clients forwarding at once each get their
// own replies, and the pool keeps a bounded number of idle connections.
func TestForwardConcurrent(t *testing.T) {
	p := startPair(t, false, true)
	var wg sync.WaitGroup
	for g := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc := dialRaw(t, p.follower)
			for i := range 25 {
				key := fmt.Sprintf("k%d-%d", g, i)
				if got := rc.do("SET", key, key); got != "+OK\r\n" {
					t.Errorf("SET %s: %q", key, got)
					return
				}
				if got := rc.do("GETSET", key, "x"); got != fmt.Sprintf("$%d\r\n%s\r\n", len(key), key) {
					t.Errorf("GETSET %s: %q", key, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	p.follower.peers.mu.Lock()
	idle := len(p.follower.peers.idle)
	p.follower.peers.mu.Unlock()
	if idle == 0 || idle > maxIdlePeerConns {
		t.Errorf("%d idle peer connections", idle)
	}
}

func TestPeerClosedDetectsHangup(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if peerClosed(nc) {
		t.Fatal("an open idle connection looks closed")
	}
	srv.Close()
	eventually(t, "the hangup to be seen", func() bool { return peerClosed(nc) })
}

func TestServerProposeRoutes(t *testing.T) {
	p := startPair(t, false, true)
	cmds := []fsm.Command{{Op: fsm.OpSet, Args: [][]byte{[]byte("k"), []byte("v")}}}
	replies, err := p.follower.Propose(cmds)
	if err != nil || len(replies) != 1 || replies[0].Kind != fsm.ReplyStatus {
		t.Fatalf("Propose on follower: %v, %v", replies, err)
	}
	if r := p.leaderStore.Read(0, fsm.Command{Op: fsm.OpGet, Args: [][]byte{[]byte("k")}}); string(r.Bulk) != "v" {
		t.Fatalf("leader store after forwarded Propose: %v", r)
	}
	p.proposer.setErr(fmt.Errorf("%w: stepped down", ErrNotLeader))
	if _, err := p.follower.Propose(cmds); !errors.Is(err, ErrNotLeader) {
		t.Errorf("leader's not-leader error via follower: %v", err)
	}
	p.proposer.setErr(fmt.Errorf("%w: timed out", ErrUnknownOutcome))
	if _, err := p.follower.Propose(cmds); !errors.Is(err, ErrUnknownOutcome) {
		t.Errorf("leader's unknown outcome via follower: %v", err)
	}
	p.fc.set(func(f *fakeCluster) { f.leaderOK = false })
	if _, err := p.follower.Propose(cmds); !errors.Is(err, ErrNoLeader) {
		t.Errorf("no leader: %v", err)
	}
}

func TestFollowerSkipsActiveExpiry(t *testing.T) {
	p := startPair(t, false, true)
	if !p.leader.mayExpire() || p.follower.mayExpire() {
		t.Errorf("mayExpire: leader %v, follower %v", p.leader.mayExpire(), p.follower.mayExpire())
	}
	s := startServer(t, Config{DisableActiveExpiry: true})
	if !s.mayExpire() {
		t.Error("standalone server may not expire")
	}
}

// TestForwardOverLeaderBulkLimit: a batch whose request exceeds the
// leader's proto-max-bulk-len is refused whole, and the connection the
// leader then closes is not reused.
func TestForwardOverLeaderBulkLimit(t *testing.T) {
	p := startPair(t, false, true)
	p.leader.maxBulk.Store(64)
	f := dialRaw(t, p.follower)
	if got := f.do("SET", "k", strings.Repeat("v", 100)); got != "-ERR Protocol error: invalid bulk length\r\n" {
		t.Errorf("oversized forward: %q", got)
	}
	if got := f.do("SET", "k", "v"); got != "+OK\r\n" {
		t.Errorf("the next forward: %q", got)
	}
}

// TestReadsWaitForCatchUp: a node that has not caught up with what it had
// applied before it restarted refuses local reads with LOADING (which
// clients retry) instead of answering from an older state; writes still go
// to the leader, and reads are served again once it has caught up.
func TestReadsWaitForCatchUp(t *testing.T) {
	p := startPair(t, false, true)
	p.fc.loading.Store(true)
	f := dialRaw(t, p.follower)
	got := script(t, f, [][]string{{"SET", "k", "v"}, {"GET", "k"}, {"EXISTS", "k"}, {"PING"}})
	want := []string{"+OK\r\n", "-" + errLoading + "\r\n", "-" + errLoading + "\r\n", "+PONG\r\n"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("reply %d while loading: %q, want %q", i, got[i], want[i])
		}
	}
	p.fc.loading.Store(false)
	if got := f.do("GET", "k"); got != "$1\r\nv\r\n" {
		t.Fatalf("GET after catching up: %q", got)
	}
}
