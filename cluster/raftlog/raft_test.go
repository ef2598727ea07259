package raftlog

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"kvs/internal/testwait"
)

// counter is an FSM that sums its entries and remembers the last one.
type counter struct {
	mu   sync.Mutex
	sum  uint64
	last uint64
}

// Apply adds a value greater than the last: the test writes increasing
// values one at a time and retries one whose outcome a leader change left
// unknown, which may then be applied twice, the second time right after
// the first.
func (c *counter) Apply(l *raft.Log) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v := binary.BigEndian.Uint64(l.Data); v > c.last {
		c.sum += v
		c.last = v
	}
	return nil
}

func (c *counter) get() (uint64, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sum, c.last
}

func (c *counter) Snapshot() (raft.FSMSnapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &counterSnap{c.sum, c.last}, nil
}

func (c *counter) Restore(r io.ReadCloser) error {
	defer r.Close()
	var b [16]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sum, c.last = binary.BigEndian.Uint64(b[:]), binary.BigEndian.Uint64(b[8:])
	return nil
}

type counterSnap struct{ sum, last uint64 }

func (s *counterSnap) Persist(sink raft.SnapshotSink) error {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:], s.sum)
	binary.BigEndian.PutUint64(b[8:], s.last)
	if _, err := sink.Write(b[:]); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *counterSnap) Release() {}

type replica struct {
	id     raft.ServerID
	dir    string
	trans  *raft.InmemTransport
	fsm    *counter
	log    *Log
	stable *raft.InmemStore
	snaps  *raft.InmemSnapshotStore
	r      *raft.Raft
}

func (rp *replica) start(t *testing.T, bootstrap []raft.Server) {
	t.Helper()
	var err error
	if rp.log, err = Open(Options{Dir: rp.dir, SegmentSize: 4096}); err != nil {
		t.Fatal(err)
	}
	conf := raft.DefaultConfig()
	conf.LocalID = rp.id
	conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	conf.SnapshotThreshold, conf.TrailingLogs, conf.SnapshotInterval = 40, 10, 50*time.Millisecond
	conf.Logger = hclog.NewNullLogger()
	if bootstrap != nil {
		if err := raft.BootstrapCluster(conf, rp.log, rp.stable, rp.snaps, rp.trans, raft.Configuration{Servers: bootstrap}); err != nil {
			t.Fatal(err)
		}
	}
	if rp.r, err = raft.NewRaft(conf, rp.fsm, rp.log, rp.stable, rp.snaps, rp.trans); err != nil {
		t.Fatal(err)
	}
}

func (rp *replica) stop(t *testing.T) {
	t.Helper()
	if err := rp.r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	rp.log.Close()
}

func waitFor(t *testing.T, what string, cond func() error) {
	t.Helper()
	testwait.Until(t, what, 30*time.Second, cond)
}

// TestRaftOnLog runs hashicorp/raft on the log: three replicas replicate,
// snapshot and compact (DeleteRange of prefixes); a replica stopped while
// the others go far ahead restarts on its own log and is caught up by a
// snapshot (its log emptied, then stored from a new index); every replica
// ends with the same state.
func TestRaftOnLog(t *testing.T) {
	reps := make([]*replica, 3)
	var servers []raft.Server
	for i := range reps {
		id := raft.ServerID(fmt.Sprintf("r%d", i))
		addr, trans := raft.NewInmemTransport(raft.ServerAddress(id))
		reps[i] = &replica{id: id, dir: t.TempDir(), trans: trans, fsm: &counter{},
			stable: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()}
		servers = append(servers, raft.Server{ID: id, Address: addr})
	}
	for _, a := range reps {
		for _, b := range reps {
			if a != b {
				a.trans.Connect(b.trans.LocalAddr(), b.trans)
			}
		}
	}
	for i, rp := range reps {
		if i == 0 {
			rp.start(t, servers)
		} else {
			rp.start(t, nil)
		}
	}
	defer func() {
		for _, rp := range reps {
			if rp.r != nil {
				rp.r.Shutdown()
				rp.log.Close()
			}
		}
	}()
	leader := func() *replica {
		var l *replica
		waitFor(t, "a leader", func() error {
			for _, rp := range reps {
				if rp.r != nil && rp.r.State() == raft.Leader {
					l = rp
					return nil
				}
			}
			return fmt.Errorf("none yet")
		})
		return l
	}
	var want uint64
	apply := func(from, to uint64) {
		for v := from; v <= to; v++ {
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], v)
			for {
				err := leader().r.Apply(b[:], 5*time.Second).Error()
				if err == nil {
					break
				}
				t.Logf("apply %d: %v; retrying", v, err)
			}
			want += v
		}
	}
	apply(1, 100)
	lead := leader()
	var follower *replica
	for _, rp := range reps {
		if rp != lead {
			follower = rp
			break
		}
	}
	follower.stop(t)
	follower.r = nil
	apply(101, 400)
	first, _ := lead.log.FirstIndex()
	if first <= 1 {
		t.Fatalf("the leader's log was never compacted: first index %d", first)
	}
	follower.fsm = &counter{}
	follower.start(t, nil)
	apply(401, 420)
	for _, rp := range reps {
		waitFor(t, string(rp.id)+" converging", func() error {
			if sum, last := rp.fsm.get(); sum != want || last != 420 {
				return fmt.Errorf("sum %d (want %d), last %d", sum, want, last)
			}
			return nil
		})
	}
}
