package main

import (
	"log/slog"
	"sync"
	"sync/atomic"

	"kvs/fsm"
	"kvs/group"
	"kvs/server"
)

// The slot map of a cluster of several data groups lives in the meta
// group's metadata (group.SlotMapMeta). The meta group's leader writes
// version 1, the map the cluster was made with, when there is none: at the
// first round of tending after bootstrap, and after an upgrade from a kvs
// that kept no map (storeSlotMap). Every node installs each version in its
// server as its replica of the meta group applies it (slotMapFollower),
// and routes by the map it computed at start (slotTable, the same map)
// until then.

// metaCAS is the write that sets a metadata name to value only while it
// holds old ("": absent).
func metaCAS(name, old, value string) fsm.Command {
	return fsm.Command{Op: fsm.OpMetaCAS, Args: [][]byte{[]byte(name), []byte(old), []byte(value)}}
}

// storeSlotMap writes version 1 of the slot map of a cluster of groups
// data groups into the meta group, if this node leads it and the map is
// absent; it reports whether it wrote. The write is a compare-and-set
// from absent, so a second one (a new leader's, proposed before the first
// one reached it) changes nothing, and none can replace a later version.
// A compare-and-set is of level 1: until the cluster's level is, some
// node would stop at it, and storeSlotMap returns an error wrapping
// group.ErrLevel (the nodes route by the same map, computed, meanwhile).
func storeSlotMap(gm *groupsMeta, groups int) (bool, error) {
	if _, ok := gm.meta.store.Meta(group.SlotMapMeta); ok || !gm.meta.node.IsLeader() {
		return false, nil
	}
	m, err := group.InitialSlotMap(groups)
	if err != nil {
		return false, err
	}
	r, err := gm.meta.keeper.propose(gm.srv, []fsm.Command{metaCAS(group.SlotMapMeta, "", m.String())})
	if err != nil {
		return false, err
	}
	return r[0].Kind == fsm.ReplyInt && r[0].Int == 1, nil
}

// slotMapFollower installs the meta group's stored slot map in the server
// each time it changes. Its changed method is the meta store's metadata
// hook (fsm.Store.SetMetaHook), run on the goroutine that applies the
// meta group's entries, right after the entry (or snapshot) that wrote
// the map: a node routes by a new map as soon as its replica of the meta
// group has it, with no polling. The hook is set before the meta group
// replays its log, when there is no server yet: attach installs what the
// store holds by then.
//
// It installs the cluster's live data groups (group.GroupSetMeta) the
// same way, first: a group is added before any map names it, and removed
// only once the map in force names it no more.
type slotMapFollower struct {
	store  *fsm.Store // the meta group's
	groups int        // data groups the cluster was made with
	logger *slog.Logger
	srv    atomic.Pointer[server.Server]

	// mu serialises installs (the hook, attach and tending's rounds) and
	// guards last, the value last installed or found malformed, and
	// lastSet, the set's.
	mu      sync.Mutex
	last    string
	lastSet string
}

func newSlotMapFollower(meta *fsm.Store, groups int, logger *slog.Logger) *slotMapFollower {
	f := &slotMapFollower{store: meta, groups: groups, logger: logger}
	meta.SetMetaHook(f.changed)
	return f
}

// attach starts installing the stored map in srv, beginning with the one
// the store holds now.
func (f *slotMapFollower) attach(srv *server.Server) {
	f.srv.Store(srv)
	f.changed()
}

// changed installs the stored map if it is not the one last installed.
// The server ignores a version older than the one it has, so installs
// racing each other cannot take the map back.
func (f *slotMapFollower) changed() {
	srv := f.srv.Load()
	if srv == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	set, ok := f.installGroupsLocked(srv, false)
	if !ok {
		return
	}
	v, ok := f.store.Meta(group.SlotMapMeta)
	if !ok || v == f.last {
		return
	}
	f.last = v
	m, err := group.ParseSlotMapIn(v, set)
	if err != nil {
		// Written through the log by a kvs of this cluster: a bug, which
		// routing by the map in force outlives.
		f.logger.Error("the meta group's slot map is malformed; routing by the one in force", "err", err)
		return
	}
	if err := srv.SetSlotMap(m.Version(), m.Table()); err != nil {
		f.logger.Error("installing the slot map", "version", m.Version(), "err", err)
		return
	}
	f.logger.Info("slot map installed", "version", m.Version())
}

// installGroups installs the live data groups in the server again, for
// tending's rounds: a group the map in force still named when the set
// dropped it is removed once the map no longer does.
func (f *slotMapFollower) installGroups() {
	srv := f.srv.Load()
	if srv == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.installGroupsLocked(srv, true)
}

// installGroupsLocked installs the stored set of data groups (the one the
// cluster was made with while there is none) in srv when it changed, or
// always; it returns the set, ok false when the stored one is malformed.
func (f *slotMapFollower) installGroupsLocked(srv *server.Server, always bool) (group.GroupSet, bool) {
	v, _ := f.store.Meta(group.GroupSetMeta)
	set := group.DefaultGroupSet(f.groups)
	if v != "" {
		var err error
		if set, err = group.ParseGroupSet(v); err != nil {
			if v != f.lastSet {
				f.logger.Error("the meta group's list of data groups is malformed; keeping the groups in force", "err", err)
			}
			f.lastSet = v
			return group.GroupSet{}, false
		}
	}
	if v == f.lastSet && !always {
		return set, true
	}
	ids := make([]int, len(set.Live))
	for i, id := range set.Live {
		ids[i] = int(id)
	}
	if _, err := srv.SetGroups(ids); err != nil {
		f.logger.Error("installing the cluster's data groups", "err", err)
		return set, true
	}
	if v != f.lastSet && v != "" {
		f.logger.Info("data groups installed", "version", set.Version, "groups", set.Live)
	}
	f.lastSet = v
	return set, true
}
