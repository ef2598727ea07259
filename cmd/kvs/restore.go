package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"kvs/backup"
	"kvs/cluster"
	"kvs/fsm"
	"kvs/group"
	"kvs/server"
	"kvs/wal"
)

// `kvs restore FILE --data-dir DIR [--node-id ID --raft-addr ADDR]` checks
// a backup whole before it writes anything: the file's header, length and
// checksum, then the fsm snapshot inside, decoded into a store (the
// snapshot's own checksum and orders). Only then does it seed DIR, which
// must be empty: with a wal snapshot for durable mode, or, with --node-id
// and --raft-addr, with a raft snapshot of a one-node cluster of that node.

type restoreFlags struct {
	rdb          bool // FILE is a Redis RDB file (--rdb FILE)
	skipOtherDBs bool
	databases    int // with --rdb: the --databases the store will be served with
	dataDir      string
	nodeID       string
	raftAddr     string
	replicas     int // of a backup of several groups
}

func restoreCmd(args []string, stdout, stderr io.Writer) int {
	var f restoreFlags
	fs := flag.NewFlagSet("kvs restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var rdbFile string
	fs.StringVar(&rdbFile, "rdb", "", "restore from the Redis RDB `file` FILE (redis-server's dump.rdb, versions 1 to 11) instead of a kvs backup")
	fs.BoolVar(&f.skipOtherDBs, "skip-other-dbs", false, "with --rdb: leave out the keys of databases other than 0 (for a cluster that will have several groups, which has database 0 alone)")
	fs.IntVar(&f.databases, "databases", server.DefaultDatabases, "with --rdb: the --databases kvs will be served with; a file with keys in a database beyond them is refused, as redis-server refuses it")
	fs.StringVar(&f.dataDir, "data-dir", "", "the empty data dir to seed (required)")
	fs.StringVar(&f.nodeID, "node-id", "", "cluster mode: the id of the node to seed as a new one-node cluster (with --raft-addr)")
	fs.StringVar(&f.raftAddr, "raft-addr", "", "cluster mode: the Raft address that node will serve on (with --node-id)")
	fs.IntVar(&f.replicas, "replicas", defaultReplicas, "cluster mode, for a backup of several groups: the number of nodes the new cluster places a replica of each group on (0: every node), as kvs serve --replicas")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: kvs restore FILE --data-dir DIR [--node-id ID --raft-addr HOST:PORT]\n"+
			"       kvs restore --rdb FILE --data-dir DIR [--databases N] [--skip-other-dbs] [--node-id ID --raft-addr HOST:PORT]\n\n"+
			"Verifies the backup FILE (or Redis RDB file) and seeds the empty DIR with its data: for durable mode\n"+
			"(kvs serve --data-dir DIR), or with --node-id and --raft-addr as the only member of a\n"+
			"new cluster (kvs serve --data-dir DIR --node-id ID --raft-addr HOST:PORT; others join it).\n")
		fs.PrintDefaults()
	}
	// FILE may come before or after the flags.
	var file string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		file, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if rdbFile != "" {
		if file != "" || fs.NArg() != 0 {
			fs.Usage()
			return 2
		}
		file, f.rdb = rdbFile, true
	} else if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if fs.NArg() != 0 || file == "" {
		fs.Usage()
		return 2
	}
	if err := f.validate(); err != nil {
		fmt.Fprintf(stderr, "kvs restore: %v\n", err)
		return 2
	}
	what := "durable mode (kvs serve --data-dir " + f.dataDir + ")"
	if f.nodeID != "" {
		what = fmt.Sprintf("a one-node cluster of %s at %s (kvs serve --data-dir %s --node-id %s --raft-addr %s; then kvs join the others)",
			f.nodeID, f.raftAddr, f.dataDir, f.nodeID, f.raftAddr)
	}
	if f.rdb {
		st, err := restoreRDB(file, f)
		if err != nil {
			fmt.Fprintf(stderr, "kvs restore: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "restored %s from %s (RDB version %d%s) into %s for %s\n",
			st, file, st.Version, rdbWriter(st), f.dataDir, what)
		return 0
	}
	h, keys, err := restore(file, f)
	if err != nil {
		fmt.Fprintf(stderr, "kvs restore: %v\n", err)
		return 1
	}
	if f.nodeID != "" && h.Flags&backup.FlagGroups != 0 {
		what += ", with every group at its own index"
	}
	fmt.Fprintf(stdout, "restored %d keys from %s (a %s backup at index %d) into %s for %s\n", keys, file, h.Mode, h.Index, f.dataDir, what)
	if h.Flags&backup.FlagUnsynced != 0 {
		fmt.Fprintf(stdout, "warning: the backup is of a follower that could not reach a leader; it may miss recent writes\n")
	}
	return 0
}

func (f restoreFlags) validate() error {
	switch {
	case f.dataDir == "":
		return errors.New("--data-dir is required")
	case (f.nodeID == "") != (f.raftAddr == ""):
		return errors.New("a cluster restore needs both --node-id and --raft-addr")
	case f.skipOtherDBs && !f.rdb:
		return errors.New("--skip-other-dbs is for an RDB file (--rdb)")
	case f.databases != server.DefaultDatabases && !f.rdb:
		return errors.New("--databases is for an RDB file (--rdb)")
	case f.databases < 1 || f.databases > fsm.MaxDB+1:
		return fmt.Errorf("--databases %d: want 1 to %d", f.databases, fsm.MaxDB+1)
	case f.replicas < 0:
		return fmt.Errorf("--replicas %d: want 0 (every node) or more", f.replicas)
	}
	return nil
}

// restore verifies file and seeds f.dataDir; it returns the backup's header
// and the number of keys restored.
func restore(file string, f restoreFlags) (backup.Header, int, error) {
	parts, h, err := loadBackup(file)
	if err != nil {
		return h, 0, err
	}
	if len(parts) > 1 && f.nodeID == "" {
		return h, 0, fmt.Errorf("%s is a backup of a cluster of %d groups: it restores as a cluster (--node-id and --raft-addr)", file, len(parts))
	}
	keys, err := seedParts(parts, f)
	return h, keys, err
}

// seedParts seeds f.dataDir, which must be empty, with the stores decoded
// from a backup (or an RDB file); it returns the number of keys.
func seedParts(parts []backupPart, f restoreFlags) (int, error) {
	if err := checkEmpty(f.dataDir); err != nil {
		return 0, err
	}
	lock, err := lockDataDir(f.dataDir)
	if err != nil {
		return 0, err
	}
	defer lock.release()
	if err := checkEmpty(f.dataDir); err != nil { // again, now that it is ours
		return 0, err
	}
	if len(parts) > 1 {
		// The group count first: a node that finds group dirs without it
		// would take the data dir for a cluster of one group.
		if err := writeGroups(f.dataDir, shape{groups: madeGroups(parts), replicas: f.replicas}); err != nil {
			return 0, fmt.Errorf("seeding %s: %w", f.dataDir, err)
		}
	}
	keys := 0
	for _, p := range parts {
		snap := p.store.Snapshot()
		keys += snap.Len()
		write := func(w io.Writer) error {
			defer snap.Release()
			_, err := snap.WriteTo(w)
			return err
		}
		if f.nodeID == "" {
			err = wal.Seed(nil, f.dataDir, snap.Index(), write)
		} else {
			// Raft counts from 1; a memory-mode backup's index is 0.
			quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			err = cluster.Seed(cluster.Config{NodeID: f.nodeID, RaftAddr: f.raftAddr, Dir: group.GroupDir(f.dataDir, p.id), Logger: quiet},
				max(snap.Index(), 1), write)
		}
		if err != nil {
			return 0, fmt.Errorf("seeding %s: %w", f.dataDir, err)
		}
	}
	return keys, nil
}

// madeGroups is the number of data groups the backed-up cluster was made
// with: as its meta group lists them once groups were added or removed
// (group.GroupSet's Made), else every data group of the backup.
func madeGroups(parts []backupPart) int {
	if v, ok := parts[0].store.Meta(group.GroupSetMeta); ok {
		if set, err := group.ParseGroupSet(v); err == nil && set.Made > 0 {
			return set.Made
		}
	}
	return dataGroups(len(parts))
}

// backupPart is one group's store decoded from a backup.
type backupPart struct {
	id    uint32
	store *fsm.Store
}

// loadBackup verifies the backup file and decodes the snapshots in it: one,
// or one per group of a backup of several (backup.FlagGroups).
func loadBackup(file string) ([]backupPart, backup.Header, error) {
	fd, err := os.Open(file)
	if err != nil {
		return nil, backup.Header{}, err
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, backup.Header{}, err
	}
	h, off, n, err := backup.Verify(fd, st.Size())
	if err != nil {
		return nil, h, fmt.Errorf("%s: %w; nothing was written", file, err)
	}
	if _, err := fd.Seek(off, io.SeekStart); err != nil {
		return nil, h, err
	}
	body := bufio.NewReaderSize(io.LimitReader(fd, n), 1<<20)
	if h.Flags&backup.FlagGroups == 0 {
		store := fsm.NewStore()
		if _, err := store.Restore(body); err != nil {
			return nil, h, fmt.Errorf("%s: the snapshot inside (from offset %d) does not decode: %w; nothing was written", file, off, err)
		}
		return []backupPart{{0, store}}, h, nil
	}
	var parts []backupPart
	err = backup.ReadParts(body, func(id uint32, index uint64, snap io.Reader) error {
		// Ids in order from 0; a cluster whose groups were removed has
		// gaps (kvs groups remove).
		if len(parts) == 0 && id != 0 || len(parts) > 0 && id <= parts[len(parts)-1].id {
			return fmt.Errorf("%w: group %d's part out of order", backup.ErrCorrupt, id)
		}
		store := fsm.NewStore()
		if _, err := store.Restore(bufio.NewReader(snap)); err != nil {
			return fmt.Errorf("group %d's snapshot does not decode: %w", id, err)
		}
		parts = append(parts, backupPart{id, store})
		return nil
	})
	if err == nil && len(parts) < 2 {
		err = fmt.Errorf("%w: %d groups in a backup of several", backup.ErrCorrupt, len(parts))
	}
	if err != nil {
		return nil, h, fmt.Errorf("%s: %w; nothing was written", file, err)
	}
	return parts, h, nil
}

// checkEmpty refuses a data dir that holds anything (a LOCK file left by a
// kvs that never wrote data excepted).
func checkEmpty(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != lockName {
			return fmt.Errorf("data dir %s is not empty (it holds %s): restore only into a new, empty directory", dir, e.Name())
		}
	}
	return nil
}
