package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"kvs/fsm"
	"kvs/group"
	"kvs/server"
)

// A cluster node keeps its part of the cluster's level (group.Levels): it
// publishes its own level beside its client address (advertise); as the
// meta group's leader it records the cluster's level once every member
// can apply it (keepLevel), and admits a joining node only at that level
// or above (clusterView.Join); and it proposes an entry above level 0 only
// once the cluster's level allows it (levelKeeper.propose). So a rolling
// upgrade, one node at a time, never has a node meet an entry it cannot
// apply: the first entry of a new level is written after the last node
// runs a kvs that applies it.

// levelKeeper is the node's side of the cluster's level.
type levelKeeper struct {
	v      *clusterView // the meta group's
	levels group.Levels

	// mu serialises, on the meta group's leader, recording a level and
	// adding a member: a node admitted below the level about to be
	// recorded is in the configuration whose levels the record counts.
	mu sync.Mutex

	// memberLevel asks a member, at its client address, the level it
	// applies now: a node started again on an older kvs still has the
	// level its newer one published.
	memberLevel func(ctx context.Context, addr string) (int, error)
}

func newLevelKeeper(v *clusterView) *levelKeeper {
	return &levelKeeper{v: v, levels: group.Levels{Meta: v.store.Meta}, memberLevel: askLevel}
}

// askLevel is a member's apply_level in its KVS.STATUS, 0 from a kvs that
// reports none.
func askLevel(ctx context.Context, addr string) (int, error) {
	st, err := fetchStatus(ctx, addr)
	if err != nil {
		return 0, err
	}
	return int(st.uint("apply_level")), nil
}

// publishes are the writes that make the metadata hold this node's
// level, none when it does.
func (k *levelKeeper) publishes() []fsm.Command {
	name := group.NodeLevelMeta(k.v.id)
	want := strconv.Itoa(fsm.ApplyLevel)
	if cur, ok := k.v.store.Meta(name); ok && cur == want {
		return nil
	}
	return []fsm.Command{metaSet(name, want)}
}

// propose proposes cmds through p (the server, which forwards to the
// meta group's leader) once the cluster's level allows the entry they
// make; until then it returns an error wrapping group.ErrLevel and
// proposes nothing.
func (k *levelKeeper) propose(p server.Proposer, cmds []fsm.Command) ([]fsm.Reply, error) {
	if err := k.levels.Allows(fsm.Level(cmds)); err != nil {
		return nil, err
	}
	return p.Propose(cmds)
}

// admit runs add, which adds node id to the meta group, if the node's
// level is the cluster's or above; level is what the node said, -1 when
// it said nothing (a kvs from before levels, or KVS.JOIN typed by hand),
// and then the node is asked at its client address respAddr, if the
// cluster's level is above 0. admit runs on the meta group's leader, once
// the leader has applied every committed entry, so the level it checks is
// the one recorded last. add gets the node's level, -1 when it is still
// unknown.
func (k *levelKeeper) admit(ctx context.Context, id, respAddr string, level int, add func(level int) error) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := group.RaftErr(k.v.node.ReadIndex(ctx)); err != nil {
		return err
	}
	if level < 0 && k.levels.Cluster() > 0 {
		n, err := k.memberLevel(ctx, respAddr)
		if err != nil {
			return fmt.Errorf("%w: node %s did not say the level of replicated entries it applies, and asking it at %s failed: %v", group.ErrLevel, id, respAddr, err)
		}
		level = n
	}
	if err := k.levels.Admits(id, max(level, 0)); err != nil {
		return err
	}
	return add(level)
}

// errLevelWait is why record recorded nothing yet.
var errLevelWait = errors.New("the cluster's level stays")

// record, on the meta group's leader, records the lowest level the meta
// group's members have published when it is above the recorded one and
// each member confirms it applies that level now. It returns the level
// recorded, or an error wrapping errLevelWait saying why it records none
// yet.
func (k *levelKeeper) record(ctx context.Context) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	// The recorded level and the members' as the log has them: a new
	// leader's store may lag behind what it committed.
	if err := group.RaftErr(k.v.node.ReadIndex(ctx)); err != nil {
		return 0, err
	}
	members, err := k.v.Members()
	if err != nil {
		return 0, err
	}
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.ID
	}
	recorded, lowest := k.levels.Cluster(), k.levels.Lowest(ids)
	if lowest <= recorded {
		return 0, fmt.Errorf("%w at %d: the members' lowest published level is %d", errLevelWait, recorded, lowest)
	}
	for _, m := range members {
		if m.ID == k.v.id {
			continue
		}
		if m.RESPAddr == "" {
			return 0, fmt.Errorf("%w at %d: %s has no client address to ask its level", errLevelWait, recorded, m.ID)
		}
		n, err := k.memberLevel(ctx, m.RESPAddr)
		if err != nil {
			return 0, fmt.Errorf("%w at %d: asking %s its level: %v", errLevelWait, recorded, m.ID, err)
		}
		if n < lowest {
			return 0, fmt.Errorf("%w at %d: %s published level %d and runs a kvs of level %d", errLevelWait, recorded, m.ID, lowest, n)
		}
	}
	if _, err := k.v.propose([]fsm.Command{metaSet(group.ClusterLevelMeta, strconv.Itoa(lowest))}); err != nil {
		return 0, err
	}
	return lowest, nil
}

// keepLevel records the cluster's level whenever this node leads the meta
// group and the members allow a higher one, until the recorded level is
// this kvs's own (no member can take it higher than the leader's) or stop
// closes.
func keepLevel(stop <-chan struct{}, k *levelKeeper, logger *slog.Logger) {
	const interval = time.Second
	t := time.NewTicker(interval)
	defer t.Stop()
	for k.levels.Cluster() < fsm.ApplyLevel {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if !k.v.node.IsLeader() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*interval)
		level, err := k.record(ctx)
		cancel()
		switch {
		case err == nil:
			logger.Info("recorded the cluster's level: every member applies its entries", "level", level)
		case errors.Is(err, errLevelWait):
			logger.Debug("cluster level", "err", err)
		default:
			logger.Warn("recording the cluster's level", "err", err)
		}
	}
}

// recordLevels writes the cluster's level, level, into each data group
// this node leads whose store holds a lower one: the level of the
// commands the scripts running in the group may call
// (fsm.Store.SetCallLevelMeta). The meta group (0) records it itself. A
// store never goes down a level: a node whose view of the meta group lags
// writes nothing.
func recordLevels(node *group.Node, level int) error {
	if level <= 0 {
		return nil
	}
	want := strconv.Itoa(level)
	var errs []error
	for _, g := range node.Groups() {
		if g.ID() == 0 || g.Node() == nil || !g.Node().IsLeader() {
			continue
		}
		if cur, ok := g.Store().Meta(group.ClusterLevelMeta); ok {
			if n, err := strconv.Atoi(cur); err == nil && n >= level {
				continue
			}
		}
		if _, err := g.Proposer().Propose([]fsm.Command{metaSet(group.ClusterLevelMeta, want)}); err != nil {
			errs = append(errs, fmt.Errorf("group %d: %w", g.ID(), err))
		}
	}
	return errors.Join(errs...)
}
