package cluster

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"kvs/cluster/raftlog"
)

// Seeding a new cluster from a backup, lost-quorum recovery, and snapshots
// on demand.

// ErrHasState is returned by Seed for a Dir that already holds raft state.
var ErrHasState = errors.New("cluster: data dir already holds raft state")

// seedTerm is the term a seeded node's snapshot and stored term carry: its
// first election then starts term 2, after everything the snapshot holds.
const seedTerm = 1

// Seed makes cfg.Dir, which must hold no raft state, the state of a new
// cluster whose only member is cfg.NodeID at cfg.RaftAddr and whose data is
// a snapshot at index (at least 1): write writes the snapshot's body, the
// bytes the FSM's Restore reads. A node opened on Dir restores it, elects
// itself, and takes the others through AddVoter (kvs join) as any leader
// does. cfg.FSM is not used.
func Seed(cfg Config, index uint64, write func(io.Writer) error) error {
	if cfg.NodeID == "" || cfg.RaftAddr == "" || cfg.Dir == "" {
		return errors.New("cluster: Seed needs NodeID, RaftAddr and Dir")
	}
	if index == 0 {
		return errors.New("cluster: Seed needs an index of at least 1")
	}
	cfg = cfg.withDefaults()
	if err := mkdirDurable(cfg.Dir); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if has, err := HasState(cfg.Dir); err != nil {
		return err
	} else if has {
		return fmt.Errorf("%w: %s", ErrHasState, cfg.Dir)
	}
	bolt, snaps, err := openStores(cfg)
	if err != nil {
		return err
	}
	defer bolt.Close()
	if has, err := raft.HasExistingState(bolt, bolt, snaps); err != nil {
		return fmt.Errorf("cluster: %w", err)
	} else if has {
		return fmt.Errorf("%w: %s", ErrHasState, cfg.Dir)
	}
	conf := raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter, ID: raft.ServerID(cfg.NodeID), Address: raft.ServerAddress(cfg.RaftAddr),
	}}}
	_, trans := raft.NewInmemTransport(raft.ServerAddress(cfg.RaftAddr))
	defer trans.Close()
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, seedTerm, conf, index, trans)
	if err != nil {
		return fmt.Errorf("cluster: creating the seed snapshot: %w", err)
	}
	if err := write(sink); err != nil {
		sink.Cancel()
		return fmt.Errorf("cluster: writing the seed snapshot: %w", err)
	}
	if err := sink.Close(); err != nil { // fsyncs and renames it into place
		return fmt.Errorf("cluster: writing the seed snapshot: %w", err)
	}
	if err := syncDir(filepath.Join(cfg.Dir, "snapshots")); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if err := bolt.SetUint64([]byte("CurrentTerm"), seedTerm); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// openStores opens Dir's bolt file and snapshot store for the offline
// tools (Seed, Recover), with no cache in front.
func openStores(cfg Config) (*raftboltdb.BoltStore, *raft.FileSnapshotStore, error) {
	path := filepath.Join(cfg.Dir, boltFile)
	bolt, err := raftboltdb.New(raftboltdb.Options{
		Path:        path,
		BoltOptions: &bbolt.Options{Timeout: boltOpenTimeout, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: opening %s: %w", path, err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, retainSnapshots, newHCLogger(cfg.Logger, "raft-snapshots"))
	if err != nil {
		bolt.Close()
		return nil, nil, fmt.Errorf("cluster: %w", err)
	}
	if err := syncDir(cfg.Dir); err != nil {
		bolt.Close()
		return nil, nil, fmt.Errorf("cluster: %w", err)
	}
	return bolt, snaps, nil
}

// Recovered is what Recover found and left.
type Recovered struct {
	Old      []Member // the configuration the node's state held
	RaftAddr string   // the address the node keeps in the new one
}

// Recover turns the stopped node whose state is in cfg.Dir into the only
// member of its cluster, with hashicorp/raft's RecoverCluster: every entry
// in its log (committed or not) is applied, a snapshot of the result is
// taken with a configuration of this node alone, and the log is deleted.
// Started again, the node elects itself and others can join it. An empty
// cfg.RaftAddr keeps the node's address in the configuration it held. It
// refuses a Dir without state, a damaged one (CheckState), and a node
// that is not in its own configuration.
//
// It is for a cluster that lost a majority for good: run it on one
// survivor only, never on two (they would each lead a cluster of their
// own, diverging), and only once the others are certainly gone.
func Recover(cfg Config) (Recovered, error) {
	if cfg.NodeID == "" || cfg.Dir == "" || cfg.FSM == nil {
		return Recovered{}, errors.New("cluster: Recover needs NodeID, Dir and FSM")
	}
	cfg = cfg.withDefaults()
	if has, err := HasState(cfg.Dir); err != nil {
		return Recovered{}, err
	} else if !has {
		return Recovered{}, fmt.Errorf("cluster: %s holds no raft state: nothing to recover", cfg.Dir)
	}
	if err := CheckState(cfg.Dir, cfg.Logger); err != nil {
		return Recovered{}, err
	}
	bolt, snaps, err := openStores(cfg)
	if err != nil {
		return Recovered{}, err
	}
	defer bolt.Close()
	var logs raft.LogStore = bolt
	if legacy, err := boltHoldsLog(cfg.Dir, bolt); err != nil {
		return Recovered{}, err
	} else if !legacy {
		rl, err := raftlog.Open(raftlog.Options{Dir: filepath.Join(cfg.Dir, logDir)})
		if err != nil {
			return Recovered{}, fmt.Errorf("cluster: %w", err)
		}
		defer rl.Close()
		logs = rl
	}
	rc := cfg.raftConfig()
	_, trans := raft.NewInmemTransport("")
	defer trans.Close()

	old, err := raft.GetConfiguration(cfg.raftConfig(), discardFSM{}, logs, bolt, snaps, trans)
	if err != nil {
		return Recovered{}, fmt.Errorf("cluster: reading the stored configuration: %w", err)
	}
	var out Recovered
	for _, s := range old.Servers {
		out.Old = append(out.Old, Member{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter})
		if string(s.ID) == cfg.NodeID {
			out.RaftAddr = string(s.Address)
		}
	}
	if out.RaftAddr == "" {
		return out, fmt.Errorf("cluster: node %q is not in the configuration stored in %s (%d members): wrong --node-id?", cfg.NodeID, cfg.Dir, len(old.Servers))
	}
	if cfg.RaftAddr != "" {
		out.RaftAddr = cfg.RaftAddr
	}
	conf := raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter, ID: raft.ServerID(cfg.NodeID), Address: raft.ServerAddress(out.RaftAddr),
	}}}
	fsm := &unsealingFSM{FSM: cfg.FSM, boltPath: filepath.Join(cfg.Dir, boltFile)}
	if err := raft.RecoverCluster(rc, fsm, logs, bolt, snaps, trans, conf); err != nil {
		return out, fmt.Errorf("cluster: recover: %w", err)
	}
	if err := syncDir(filepath.Join(cfg.Dir, "snapshots")); err != nil {
		return out, fmt.Errorf("cluster: %w", err)
	}
	return out, nil
}

// discardFSM reads a snapshot and keeps nothing: GetConfiguration needs
// an FSM only to restore one into.
type discardFSM struct{}

func (discardFSM) Apply(*raft.Log) any { return nil }
func (discardFSM) Snapshot() (raft.FSMSnapshot, error) {
	return nil, errors.New("cluster: no snapshot of a discarding FSM")
}
func (discardFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	_, err := io.Copy(io.Discard, rc)
	return err
}

// unsealingFSM checks and strips the seal of each command entry
// RecoverCluster applies, as trackingFSM does on the live path.
type unsealingFSM struct {
	raft.FSM
	boltPath string
}

func (u *unsealingFSM) Apply(l *raft.Log) any {
	t := trackingFSM{boltPath: u.boltPath}
	return u.FSM.Apply(t.unseal([]*raft.Log{l})[0])
}

// Snapshot takes a raft snapshot now and waits for it; a node with nothing
// applied since its last snapshot has nothing to do and returns nil.
func (n *Node) Snapshot() error {
	if err := n.checkOpen(); err != nil {
		return err
	}
	err := n.raft.Snapshot().Error()
	if errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster: snapshot: %w", err)
	}
	return nil
}
