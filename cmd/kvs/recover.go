package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"kvs/cluster"
	"kvs/fsm"
	"kvs/group"
	"kvs/server"
)

// `kvs recover --data-dir DIR --node-id ID [--raft-addr ADDR] [--group K]`
// turns a stopped cluster node into the only member of its cluster, or of
// each of its groups (see cluster.Recover and docs/cluster.md's runbook).
//
// Each group's log is applied to a store as it was when the entries were
// first applied: with the script parser installed, so that the scripts
// and functions in it run their calls again, and on a node of several
// groups with the slot map, so that a script refuses the keys of other
// groups as it did. Without it every redis.call of a replayed script would
// fail, and the recovered snapshot would lack what the scripts wrote.

func recoverCmd(args []string, stdout, stderr io.Writer) int {
	var dataDir, nodeID, raftAddr string
	only := -1
	databases := server.DefaultDatabases
	fs := flag.NewFlagSet("kvs recover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&dataDir, "data-dir", "", "the stopped node's data dir (required)")
	fs.StringVar(&nodeID, "node-id", "", "the node's id, as it was started with (required)")
	fs.StringVar(&raftAddr, "raft-addr", "", "the Raft address the node will serve on (default: its address in the configuration it holds)")
	fs.IntVar(&databases, "databases", server.DefaultDatabases, "the --databases the node ran with: the databases the scripts its log replays may SELECT")
	fs.IntVar(&only, "group", -1, "in a cluster of several groups: recover this group only (0 is the meta group); default: every group the node holds a replica of")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: kvs recover --data-dir DIR --node-id ID [--raft-addr HOST:PORT] [--group K]\n\n"+
			"Lost-quorum recovery: makes the stopped node whose state is in DIR the only member\n"+
			"of its cluster (of each group it holds, or of group K), keeping every write in its\n"+
			"log. Run it on ONE survivor only, once the other nodes are gone for good; then\n"+
			"start it and join fresh nodes to it.\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if fs.NArg() != 0 || dataDir == "" || nodeID == "" || only < -1 || databases < 1 || databases > fsm.MaxDB+1 {
		fs.Usage()
		return 2
	}
	lock, err := lockDataDir(dataDir)
	if err != nil {
		fmt.Fprintf(stderr, "kvs recover: %v\n", err)
		return 1
	}
	defer lock.release()
	targets, groups, slots, err := recoverTargets(dataDir, only)
	if err != nil {
		fmt.Fprintf(stderr, "kvs recover: %v\n", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	gs := make([]server.Group, groups)
	for i := range gs {
		gs[i].Store = fsm.NewStore()
	}
	pc := server.Config{Store: gs[0].Store, Databases: databases}
	if slots != nil {
		pc.Groups, pc.Slots = gs, slots
	}
	server.InstallScriptParser(pc)
	for _, id := range targets {
		store := gs[id].Store
		if only < 0 && slots != nil {
			// A replica opened for its leader to fill, which never got
			// an entry, has nothing to keep.
			if has, err := cluster.HasState(group.GroupDir(dataDir, id)); err == nil && !has {
				fmt.Fprintf(stdout, "group %d on %s: no raft state, nothing to recover\n", id, nodeID)
				continue
			}
		}
		res, err := cluster.Recover(cluster.Config{
			NodeID: nodeID, RaftAddr: raftAddr, Dir: group.GroupDir(dataDir, id),
			FSM: fsm.NewRaftFSM(store), Logger: logger,
		})
		what := nodeID
		if slots != nil {
			what = fmt.Sprintf("group %d on %s", id, nodeID)
		}
		if err != nil {
			if errors.Is(err, cluster.ErrDamaged) {
				err = fmt.Errorf("%w (recover a damaged node from a backup instead: kvs restore)", err)
			}
			fmt.Fprintf(stderr, "kvs recover: %s: %v\n", what, err)
			return 1
		}
		var old []string
		for _, m := range res.Old {
			old = append(old, m.ID+"@"+m.RaftAddr)
		}
		fmt.Fprintf(stdout, "recovered %s: it was one of %d members (%s) and is now the only one, at %s, holding %d keys\n",
			what, len(res.Old), strings.Join(old, ", "), res.RaftAddr, store.Stats(0).Keys)
		raftAddr = res.RaftAddr // every group of a node is at its one Raft address
	}
	fmt.Fprintf(stdout, "next: kvs serve --data-dir %s --node-id %s --raft-addr %s ..., then join fresh nodes (new ids, empty data dirs) to it\n",
		dataDir, nodeID, raftAddr)
	return 0
}

// recoverTargets returns the groups kvs recover recovers in dataDir (only,
// or with only -1 every group the data dir holds), the number of Raft
// groups of the node's cluster, and the slot map of a cluster of several
// groups (nil for one).
func recoverTargets(dataDir string, only int) ([]uint32, int, []uint16, error) {
	sh, ok, err := readGroups(dataDir)
	if err != nil {
		return nil, 0, nil, err
	}
	if !ok || sh.groups <= 1 {
		if only > 0 {
			return nil, 0, nil, fmt.Errorf("--group %d: the node's cluster has one group (0)", only)
		}
		return []uint32{0}, 1, nil, nil
	}
	slots, err := slotTable(sh.groups)
	if err != nil {
		return nil, 0, nil, err
	}
	stored, err := group.StoredGroups(dataDir)
	if err != nil {
		return nil, 0, nil, err
	}
	// Groups added while the cluster ran (kvs groups add) have ids past
	// those it was made with.
	n := raftGroups(sh.groups)
	if len(stored) > 0 {
		n = max(n, int(slices.Max(stored))+1)
	}
	if only < 0 {
		return stored, n, slots, nil
	}
	if only >= n {
		return nil, 0, nil, fmt.Errorf("--group %d: the cluster's groups are 0 (meta) to %d", only, n-1)
	}
	if !slices.Contains(stored, uint32(only)) {
		return nil, 0, nil, fmt.Errorf("--group %d: %s holds no replica of it", only, dataDir)
	}
	return []uint32{uint32(only)}, n, slots, nil
}
