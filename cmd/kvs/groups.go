package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"kvs/group"
	"kvs/server"
)

// A cluster's slots are spread over its data groups (--groups N at
// --bootstrap). With more than one, group 0 is the meta group, which holds
// what the whole cluster shares (members and their addresses, ACL users,
// functions) and no slots, and the data groups are 1..N; a cluster of one
// group keeps everything in group 0, as before groups. Every node holds a
// replica of every group. The count is fixed when
// the cluster is made: each node keeps it in DIR/group-count, written before it
// opens its groups, and reads it back at every start. A node started with
// --join asks the member it joins through; one added by `kvs join` is
// started with the cluster's --groups, which the join checks. A data dir
// from before groups, or of a cluster of one group, has no file: one group.

// groupsFile is where a node keeps its cluster's group count.
func groupsFile(dataDir string) string { return filepath.Join(dataDir, "group-count") }

// resolveGroups returns the number of groups of the cluster this node is
// in or is about to join, and writes it down when it is new. stop ends the
// wait for a --join member's answer.
func resolveGroups(f serveFlags, stop <-chan os.Signal, logger *slog.Logger) (int, error) {
	if n, ok, err := readGroups(f.dataDir); err != nil {
		return 0, err
	} else if ok {
		if f.groups != 0 && f.groups != n {
			return 0, fmt.Errorf("--groups %d: the data dir's cluster has %d groups, fixed when it was made", f.groups, n)
		}
		return n, nil
	}
	stored, err := group.StoredGroups(f.dataDir)
	if err != nil {
		return 0, err
	}
	if len(stored) > 0 {
		// Cluster state from before groups, or of one group.
		if f.groups > 1 {
			return 0, fmt.Errorf("--groups %d: the data dir holds a cluster of one group", f.groups)
		}
		return 1, nil
	}
	n := max(1, f.groups)
	if f.join != "" && f.groups == 0 {
		if n, err = askGroups(f.join, stop, logger); err != nil {
			return 0, err
		}
	}
	if n > 1 {
		if err := writeGroups(f.dataDir, n); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// askGroups asks the member at addr how many groups its cluster has,
// retrying until it answers or a signal comes.
func askGroups(addr string, stop <-chan os.Signal, logger *slog.Logger) (int, error) {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		st, err := fetchStatus(ctx, addr)
		cancel()
		if err == nil {
			return dataGroups(st.groupCount()), nil
		}
		logger.Warn("asking the cluster its group count failed; retrying", "via", addr, "err", err, "in", wait)
		select {
		case s := <-stop:
			return 0, fmt.Errorf("stopped by %s while asking %s for the cluster's group count", s, addr)
		case <-time.After(wait):
		}
	}
}

func readGroups(dataDir string) (int, bool, error) {
	b, err := os.ReadFile(groupsFile(dataDir))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 1 || n > group.MaxGroups {
		return 0, false, fmt.Errorf("%s: not a group count: %q", groupsFile(dataDir), b)
	}
	return n, true, nil
}

// writeGroups writes the count durably: a temporary file, fsynced, renamed
// over, and the directory fsynced.
func writeGroups(dataDir string, n int) error {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	path := groupsFile(dataDir)
	tmp := path + ".tmp"
	fh, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(fh, "%d\n", n); err != nil {
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

// slotTable is the slot map of n data groups (group.EvenSlots) as the
// server takes it: slot -> Raft group, the data groups being 1..n when
// there are several.
func slotTable(n int) ([]uint16, error) {
	slots, err := group.EvenSlots(n)
	if err != nil {
		return nil, err
	}
	out := make([]uint16, len(slots))
	for i, g := range slots {
		out[i] = uint16(g)
		if n > 1 {
			out[i]++
		}
	}
	return out, nil
}

// groupsSaver saves every group of the node (SAVE, BGSAVE).
type groupsSaver []*group.Group

func (gs groupsSaver) Save() error {
	var errs []error
	for _, g := range gs {
		if err := g.Save(); err != nil {
			errs = append(errs, fmt.Errorf("group %d: %w", g.ID(), err))
		}
	}
	return errors.Join(errs...)
}

// tendGroups runs the node's placement and leadership spreading every
// interval until stop closes: each group follows group 0's membership
// (group.Node.Reconcile), and nodes lead about as many groups as each
// other (SpreadLeaders).
func tendGroups(stop <-chan struct{}, node *group.Node, logger *slog.Logger) {
	const interval = 2 * time.Second
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if err := node.Reconcile(); err != nil {
			logger.Warn("group placement", "err", err)
		}
		for _, h := range node.SpreadLeaders() {
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

// groupViews are the server's windows on a node's groups: group 0's is
// meta, and each other group's is its raft, with client addresses from
// group 0's metadata. views are all of them, for the client address set
// once the server listens.
func groupViews(groups []*group.Group, meta *clusterView) (out []server.Group, views []*clusterView) {
	for _, g := range groups {
		v := meta
		if g.ID() != 0 {
			v = &clusterView{node: g.Node(), store: meta.store, id: meta.id, raftAddr: meta.raftAddr, propose: meta.propose}
		}
		views = append(views, v)
		out = append(out, server.Group{Store: g.Store(), Proposer: g.Proposer(), Raft: v})
	}
	return out, views
}
