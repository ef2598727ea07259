package group

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"kvs/cluster"
	"kvs/fsm"
)

// NodeOptions configure this node's raft side: its one Raft port and its
// data dir, which every group it holds a replica of shares.
type NodeOptions struct {
	// DataDir is the node's data dir. Group 0's raft state is in
	// DataDir/raft, where a node from before groups kept its only group's,
	// so such a data dir opens as group 0; group k's is in
	// DataDir/groups/<k>/raft.
	DataDir  string
	NodeID   string
	RaftAddr string
	// Bootstrap makes each group this node opens without raft state a new
	// group with this node as its only voter; the other nodes wait to be
	// added (Node.AddVoter). A group with state ignores it.
	Bootstrap bool
	// TLS, when set, runs the Raft port over mutual TLS; nil: plain TCP.
	TLS *cluster.TLS
	// Logger receives the node's and raft's logs; nil means slog.Default().
	Logger *slog.Logger

	// Raft's snapshot tuning for every group (cluster.Config; zero takes
	// its defaults).
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotInterval  time.Duration
	SnapshotGrowth    int

	// Repair with RepairAllowEmpty moves a group's damaged raft state
	// aside whole, so that the replica starts empty and is caught up by
	// the group's leader; Repair alone says what it would move and stops.
	Repair, RepairAllowEmpty bool
}

// RaftOptions is the name OpenRaft's callers know NodeOptions by.
type RaftOptions = NodeOptions

// A Node is this process's raft side: one Raft port (a cluster.Mux) and
// one data dir, shared by the replicas of every group the node holds. Open
// it once, open each group's replica on it (OpenGroup), and Close it last:
// it closes the groups still open, then the port.
type Node struct {
	o   NodeOptions
	mux *cluster.Mux

	mu      sync.Mutex // guards the fields below
	groups  map[uint32]*Group
	opening map[uint32]bool // OpenGroup under way, not in groups yet
	closed  bool
	// targets are the catch-up targets of the non-voters of the groups
	// this node leads, by group and node id (placement.go).
	targets map[uint32]map[string]catchUpTarget
	// served are the replicas Tend last told its owner to serve.
	served map[uint32]*Group
	// opens counts the OpenGroup calls under way, which Close waits for
	// so that no group opens after it.
	opens sync.WaitGroup
	// wake is signalled when a replica here becomes its group's leader
	// (Wakes).
	wake chan struct{}
	// gate is what SetLevelGate set, asked by every group's proposer.
	gate levelGate
}

// SetLevelGate makes every raft group of the node, open or opened later,
// refuse a batch of commands whose entry needs a level (fsm.Level) above
// 0 unless gate(need) returns nil: the cluster's level (Levels.Allows),
// which the node's owner keeps. A node of a newer kvs thus proposes no
// command a node of an older kvs in the same cluster could not apply (it
// would stop at it) until every node has said it can. Without a gate
// every level is allowed.
func (n *Node) SetLevelGate(gate func(need int) error) { n.gate.fn.Store(&gate) }

// Allows returns nil when cmds may be proposed at the cluster's level,
// as the node's groups' proposers check (SetLevelGate), else the gate's
// error: for a node that forwards cmds to a leader elsewhere.
func (n *Node) Allows(cmds []fsm.Command) error { return n.gate.allows(cmds) }

// levelGate is a node's SetLevelGate.
type levelGate struct {
	fn atomic.Pointer[func(need int) error]
	// open is set once fn allowed ApplyLevel: the cluster's level only
	// grows, so every entry is allowed from then on, without asking.
	open atomic.Bool
}

// allows returns nil when cmds may be proposed, else the gate's error
// (wrapping ErrLevel).
func (g *levelGate) allows(cmds []fsm.Command) error {
	fn := g.fn.Load()
	if fn == nil || g.atLevel() {
		return nil
	}
	if need := fsm.Level(cmds); need > 0 {
		return (*fn)(need)
	}
	return nil
}

// atLevel reports whether the cluster's level is this kvs's: every entry
// may be proposed. False without a gate: a node that does not know its
// cluster's level proposes nothing only the newest kvs applies unasked
// (fsm.CallLevel).
func (g *levelGate) atLevel() bool {
	if g.open.Load() {
		return true
	}
	fn := g.fn.Load()
	if fn == nil || (*fn)(fsm.ApplyLevel) != nil {
		return false
	}
	g.open.Store(true)
	return true
}

// callLevel is the level an entry's scripts may call commands of
// (fsm.CallLevel): the cluster's level, 0 while it is below
// fsm.CallLevelFrom or unknown (the entry then carries no mark).
func (g *levelGate) callLevel() int {
	if g.atLevel() {
		return fsm.ApplyLevel
	}
	fn := g.fn.Load()
	if fn == nil {
		return 0
	}
	for l := fsm.ApplyLevel - 1; l >= fsm.CallLevelFrom; l-- {
		if (*fn)(l) == nil {
			return l
		}
	}
	return 0
}

// OpenNode binds the node's Raft port on o.RaftAddr (over mutual TLS when
// o.TLS is set). No group runs on it until OpenGroup opens one; until then
// the port closes any connection to a group.
func OpenNode(o NodeOptions) (*Node, error) {
	if o.DataDir == "" || o.NodeID == "" || o.RaftAddr == "" {
		return nil, errors.New("group: NodeOptions need DataDir, NodeID and RaftAddr")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if err := removeDropped(o.DataDir); err != nil {
		return nil, err
	}
	mux, err := cluster.ListenMux(o.RaftAddr, o.TLS)
	if err != nil {
		return nil, fmt.Errorf("cluster: raft transport on %s: %w", o.RaftAddr, err)
	}
	return &Node{o: o, mux: mux, groups: map[uint32]*Group{}, opening: map[uint32]bool{},
		targets: map[uint32]map[string]catchUpTarget{}, served: map[uint32]*Group{}, wake: make(chan struct{}, 1)}, nil
}

// Wakes is signalled (at most one signal waiting) when a replica on this
// node becomes its group's leader. Tend serves a replica that leads its
// group; its owner runs a round at once on the signal rather than at its
// next tick, or a replica just made a voter and handed the leadership in
// the same round of its old leader would lead unserved until then, every
// write to its group refused here as sent to a node that does not lead it.
func (n *Node) Wakes() <-chan struct{} { return n.wake }

// relayLeadership signals Wakes each time node becomes its group's
// leader, until it closes.
func (n *Node) relayLeadership(node *cluster.Node) {
	for leads := range node.LeaderChanges() {
		if leads {
			select {
			case n.wake <- struct{}{}:
			default:
			}
		}
	}
}

// ErrNodeClosed is OpenGroup's error once Close has begun.
var ErrNodeClosed = errors.New("group: node closed")

// Addr is the node's Raft address (RaftAddr with the port chosen when it
// was 0): what the other nodes add it to their groups with.
func (n *Node) Addr() string { return n.mux.Addr().String() }

// DataDir is the node's data dir.
func (n *Node) DataDir() string { return n.o.DataDir }

// ID is the node's id in every group's Raft configuration.
func (n *Node) ID() string { return n.o.NodeID }

// OpenGroup opens this node's replica of group id over store, with its
// raft state in the group's dir (see NodeOptions.DataDir): bootstrapping it
// when the node bootstraps and there is no state, or waiting to be added
// to it. It says whether the dir held state before. A group is open at
// most once on a node; closing it frees the id.
func (n *Node) OpenGroup(id uint32, store *fsm.Store) (*Group, bool, error) {
	return n.open(id, store, n.o.Bootstrap, nil)
}

// OpenReplica opens this node's replica of group id over store as
// OpenGroup does, but never bootstraps it: without raft state it waits to
// be added by the group's leader. Placement opens replicas so while the
// node runs; bootstrapping one would make a second group of that id.
func (n *Node) OpenReplica(id uint32, store *fsm.Store) (*Group, error) {
	g, _, err := n.open(id, store, false, nil)
	return g, err
}

// OpenCreated opens this node's replica of data group id, created while
// the cluster runs, over store: without raft state it bootstraps the
// group with voters as its first configuration, as each of them does
// (GroupSet.Bootstraps says when: tending calls it only then).
func (n *Node) OpenCreated(id uint32, store *fsm.Store, voters []Peer) (*Group, error) {
	if len(voters) == 0 {
		return nil, fmt.Errorf("group: group %d: no voters to bootstrap with", id)
	}
	g, _, err := n.open(id, store, true, voters)
	return g, err
}

func (n *Node) open(id uint32, store *fsm.Store, bootstrap bool, voters []Peer) (*Group, bool, error) {
	n.mu.Lock()
	switch {
	case n.closed:
		n.mu.Unlock()
		return nil, false, ErrNodeClosed
	case n.groups[id] != nil || n.opening[id]:
		n.mu.Unlock()
		return nil, false, fmt.Errorf("group: group %d is already open on this node", id)
	}
	n.opening[id] = true
	n.opens.Add(1)
	n.mu.Unlock()
	defer n.opens.Done()

	g, had, err := n.openGroup(id, store, bootstrap, voters)
	n.mu.Lock()
	delete(n.opening, id)
	if err == nil {
		n.groups[id] = g
	}
	n.mu.Unlock()
	return g, had, err
}

func (n *Node) openGroup(id uint32, store *fsm.Store, bootstrap bool, voters []Peer) (*Group, bool, error) {
	dir := GroupDir(n.o.DataDir, id)
	logger := n.o.Logger.With("group", id)
	if err := checkClusterState(n.o, logger, dir); err != nil {
		return nil, false, err
	}
	had, err := cluster.HasState(dir)
	if err != nil {
		return nil, false, err
	}
	var bv []cluster.Voter
	for _, p := range voters {
		bv = append(bv, cluster.Voter{ID: p.ID, Addr: p.Addr})
	}
	node, err := cluster.Open(cluster.Config{
		BootstrapVoters:   bv,
		NodeID:            n.o.NodeID,
		RaftAddr:          n.Addr(),
		Dir:               dir,
		Bootstrap:         bootstrap,
		FSM:               fsm.NewRaftFSM(store),
		Logger:            logger,
		SnapshotThreshold: n.o.SnapshotThreshold,
		TrailingLogs:      n.o.TrailingLogs,
		SnapshotInterval:  n.o.SnapshotInterval,
		SnapshotGrowth:    n.o.SnapshotGrowth,
		Mux:               n.mux,
		Group:             id,
	})
	if err != nil {
		return nil, false, err
	}
	go n.relayLeadership(node)
	p := newRaftProposer(node)
	p.gate = &n.gate
	return &Group{id: id, store: store, node: node, raft: p, proposer: p, owner: n}, had, nil
}

// forget drops g from the node's open groups once g has closed.
func (n *Node) forget(g *Group) {
	n.mu.Lock()
	if n.groups[g.id] == g {
		delete(n.groups, g.id)
	}
	n.mu.Unlock()
}

// Group returns group id's replica open on this node, or nil.
func (n *Node) Group(id uint32) *Group {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.groups[id]
}

// DropGroup closes this node's replica of data group id and deletes its
// raft state when drop, given the last index of the closed replica's log,
// says so (Membership.Dropped); it reports whether it deleted it. A
// replica kept is closed with its state in place: opening it again picks
// up where it stopped. The state is moved aside in one rename before it is
// deleted, so a crash midway leaves no half-deleted group to open
// (OpenNode deletes what was moved aside).
func (n *Node) DropGroup(id uint32, drop func(lastIndex uint64) bool) (bool, error) {
	g := n.Group(id)
	switch {
	case id == 0:
		return false, errors.New("group: group 0 is on every node")
	case g == nil:
		return false, fmt.Errorf("group: group %d is not open on this node", id)
	}
	if err := g.Close(); err != nil {
		return false, fmt.Errorf("group %d: %w", id, err)
	}
	// Closed: the log ends here for good.
	if !drop(g.node.Status().LastIndex) {
		return false, nil
	}
	return true, n.deleteGroupState(id)
}

// DeleteGroupState deletes the raft state of data group id that this
// node's data dir holds while no replica of it is open here: what is left
// of a removed group whose replica did not open. It reports whether there
// was state to delete.
func (n *Node) DeleteGroupState(id uint32) (bool, error) {
	if id == 0 {
		return false, errors.New("group: group 0 is on every node")
	}
	n.mu.Lock()
	open := n.groups[id] != nil || n.opening[id]
	n.mu.Unlock()
	if open {
		return false, fmt.Errorf("group: group %d is open on this node", id)
	}
	if ok, err := isDir(filepath.Dir(GroupDir(n.o.DataDir, id))); err != nil || !ok {
		return false, err
	}
	return true, n.deleteGroupState(id)
}

// deleteGroupState moves group id's dir aside in one rename, then deletes
// it.
func (n *Node) deleteGroupState(id uint32) error {
	dir := filepath.Dir(GroupDir(n.o.DataDir, id))
	aside := dir + droppedSuffix
	if err := os.RemoveAll(aside); err != nil {
		return fmt.Errorf("group: %w", err)
	}
	if err := os.Rename(dir, aside); err != nil {
		return fmt.Errorf("group: %w", err)
	}
	if err := SyncParent(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(aside); err != nil {
		return fmt.Errorf("group: %w", err)
	}
	return nil
}

// droppedSuffix marks a group's dir that DropGroup moved aside.
const droppedSuffix = ".dropped"

// removeDropped deletes the dirs DropGroup moved aside and did not get to
// delete.
func removeDropped(dataDir string) error {
	aside, err := filepath.Glob(filepath.Join(dataDir, "groups", "*"+droppedSuffix))
	if err != nil {
		return fmt.Errorf("group: %w", err)
	}
	for _, dir := range aside {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("group: %w", err)
		}
	}
	return nil
}

// Groups returns the groups open on this node, by id.
func (n *Node) Groups() []*Group {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]*Group, 0, len(n.groups))
	for _, g := range n.groups {
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b *Group) int { return cmp.Compare(a.id, b.id) })
	return out
}

// Close closes the groups still open (each hands its leadership over
// first, cluster.Node.Close), after any OpenGroup under way has returned,
// and then the Raft port. Idempotent; it returns the groups' errors.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.mu.Unlock()
	n.opens.Wait()
	// The groups close side by side: each may first hand its leadership
	// over, a round trip or two, and a node may lead many.
	groups := n.Groups()
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Go(func() {
			if err := g.Close(); err != nil {
				errs[i] = fmt.Errorf("group %d: %w", g.id, err)
			}
		})
	}
	wg.Wait()
	n.mux.Close()
	return errors.Join(errs...)
}

// GroupDir is where group id's raft state lives in the node's data dir:
// DataDir/raft for group 0, as before groups, and DataDir/groups/<id>/raft
// for the others.
func GroupDir(dataDir string, id uint32) string {
	if id == 0 {
		return filepath.Join(dataDir, "raft")
	}
	return filepath.Join(dataDir, "groups", strconv.FormatUint(uint64(id), 10), "raft")
}

// StoredGroups lists the groups whose raft state this node's data dir
// holds, by id: the replicas a restarting node opens again. A dir that
// only a repair left behind (raft moved aside) is not a group's state.
func StoredGroups(dataDir string) ([]uint32, error) {
	var ids []uint32
	if ok, err := isDir(GroupDir(dataDir, 0)); err != nil {
		return nil, err
	} else if ok {
		ids = append(ids, 0)
	}
	entries, err := os.ReadDir(filepath.Join(dataDir, "groups"))
	if errors.Is(err, os.ErrNotExist) {
		return ids, nil
	}
	if err != nil {
		return nil, fmt.Errorf("group: %w", err)
	}
	for _, e := range entries {
		id, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil || id == 0 || strconv.FormatUint(id, 10) != e.Name() {
			continue // not a dir OpenGroup makes
		}
		if ok, err := isDir(GroupDir(dataDir, uint32(id))); err != nil {
			return nil, err
		} else if ok {
			ids = append(ids, uint32(id))
		}
	}
	slices.Sort(ids)
	return ids, nil
}

func isDir(path string) (bool, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("group: %w", err)
	}
	return fi.IsDir(), nil
}
