package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"kvs/fsm"
	"kvs/group"
	"kvs/server"
)

// A cluster's slots are spread over its data groups (--groups N at
// --bootstrap). With more than one, group 0 is the meta group, which holds
// what the whole cluster shares (members and their addresses, ACL users,
// functions, and where each data group is) and no slots, and is on every
// node; the data groups are 1..N, each on --replicas R nodes (0: every
// node) that group.Placement picks from group 0's voters. Both are fixed
// when the cluster is made: each node keeps them in DIR/group-count (N on
// the first line, R on the second), written before it opens its groups,
// and reads them back at every start. Groups added and removed since
// (kvs groups, groupadmin.go) are listed in the meta group; N is then the
// groups the cluster was made with: its groups until the meta group
// lists others, and the slot map it routes by until the stored one
// reaches it. A node started with --join asks the
// member it joins through; one added by `kvs join` is started with the
// cluster's --groups and --replicas, which the join checks. A data dir
// from before groups, or of a cluster of one group, has no file: one
// group. A file without the second line is of a cluster from before
// --replicas, where every node holds every group.

// defaultReplicas is --replicas's default: each data group on three nodes,
// or on every node while there are fewer.
const defaultReplicas = 3

// groupsFile is where a node keeps its cluster's group count.
func groupsFile(dataDir string) string { return filepath.Join(dataDir, "group-count") }

// shape is how a cluster's slots are spread: over groups data groups, each
// with replicas replicas (0: on every node).
type shape struct{ groups, replicas int }

// resolveGroups returns the shape of the cluster this node is in or is
// about to join, and writes it down when it is new. A --join node waits for
// the member it joins through to answer; a signal meanwhile stops the
// process (no handler is installed yet).
func resolveGroups(f serveFlags, logger *slog.Logger) (shape, error) {
	if sh, ok, err := readGroups(f.dataDir); err != nil {
		return shape{}, err
	} else if ok {
		switch {
		case f.groups != 0 && f.groups != sh.groups:
			return shape{}, fmt.Errorf("--groups %d: the data dir's cluster was made with %d groups (kvs groups add and remove change its groups, not --groups)", f.groups, sh.groups)
		case f.replicasGiven && f.replicas != sh.replicas:
			return shape{}, fmt.Errorf("--replicas %d: the data dir's cluster places %d replicas of each group, fixed when it was made", f.replicas, sh.replicas)
		}
		return sh, nil
	}
	stored, err := group.StoredGroups(f.dataDir)
	if err != nil {
		return shape{}, err
	}
	if len(stored) > 0 {
		// Cluster state from before groups, or of one group.
		if f.groups > 1 {
			return shape{}, fmt.Errorf("--groups %d: the data dir holds a cluster of one group", f.groups)
		}
		return shape{groups: 1}, nil
	}
	sh := shape{groups: max(1, f.groups), replicas: f.replicas}
	if f.join != "" && (f.groups == 0 || !f.replicasGiven) {
		asked, err := askGroups(f.join, logger)
		if err != nil {
			return shape{}, err
		}
		if f.groups == 0 {
			sh.groups = asked.groups
		}
		if !f.replicasGiven {
			sh.replicas = asked.replicas
		}
	}
	if sh.groups > 1 {
		if err := writeGroups(f.dataDir, sh); err != nil {
			return shape{}, err
		}
	}
	return sh, nil
}

// askGroups asks the member at addr for its cluster's shape, retrying
// until it answers.
func askGroups(addr string, logger *slog.Logger) (shape, error) {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		st, err := fetchStatus(ctx, addr)
		cancel()
		if err == nil {
			return shape{groups: dataGroups(st.madeGroups()), replicas: int(st.uint("replicas"))}, nil
		}
		logger.Warn("asking the cluster its group count failed; retrying", "via", addr, "err", err, "in", wait)
		time.Sleep(wait)
	}
}

func readGroups(dataDir string) (shape, bool, error) {
	b, err := os.ReadFile(groupsFile(dataDir))
	if errors.Is(err, os.ErrNotExist) {
		return shape{}, false, nil
	}
	if err != nil {
		return shape{}, false, err
	}
	bad := fmt.Errorf("%s: not a group count: %q", groupsFile(dataDir), b)
	lines := strings.Fields(string(b))
	if len(lines) < 1 || len(lines) > 2 {
		return shape{}, false, bad
	}
	var sh shape
	sh.groups, err = strconv.Atoi(lines[0])
	if err != nil || sh.groups < 1 || sh.groups > group.MaxGroups {
		return shape{}, false, bad
	}
	if len(lines) == 2 {
		if sh.replicas, err = strconv.Atoi(lines[1]); err != nil || sh.replicas < 0 {
			return shape{}, false, bad
		}
	}
	return sh, true, nil
}

// writeGroups writes the shape durably: a temporary file, fsynced, renamed
// over, and the directory fsynced.
func writeGroups(dataDir string, sh shape) error {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	path := groupsFile(dataDir)
	tmp := path + ".tmp"
	fh, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(fh, "%d\n%d\n", sh.groups, sh.replicas); err != nil {
		fh.Close()
		return err
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		return err
	}
	if err := fh.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return group.SyncParent(path)
}

// raftGroups is the number of Raft groups a node of a cluster of n data
// groups opens: the data groups, and the meta group when there are
// several.
func raftGroups(n int) int {
	if n > 1 {
		return n + 1
	}
	return 1
}

// dataGroups is raftGroups's inverse: the data groups of a node that holds
// n Raft groups.
func dataGroups(n int) int {
	if n > 1 {
		return n - 1
	}
	return 1
}

// slotTable is the slot map a cluster of n data groups starts with
// (group.InitialSlotMap) as the server takes it: slot -> Raft group, the
// data groups being 1..n when there are several. A node routes by it until
// the meta group's stored map reaches it, which is the same map at first.
func slotTable(n int) ([]uint16, error) {
	m, err := group.InitialSlotMap(n)
	if err != nil {
		return nil, err
	}
	return m.Table(), nil
}

// nodeSaver saves every group open on the node (SAVE, BGSAVE).
type nodeSaver struct{ node *group.Node }

func (ns nodeSaver) Save() error {
	var errs []error
	for _, g := range ns.node.Groups() {
		if err := g.Save(); err != nil {
			errs = append(errs, fmt.Errorf("group %d: %w", g.ID(), err))
		}
	}
	return errors.Join(errs...)
}

// Where each data group is, in group 0's metadata: its leader's node id
// under group/<k>/leader and its membership (group.Membership) under
// group/<k>/config, both written by its leader as it tends.

func metaGroupLeader(id int) string { return "group/" + strconv.Itoa(id) + "/leader" }
func metaGroupConfig(id int) string { return "group/" + strconv.Itoa(id) + "/config" }

// groupsMeta reads and writes the data groups' entries in group 0's
// metadata: group.Meta for tending, and server.Remote for the server.
type groupsMeta struct {
	meta *clusterView // group 0's
	srv  *server.Server
}

func (gm *groupsMeta) Leader(id uint32) string {
	v, _ := gm.meta.store.Meta(metaGroupLeader(int(id)))
	return v
}

func (gm *groupsMeta) Membership(id uint32) (group.Membership, bool) {
	v, ok := gm.meta.store.Meta(metaGroupConfig(int(id)))
	if !ok || v == "" {
		return group.Membership{}, false
	}
	m, err := group.ParseMembership(v)
	return m, err == nil
}

// Publish proposes both entries in one batch, through group 0's leader
// (Server.Propose forwards there); nothing for a group removed.
func (gm *groupsMeta) Publish(id uint32, m group.Membership) error {
	if v, ok := gm.meta.store.Meta(group.GroupSetMeta); ok {
		if set, err := group.ParseGroupSet(v); err == nil && set.Removed(id) {
			return nil
		}
	}
	_, err := gm.srv.Propose([]fsm.Command{
		metaSet(metaGroupLeader(int(id)), gm.meta.id),
		metaSet(metaGroupConfig(int(id)), m.Encode()),
	})
	return err
}

// remoteGroups is server.Remote over the same entries, with client
// addresses from the members' own entries.
type remoteGroups struct{ gm *groupsMeta }

func (r remoteGroups) Leader(i int) (server.Member, bool) {
	id := r.gm.Leader(uint32(i))
	if id == "" {
		return server.Member{}, false
	}
	m := r.gm.meta.member(id, "", true, id)
	return m, m.RESPAddr != ""
}

func (r remoteGroups) Members(i int) []server.Member {
	ms, ok := r.gm.Membership(uint32(i))
	if !ok {
		return nil
	}
	leader := r.gm.Leader(uint32(i))
	// Raft addresses as group 0 has them: a node has one Raft port for
	// every group.
	addrs := map[string]string{}
	if g0, err := r.gm.meta.node.Members(); err == nil {
		for _, m := range g0 {
			addrs[m.ID] = m.RaftAddr
		}
	}
	var out []server.Member
	for _, id := range ms.Voters {
		out = append(out, r.gm.meta.member(id, addrs[id], true, leader))
	}
	for _, id := range ms.Nonvoters {
		out = append(out, r.gm.meta.member(id, addrs[id], false, leader))
	}
	slices.SortFunc(out, func(a, b server.Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// groupView is the server's window on one of the node's data groups: its
// raft, with client addresses from group 0's metadata.
func groupView(g *group.Group, meta *clusterView) server.Group {
	v := &clusterView{node: g.Node(), store: meta.store, id: meta.id, raftAddr: meta.raftAddr, propose: meta.propose}
	v.respAddr = meta.respAddr
	return server.Group{Store: g.Store(), Proposer: g.Proposer(), Raft: v}
}

// tendGroups runs the node's placement every interval until stop closes
// (group.Node.Tend): it opens the replicas the placement gives this node
// and hands them to the server, moves the groups it leads toward the
// placement and publishes where they are, deletes the replicas it no
// longer holds, and spreads leaderships. As the meta group's leader it
// first stores the slot map, while the meta group has none and once the
// cluster's level allows (storeSlotMap).
//
// Each round follows the meta group's list of data groups (readGroupSet):
// it installs it in the server (slotMapFollower.installGroups), tends the
// groups it lists, and, on the meta group's leader, clears what removed
// groups left in the meta group (clearRemoved).
func tendGroups(stop <-chan struct{}, node *group.Node, sh shape, gm *groupsMeta, maps *slotMapFollower,
	newStore func() (*fsm.Store, error), logger *slog.Logger) {
	const interval = time.Second
	srv, meta := gm.srv, gm.meta
	o := group.TendOptions{
		Replicas: sh.replicas,
		NewStore: func(id uint32) (*fsm.Store, error) {
			st, err := newStore()
			if err == nil {
				srv.PrepareGroupStore(int(id), st)
			}
			return st, err
		},
		Serve: func(id uint32, g *group.Group) {
			var sg *server.Group
			if g != nil {
				v := groupView(g, meta)
				sg = &v
			}
			if err := srv.SetLocalGroup(int(id), sg); err != nil {
				logger.Error("handing a group to the server", "group", id, "err", err)
			}
		},
		Meta: gm,
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	levelWait := false // said that the slot map waits for the cluster's level
	for {
		// A round every interval, and at once when a replica here has
		// become its group's leader, so that it is served (Tend) before
		// the clients' writes come to it.
		select {
		case <-stop:
			return
		case <-t.C:
		case <-node.Wakes():
		}
		wrote, err := storeSlotMap(gm, sh.groups)
		if errors.Is(err, group.ErrLevel) {
			if !levelWait {
				logger.Info("the slot map is stored once every node runs a kvs that applies it", "err", err)
			}
			levelWait = true
		} else if err != nil {
			logger.Warn("storing the slot map in the meta group", "err", err)
		} else if wrote {
			logger.Info("stored the slot map in the meta group", "version", 1)
		}
		if err := recordLevels(node, meta.keeper.levels.Cluster()); err != nil {
			logger.Debug("recording the cluster's level in a data group", "err", err)
		}
		set, _, err := readGroupSet(gm, sh.groups)
		if err != nil {
			logger.Error("the meta group's list of data groups is malformed; tending waits", "err", err)
			continue
		}
		o.Groups = set
		maps.installGroups()
		if err := clearRemoved(gm, set); err != nil {
			logger.Warn("clearing the entries of removed groups", "err", err)
		}
		if err := publishKnowsGroups(gm); err != nil {
			logger.Debug("saying this node knows the list of groups", "err", err)
		}
		if err := seedGroups(gm, node, set, logger); err != nil {
			logger.Warn("seeding a new group", "err", err)
		}
		rep := node.Tend(o)
		if rep.Err != nil {
			logger.Warn("group placement", "err", rep.Err)
		}
		for _, id := range rep.Opened {
			logger.Info("opened a replica of a group", "group", id)
		}
		for _, id := range rep.Dropped {
			logger.Info("deleted this node's replica of a group it no longer holds", "group", id)
		}
		for _, id := range rep.Published {
			logger.Debug("published a group's leader and membership", "group", id)
		}
		for _, h := range rep.Handovers {
			switch {
			case h.Err == nil:
				logger.Info("handed a group's leadership over", "group", h.Group, "to", h.To)
			case errors.Is(h.Err, group.ErrOutOfContact):
				logger.Debug("group leadership stays", "group", h.Group, "preferred", h.To, "err", h.Err)
			default:
				logger.Warn("handing a group's leadership over failed", "group", h.Group, "to", h.To, "err", h.Err)
			}
		}
	}
}

// openDataGroups opens, at start, the data groups of a node: every one,
// bootstrapped, on the node that makes the cluster (bootstrap), else those
// whose state the data dir holds (a node that restarts), removed groups
// too (tending deletes them once the meta group says they are removed);
// tending opens the others the placement gives it. Their stores get the
// parser a replayed script runs its calls with, which refuses the keys of
// the other groups as it did when it first ran. It returns the ids of
// the groups the server starts with (startGroups).
func openDataGroups(node *group.Node, sh shape, bootstrap bool, newStore func() (*fsm.Store, error), home *fsm.Store, slots []uint16, set group.GroupSet) ([]int, error) {
	var ids []uint32
	if bootstrap {
		for id := 1; id <= sh.groups; id++ {
			ids = append(ids, uint32(id))
		}
	} else {
		stored, err := group.StoredGroups(node.DataDir())
		if err != nil {
			return nil, err
		}
		for _, id := range stored {
			if id > 0 {
				ids = append(ids, id)
			}
		}
	}
	known := startGroups(sh, set, ids)
	gs := make([]server.Group, slices.Max(known)+1)
	for i := range gs {
		gs[i].Absent = !slices.Contains(known, i)
	}
	gs[0] = server.Group{Store: home}
	stores := map[uint32]*fsm.Store{}
	for _, id := range ids {
		st, err := newStore()
		if err != nil {
			return nil, err
		}
		stores[id], gs[id].Store = st, st
	}
	server.InstallScriptParser(server.Config{Store: home, Groups: gs, Slots: slots})
	for _, id := range ids {
		if _, _, err := node.OpenGroup(id, stores[id]); err != nil {
			return nil, err
		}
	}
	return known, nil
}

// startGroups are the ids of the groups a node's server starts with: the
// meta group, the groups the cluster was made with (the map a node routes
// by until the stored one reaches it names them), the live ones as this
// node's replica of the meta group has them by now, and those whose
// state the node holds. The server drops those that are not live once the
// meta group's list and map reach it (slotMapFollower).
func startGroups(sh shape, set group.GroupSet, stored []uint32) []int {
	ids := []int{0}
	for id := 1; id <= sh.groups; id++ {
		ids = append(ids, id)
	}
	for _, id := range set.Live {
		ids = append(ids, int(id))
	}
	for _, id := range stored {
		ids = append(ids, int(id))
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// servedGroups are the server's groups at start (known, by id): a window
// on each data group this node serves (group.Node.Serves), none for the
// others, which tending hands over once they serve; views are the
// windows, for the client address set once the server listens.
func servedGroups(node *group.Node, sh shape, known []int, meta *clusterView, home server.Proposer) (out []server.Group, views []*clusterView) {
	out = make([]server.Group, slices.Max(known)+1)
	for i := range out {
		out[i].Absent = !slices.Contains(known, i)
	}
	out[0] = server.Group{Store: meta.store, Proposer: home, Raft: meta}
	for _, id := range known[1:] {
		if g := node.Serves(uint32(id), sh.replicas); g != nil {
			out[id] = groupView(g, meta)
			views = append(views, out[id].Raft.(*clusterView))
		}
	}
	return out, views
}
