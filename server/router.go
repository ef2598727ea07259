package server

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"kvs/fsm"
)

// The router is the one place that knows how this node is deployed: alone
// (memory or durable mode) or as a member of a cluster, and which
// replication group holds a slot. Everything else asks it, never the
// configuration: whether there is a cluster at all (CLUSTER, READONLY,
// INFO, the KVS.* commands, pub/sub links), and, of the group a command's
// keys belong to, whether this node leads it (run the command here) or
// where its leader is (forward, or answer MOVED).
//
// A node holds one group, which owns all 16384 slots (its home), unless it
// was given several (Config.Groups): then each slot belongs to one group,
// the keys of one command must share a slot (CROSSSLOT otherwise, as in
// Redis Cluster), and the command runs on that slot's group. The home
// group also holds what the node shares (ACL users, functions). The group
// is the unit that proposes writes, answers for its leadership and read
// barrier, and expires and evicts its keys.
//
// A sharded node need not hold a replica of every group: a group held
// elsewhere (remote) has its keyed commands forwarded to its leader, reads
// too, or answered with MOVED on a READONLY connection and where a
// command cannot be forwarded (blocking pops, WATCH, the commands that
// read the store themselves). Which groups a node holds changes at run
// time (Server.SetLocalGroup), and so does which group owns a slot (the
// cluster's slot map, Server.SetSlotMap): a command loads its group once
// and uses that to the end.
type router struct {
	// cluster is the node's cluster (members, their addresses, joins and
	// removals); nil: standalone.
	cluster Cluster
	home    groupRef
	// groups are the cluster's groups by index, groups[0] the home; a
	// node holds one (the home), or several with slots for each (slots
	// maps a slot to its index in groups). A sharded
	// node may hold no replica of some groups: their entry is a groupRef
	// without a store, whose leader remote tells. An entry is replaced
	// whole as this node comes to hold a replica of its group or stops
	// (Server.SetLocalGroup): a client that loaded one uses it to the end
	// of its command, and a store, once handed over, stays valid after.
	//
	// The table is replaced whole too (copy on write, under mu) as groups
	// are added to the cluster or removed from it (Server.SetGroups): its
	// index is the group's id, nil where no group has that id (not given
	// yet, or removed).
	groups atomic.Pointer[[]*groupRef]
	// several says the slots are spread over several groups, for good:
	// slots is then set, else nil.
	several bool
	// slots is the slot map in force, replaced whole by a newer version
	// (Server.SetSlotMap): a command that loaded it routes by what it
	// loaded to its end.
	slots atomic.Pointer[slotMap]
	// startSlots is the map the cluster was made with (Config.Slots),
	// which the scripts' calls are checked against inside apply
	// (parseScriptCall): what apply decides must not depend on the
	// version a replica happens to have.
	startSlots []uint16
	remote     Remote
	// mapMu guards mapChanged, closed and replaced as each new version
	// of the slot map is installed: what a command refused for a slot
	// move waits on (reroute.go).
	mapMu      sync.Mutex
	mapChanged chan struct{}
	// listed are the groups the last SetGroups named (nil before it),
	// guarded by mu.
	listed map[int]bool
	// mu serializes SetLocalGroup with the changes every local store gets
	// alike (hooks, encoding limits, notification classes): a store
	// joining meanwhile gets them too.
	mu sync.Mutex
}

// Group is one replication group a node holds (Config.Groups).
type Group struct {
	Store    *fsm.Store
	Proposer Proposer
	// Raft is the group's replication (leader, read barrier, applied
	// index); nil: a group without replicas, which this node leads.
	Raft Cluster
	// Absent, in Config.Groups, says no group has this index (an id not
	// given, or a group removed): the other fields are unused.
	Absent bool
}

// Remote tells a sharded node where the groups it holds no replica of are
// (Config.Remote), as the cluster's replicated metadata says. Its methods
// are called from connection goroutines: safe for concurrent use, and
// cheap.
type Remote interface {
	// Leader returns group i's leader, ok false while none is known or
	// its client address is not.
	Leader(group int) (m Member, ok bool)
	// Members returns group i's replicas as far as they are known, the
	// leader among them with Leader set.
	Members(group int) []Member
}

// groupRef is one replication group as the server uses it: its store, the
// proposer of its writes, and its replication; a group this node holds no
// replica of has none of them (remote).
type groupRef struct {
	store    *fsm.Store
	proposer Proposer
	// raft is the group's replication (leader, read barrier, applied
	// index); nil: a group without replicas, which this node leads, or a
	// remote one.
	raft Cluster
	// index is the group's place in router.groups, the same on every
	// node of a cluster.
	index int
	// rsync is the READONLY reads' questions to the group's leader
	// (replicasync.go).
	rsync replicaSync
}

// remote reports whether this node holds no replica of the group: its
// commands go to its leader, which Config.Remote names.
func (g *groupRef) remote() bool { return g.store == nil }

// leads reports whether this node decides the group's writes: it leads
// the group, or the group has no replicas.
func (g *groupRef) leads() bool { return g.store != nil && (g.raft == nil || g.raft.Self().Leader) }

// replicated reports whether the group has replicas (and so a leader,
// followers, a read barrier): a remote group has.
func (g *groupRef) replicated() bool { return g.raft != nil || g.store == nil }

// caughtUp reports whether the group's store may serve reads: it has
// applied what its log held when the node started.
func (g *groupRef) caughtUp() bool { return g.raft == nil || g.raft.CaughtUp() }

// init sets the router up for cfg, in place: the groups point at its
// home.
func (r *router) init(cfg *Config) {
	r.cluster = cfg.Cluster
	r.home.store, r.home.proposer, r.home.raft = cfg.Store, cfg.Proposer, cfg.Cluster
	r.remote = cfg.Remote
	table := make([]*groupRef, max(1, len(cfg.Groups)))
	table[0] = &r.home
	r.groups.Store(&table)
	if len(cfg.Groups) > 1 {
		r.several = true
		// The computed map, version 0 (Config.Slots): validated with
		// the Config.
		m, _ := newSlotMap(0, cfg.Slots, len(cfg.Groups))
		r.slots.Store(m)
		r.startSlots = cfg.Slots
		for i, g := range cfg.Groups[1:] {
			if g.Absent {
				continue
			}
			table[i+1] = &groupRef{store: g.Store, proposer: g.Proposer, raft: g.Raft, index: i + 1}
		}
	}
}

// slotMap is one version of a sharded node's slot map. It is never
// changed once made: a new version is a new slotMap.
type slotMap struct {
	// version is the version of the cluster's stored map; 0 for the one
	// a node computes at start (Config.Slots), until the stored one
	// reaches it.
	version uint64
	// slots maps a slot to the index of its group in router.groups.
	slots []uint16
	// bySlot are the indexes of the groups that hold slots, in the order
	// of the lowest slot each holds: the order in which a sharded node's
	// first group is found, which runs its keyless scripts (scriptGroup)
	// and says what ROLE and CLUSTER NODES call it (clustershards.go).
	bySlot []int
}

// newSlotMap makes version of the slot map of a node of groups groups
// from table (slot -> group index), which it keeps.
func newSlotMap(version uint64, table []uint16, groups int) (*slotMap, error) {
	return newSlotMapOf(version, table, groups, func(int) bool { return true })
}

// newSlotMapOf is newSlotMap for a node whose group indexes below groups
// are those exists says exist.
func newSlotMapOf(version uint64, table []uint16, groups int, exists func(int) bool) (*slotMap, error) {
	if len(table) != fsm.ClusterSlots {
		return nil, fmt.Errorf("server: a slot map of %d slots, want %d", len(table), fsm.ClusterSlots)
	}
	m := &slotMap{version: version, slots: table}
	seen := make([]bool, groups)
	for slot, g := range table {
		if int(g) >= groups || (!seen[g] && !exists(int(g))) {
			return nil, fmt.Errorf("server: the slot map gives slot %d to group %d, which this node does not know", slot, g)
		}
		if !seen[g] {
			seen[g] = true
			m.bySlot = append(m.bySlot, int(g))
		}
	}
	return m, nil
}

// runs is the map as the meta group's value writes its runs (without the
// version): "first-last:group" for each run of slots of one group, in
// slot order, joined by commas.
func (m *slotMap) runs() string {
	var b []byte
	for s := 0; s < len(m.slots); {
		e := s
		for e+1 < len(m.slots) && m.slots[e+1] == m.slots[s] {
			e++
		}
		if s > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(s), 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, int64(e), 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(m.slots[s]), 10)
		s = e + 1
	}
	return string(b)
}

// slotMap returns the slot map in force, nil with one group.
func (r *router) slotMap() *slotMap { return r.slots.Load() }

// SetSlotMap makes version of the cluster's slot map the one a sharded
// node routes by, table giving each of the 16384 slots its group's index
// (Config.Groups). A version not newer than the one in force is ignored,
// so maps may arrive out of order. Commands that loaded the map before go
// on with it; those after go by the new one: to the new owner of a moved
// slot's group, its leader, or MOVED there.
func (s *Server) SetSlotMap(version uint64, table []uint16) error {
	r := &s.router
	if !r.several {
		return errors.New("server: a node of one group has no slot map to set")
	}
	// Under mu: SetGroups must not remove a group a map being installed
	// names.
	r.mu.Lock()
	t := r.table()
	next, err := newSlotMapOf(version, slices.Clone(table), len(t), func(i int) bool { return t[i] != nil })
	if err != nil {
		r.mu.Unlock()
		return err
	}
	cur := r.slots.Load()
	if cur.version >= version {
		r.mu.Unlock()
		return nil
	}
	r.slots.Store(next)
	r.mu.Unlock()
	s.blocked.signalMoved(func(slot int) bool { return cur.slots[slot] != next.slots[slot] })
	r.mapMu.Lock()
	if r.mapChanged != nil {
		close(r.mapChanged)
		r.mapChanged = nil
	}
	r.mapMu.Unlock()
	return nil
}

// SlotMapVersion is the version of the slot map the node routes by: 0
// while it routes by the one it computed at start, and with one group.
func (s *Server) SlotMapVersion() uint64 {
	if m := s.router.slotMap(); m != nil {
		return m.version
	}
	return 0
}

// table is the groups by index, nil where there is none.
func (r *router) table() []*groupRef { return *r.groups.Load() }

// group returns group i, nil for no such group.
func (r *router) group(i int) *groupRef {
	t := r.table()
	if i < 0 || i >= len(t) {
		return nil
	}
	return t[i]
}

// all yields every group of the cluster, by index, those held elsewhere
// included.
func (r *router) all() iter.Seq[*groupRef] {
	return func(yield func(*groupRef) bool) {
		for _, g := range r.table() {
			if g != nil && !yield(g) {
				return
			}
		}
	}
}

// count is the number of the cluster's groups, the home included.
func (r *router) count() int {
	n := 0
	for range r.all() {
		n++
	}
	return n
}

// idsText lists the indexes of the cluster's groups, for errors: "0 to
// n" while they are consecutive.
func (r *router) idsText() string {
	if n := r.count(); n == len(r.table()) {
		return "0 to " + strconv.Itoa(n-1)
	}
	var b []byte
	for g := range r.all() {
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, int64(g.index), 10)
	}
	return string(b)
}

// local yields the groups this node holds a replica of, by index.
func (r *router) local() iter.Seq[*groupRef] {
	return func(yield func(*groupRef) bool) {
		for _, g := range r.table() {
			if g != nil && g.store != nil && !yield(g) {
				return
			}
		}
	}
}

// clustered reports whether the node is a member of a cluster.
func (r *router) clustered() bool { return r.cluster != nil }

// sharded reports whether the node's slots are spread over several groups.
func (r *router) sharded() bool { return r.several }

// groupOf returns the group that holds slot, by the slot map in force.
func (r *router) groupOf(slot int) *groupRef { return r.groupIn(r.slotMap(), slot) }

// groupIn returns the group that holds slot by map m (nil: one group).
func (r *router) groupIn(m *slotMap, slot int) *groupRef {
	if m == nil || slot < 0 {
		return &r.home
	}
	return r.table()[m.slots[slot]]
}

// stores calls f with the store of each group this node holds.
func (r *router) stores(f func(*fsm.Store)) {
	for g := range r.local() {
		f(g.store)
	}
}

// everyStore calls f with the store of each group this node holds, while
// no store joins: for a change every store gets alike, which a store
// joining later gets from prepareStore.
func (r *router) everyStore(f func(*fsm.Store)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stores(f)
}

// dataBytes is the size of the data of all the node's groups (used
// memory's data part). A node of one group reads its store directly: the
// OOM check asks on every denyoom command while maxmemory is set.
func (s *Server) dataBytes() int64 {
	if !s.router.sharded() {
		return s.cfg.Store.DataBytes()
	}
	var n int64
	s.router.stores(func(st *fsm.Store) { n += st.DataBytes() })
	return n
}

// lazyFreedObjects is how many objects the groups' stores freed lazily.
func (s *Server) lazyFreedObjects() int64 {
	var n int64
	s.router.stores(func(st *fsm.Store) { n += st.LazyFreed() })
	return n
}

// dirty is the changes the groups' stores applied since they started.
func (s *Server) dirty() int64 {
	var n int64
	s.router.stores(func(st *fsm.Store) { n += st.Dirty() })
	return n
}

// groupArg returns the group a node request names by its index (KVS.SYNC,
// KVS.FORWARD), the home group when args is empty. A group this node does
// not know (nil, and no error) is one the sender's view of the cluster
// has and this node's has not, or no longer: a group added that this node
// has not opened yet, or one removed that the sender still routes to (its
// replica of the meta group behind, as while it replays its log after a
// restart). The caller answers as a node that does not lead it, which the
// client retries once the views agree.
func (r *router) groupArg(args [][]byte) (*groupRef, string) {
	if len(args) == 0 {
		return &r.home, ""
	}
	i, err := strconv.Atoi(string(args[0]))
	if err != nil || i < 0 {
		return nil, "ERR no such group: " + string(args[0])
	}
	return r.group(i), ""
}

// scriptBusy is the busy script of the node's groups, if one is: a sharded
// node refuses commands while a script of any group is busy, as Redis
// does while its one script is.
func (s *Server) scriptBusy() fsm.Busy {
	if !s.router.sharded() {
		return s.cfg.Store.ScriptBusy()
	}
	for g := range s.router.local() {
		if b := g.store.ScriptBusy(); b != fsm.NotBusy {
			return b
		}
	}
	return fsm.NotBusy
}

// busyGroup is the group whose store runs the node's busy script, nil
// when none does.
func (s *Server) busyGroup() *groupRef {
	for g := range s.router.local() {
		if g.store.ScriptBusy() != fsm.NotBusy {
			return g
		}
	}
	return nil
}

// scriptRunning reports whether the store of one of the node's groups
// runs a script.
func (s *Server) scriptRunning() bool {
	for g := range s.router.local() {
		if g.store.ScriptRunning() {
			return true
		}
	}
	return false
}

// setHooks gives st the server's hooks, and the busy threshold in force.
func (s *Server) setHooks(st *fsm.Store) {
	st.SetReadyHook(s.blocked.signal)
	st.SetNotifyHook(s.keyspaceEvents)
	st.SetExpiredHook(s.expireMet)
	st.SetModifiedHook(s.invalidate)
	st.SetTracking(s.trackingOn())
	st.SetBusyThreshold(s.luaTimeLimit())
}

// PrepareGroupStore readies st, the store of this node's replica of group
// i about to be opened, as the server has its other stores: the parser
// the scripts in its log run their calls with (group i's), the hooks
// (blocked clients, keyspace events, expiry), and the settings in force
// (encoding thresholds, busy threshold, notification classes, access
// tracking). Call it before the replica applies anything, then
// SetLocalGroup once it may serve.
func (s *Server) PrepareGroupStore(i int, st *fsm.Store) {
	s.router.mu.Lock()
	defer s.router.mu.Unlock()
	s.prepareStoreLocked(i, st)
}

// prepareStoreLocked is PrepareGroupStore with router.mu held.
func (s *Server) prepareStoreLocked(i int, st *fsm.Store) {
	st.SetCommandParser(s.scriptParser(i))
	s.setHooks(st)
	st.SetLimits(s.cfg.Store.Limits())
	st.SetNotifyClasses(fsm.NotifyClass(s.notifyFlags.Load()))
	st.SetAccessTracking(fsm.EvictPolicy(s.evictPolicy.Load()).Tracks(), time.Now().UnixMilli())
	s.setLFUParams(st)
}

// SetLocalGroup hands the server this node's replica of group i, a group
// of a sharded node other than the home (g nil: takes it away, and the
// group's commands go to its leader from then on). Commands that loaded
// the group before finish with what they loaded, so the store and
// proposer of a replica taken away must stay usable a moment (its
// proposer may fail their writes). The store gets what PrepareGroupStore
// gives again, in case a setting changed since.
//
// A group the node does not know yet (added to the cluster since the
// node's last SetGroups) becomes one of the cluster's groups when a
// replica of it is handed over; taking away a replica of a group the node
// does not know changes nothing.
func (s *Server) SetLocalGroup(i int, g *Group) error {
	r := &s.router
	if !r.several {
		return errors.New("server: a node of one group has no other groups to set")
	}
	if i <= 0 || i > maxGroupIndex {
		return fmt.Errorf("server: no group %d to set (groups 1 to %d)", i, maxGroupIndex)
	}
	ref := &groupRef{index: i}
	if g != nil {
		if g.Store == nil || g.Proposer == nil || g.Raft == nil {
			return fmt.Errorf("server: group %d needs a Store, a Proposer and Raft", i)
		}
		ref.store, ref.proposer, ref.raft = g.Store, g.Proposer, g.Raft
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if g == nil && r.group(i) == nil {
		return nil
	}
	if g == nil && r.listed != nil && !r.listed[i] && !slices.Contains(r.slotMap().bySlot, i) {
		// A group removed from the cluster, whose replica was kept
		// while this node served it.
		r.setLocked(i, nil)
		return nil
	}
	if g != nil {
		s.prepareStoreLocked(i, g.Store)
	}
	r.setLocked(i, ref)
	return nil
}

// maxGroupIndex is the highest index a group can have: a slot map keeps
// a slot's group in 16 bits.
const maxGroupIndex = 1<<16 - 1

// setLocked puts ref (nil: none) at index i of a new table, with mu held.
func (r *router) setLocked(i int, ref *groupRef) {
	old := r.table()
	t := slices.Clone(old)
	if i >= len(t) {
		t = append(t, make([]*groupRef, i+1-len(t))...)
	}
	t[i] = ref
	for len(t) > 1 && t[len(t)-1] == nil {
		t = t[:len(t)-1]
	}
	r.groups.Store(&t)
}

// SetGroups makes ids the cluster's groups other than the home, on a
// sharded node, as the cluster's list of its groups says: a group not
// known yet is added as one held elsewhere (whose leader Config.Remote
// tells, until SetLocalGroup hands a replica of it over), and a group
// known and not in ids is removed. A group that the slot map in force
// gives slots stays (a map that moved its slots away comes first), and so
// does one this node serves a replica of, until SetLocalGroup takes it
// away: it reports the ids it kept so.
func (s *Server) SetGroups(ids []int) (kept []int, err error) {
	r := &s.router
	if !r.several {
		return nil, errors.New("server: a node of one group has no other groups to set")
	}
	want := map[int]bool{}
	if r.remote == nil {
		return nil, errors.New("server: a group held elsewhere needs Config.Remote")
	}
	for _, i := range ids {
		if i <= 0 || i > maxGroupIndex {
			return nil, fmt.Errorf("server: no group %d to set (groups 1 to %d)", i, maxGroupIndex)
		}
		want[i] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	owns := map[int]bool{}
	for _, i := range r.slotMap().bySlot {
		owns[i] = true
	}
	for i := range want {
		if r.group(i) == nil {
			r.setLocked(i, &groupRef{index: i})
		}
	}
	r.listed = want
	for i, g := range r.table() {
		switch {
		case i == 0 || g == nil || want[i]:
		case owns[i] || !g.remote():
			kept = append(kept, i)
		default:
			r.setLocked(i, nil)
		}
	}
	return kept, nil
}

// slotRun is a run of consecutive slots of one group.
type slotRun struct {
	first, last int
	g           *groupRef
}

// slotRuns returns slot map m (nil: one group) as runs, in slot order.
func (r *router) slotRuns(m *slotMap) []slotRun {
	if m == nil {
		return []slotRun{{0, fsm.ClusterSlots - 1, &r.home}}
	}
	var runs []slotRun
	for s := 0; s < fsm.ClusterSlots; {
		e := s
		for e+1 < fsm.ClusterSlots && m.slots[e+1] == m.slots[s] {
			e++
		}
		runs = append(runs, slotRun{s, e, r.table()[m.slots[s]]})
		s = e + 1
	}
	return runs
}

// madeGroups is Config.MadeGroups, or what it defaults to.
func (s *Server) madeGroups() int {
	if s.cfg.MadeGroups > 0 {
		return s.cfg.MadeGroups
	}
	return max(1, len(s.cfg.Groups))
}
