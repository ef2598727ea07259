package main

import (
	"fmt"
	"os"
	"time"

	"kvs/fsm"
	"kvs/rdb"
)

// `kvs restore --rdb FILE --data-dir DIR` reads a Redis RDB file whole
// into a store of its own (package rdb: the framing and checksum, every
// value through RESTORE's codec and checks) and only then seeds DIR with
// it, as a backup seeds it: a damaged file writes nothing. Keys whose
// deadline has passed are left out, as redis-server leaves them out when
// it loads the file. Each key goes into its database (the file's
// SELECTDB); a file with keys in a database beyond --databases is refused,
// as redis-server refuses it ("Data file was created with a Redis server
// configured to handle more than N databases").

// restoreRDB loads file and seeds f.dataDir; it returns what it loaded.
func restoreRDB(file string, f restoreFlags) (*rdb.Stats, error) {
	fd, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	store := fsm.NewStore()
	st, err := rdb.Load(fd, store, rdb.LoadOptions{Now: time.Now().UnixMilli(), Databases: f.databases, SkipOtherDBs: f.skipOtherDBs})
	if err != nil {
		return nil, fmt.Errorf("%s: %w; nothing was written", file, err)
	}
	if _, err := seedParts([]backupPart{{0, store}}, f); err != nil {
		return nil, err
	}
	return st, nil
}

// rdbWriter is ", written by Redis 7.0.15", from the file's redis-ver.
func rdbWriter(st *rdb.Stats) string {
	if v := st.Aux["redis-ver"]; v != "" {
		return ", written by Redis " + v
	}
	return ""
}
