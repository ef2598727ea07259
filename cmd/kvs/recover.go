package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"

	"kvs/cluster"
	"kvs/fsm"
)

// `kvs recover --data-dir DIR --node-id ID [--raft-addr ADDR]` turns a
// stopped cluster node into the only member of its cluster (see
// cluster.Recover and docs/cluster.md's runbook).

func recoverCmd(args []string, stdout, stderr io.Writer) int {
	var dataDir, nodeID, raftAddr string
	fs := flag.NewFlagSet("kvs recover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&dataDir, "data-dir", "", "the stopped node's data dir (required)")
	fs.StringVar(&nodeID, "node-id", "", "the node's id, as it was started with (required)")
	fs.StringVar(&raftAddr, "raft-addr", "", "the Raft address the node will serve on (default: its address in the configuration it holds)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: kvs recover --data-dir DIR --node-id ID [--raft-addr HOST:PORT]\n\n"+
			"Lost-quorum recovery: makes the stopped node whose state is in DIR the only member\n"+
			"of its cluster, keeping every write in its log. Run it on ONE survivor only, once\n"+
			"the other nodes are gone for good; then start it and join fresh nodes to it.\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if fs.NArg() != 0 || dataDir == "" || nodeID == "" {
		fs.Usage()
		return 2
	}
	lock, err := lockDataDir(dataDir)
	if err != nil {
		fmt.Fprintf(stderr, "kvs recover: %v\n", err)
		return 1
	}
	defer lock.release()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store := fsm.NewStore()
	res, err := cluster.Recover(cluster.Config{
		NodeID: nodeID, RaftAddr: raftAddr, Dir: filepath.Join(dataDir, "raft"),
		FSM: fsm.NewRaftFSM(store), Logger: logger,
	})
	if err != nil {
		if errors.Is(err, cluster.ErrDamaged) {
			err = fmt.Errorf("%w (recover a damaged node from a backup instead: kvs restore)", err)
		}
		fmt.Fprintf(stderr, "kvs recover: %v\n", err)
		return 1
	}
	var old []string
	for _, m := range res.Old {
		old = append(old, m.ID+"@"+m.RaftAddr)
	}
	fmt.Fprintf(stdout, "recovered %s: it was one of %d members (%s) and is now the only one, at %s, holding %d keys\n",
		nodeID, len(res.Old), strings.Join(old, ", "), res.RaftAddr, store.Stats(0).Keys)
	fmt.Fprintf(stdout, "next: kvs serve --data-dir %s --node-id %s --raft-addr %s ..., then join fresh nodes (new ids, empty data dirs) to it\n",
		dataDir, nodeID, res.RaftAddr)
	return 0
}
