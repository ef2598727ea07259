package server

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"kvs/fsm"
)

// lossyProposer is a replicatingProposer whose first pop (LMPOP, LMOVE)
// fails with an unknown outcome: applied to every store first when
// committed is set (the leader was lost after committing it), or not at
// all (lost before).
type lossyProposer struct {
	*replicatingProposer
	committed bool

	mu   sync.Mutex // guards lost
	lost bool
}

func (p *lossyProposer) Propose(cmds []fsm.Command) ([]fsm.Reply, error) {
	p.mu.Lock()
	lose := !p.lost && len(cmds) == 1 && (cmds[0].Op == fsm.OpLMPop || cmds[0].Op == fsm.OpLMove)
	if lose {
		p.lost = true
	}
	p.mu.Unlock()
	if !lose {
		return p.replicatingProposer.Propose(cmds)
	}
	if p.committed {
		p.replicatingProposer.Propose(cmds)
	}
	return nil, fmt.Errorf("%w: the leader was lost", ErrUnknownOutcome)
}

// TestBlockedPopUnknownOutcome: a blocked client's pop whose reply is lost
// with the leader gets the element the pop took, if it was committed, and
// otherwise stays blocked and is served by the pop run again: no element
// vanishes, and the client sees no error.
func TestBlockedPopUnknownOutcome(t *testing.T) {
	for _, committed := range []bool{true, false} {
		t.Run(fmt.Sprintf("committed=%v", committed), func(t *testing.T) {
			p := startLossyPair(t, committed)
			f := dialRaw(t, p.follower)
			f.send(encodeCommand("BLPOP", "q", "0"))
			waitFor(t, func() bool { return p.follower.blocked.count() == 1 })
			l := dialRaw(t, p.leader)
			if got := l.do("RPUSH", "q", "a", "b"); got != ":2\r\n" {
				t.Fatalf("RPUSH: %q", got)
			}
			if got := f.reply(); got != "*2\r\n$1\r\nq\r\n$1\r\na\r\n" {
				t.Fatalf("blocked client: %q", got)
			}
			want := "*1\r\n$1\r\nb\r\n"
			if got := l.do("LRANGE", "q", "0", "-1"); got != want {
				t.Fatalf("left in the list: %q, want %q", got, want)
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
}

// startLossyPair is startPair (replicating) with a lossyProposer.
func startLossyPair(t *testing.T, committed bool) *pair {
	t.Helper()
	p := &pair{leaderStore: fsm.NewStore(), followerStore: fsm.NewStore()}
	p.proposer = &replicatingProposer{stores: []*fsm.Store{p.leaderStore, p.followerStore}}
	lossy := &lossyProposer{replicatingProposer: p.proposer, committed: committed}
	p.lc = &fakeCluster{selfID: "n1", term: 3}
	p.fc = &fakeCluster{selfID: "n2", term: 3}
	p.leader = startServer(t, Config{Store: p.leaderStore, Proposer: lossy, Cluster: p.lc, DisableActiveExpiry: true})
	p.follower = startServer(t, Config{Store: p.followerStore, Proposer: refusingProposer{t}, Cluster: p.fc,
		DisableActiveExpiry: true})
	members := []Member{
		{ID: "n1", RaftAddr: "127.0.0.1:17001", RESPAddr: p.leader.Addr().String(), Leader: true, Voter: true},
		{ID: "n2", RaftAddr: "127.0.0.1:17002", RESPAddr: p.follower.Addr().String(), Voter: true},
	}
	for _, f := range []*fakeCluster{p.lc, p.fc} {
		f.set(func(f *fakeCluster) { f.members, f.leaderOK = members, true })
	}
	return p
}

// TestAppendReplyBulks: a flat array of bulks goes on the wire exactly as
// the array of bulk replies it stands for, in RESP2 and RESP3.
func TestAppendReplyBulks(t *testing.T) {
	for _, r := range []fsm.Reply{bulksReply("x"), bulksReply("a", "", "b\r\nc", string(make([]byte, 300)))} {
		x := r.Expanded()
		for _, proto := range []int{2, 3} {
			got, want := appendReply(nil, &r, proto), appendReply(nil, &x, proto)
			if string(got) != string(want) {
				t.Errorf("RESP%d: %q, want %q", proto, got, want)
			}
		}
	}
	r := bulksReply("a", "bc")
	if got := string(appendReply([]byte("+OK\r\n"), &r, 2)); got != "+OK\r\n*2\r\n$1\r\na\r\n$2\r\nbc\r\n" {
		t.Errorf("appended %q", got)
	}
}
