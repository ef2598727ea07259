package cluster

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"kvs/cluster/raftlog"
)

// ErrDamaged is wrapped by every error about this node's raft state being
// damaged on disk (raft.db, a snapshot); the wrapping error names the file
// and what is wrong with it, and says what to do.
var ErrDamaged = errors.New("cluster: raft state is damaged")

// rejoinHint is what to do about damaged state: a member's state can always
// be had again from the others.
const rejoinHint = "move this node's data dir aside and add the node to the cluster again (kvs join; kvs serve --repair --repair-allow-empty does both) to recover its state from the others"

// damaged returns an ErrDamaged error naming file and what is wrong.
func damaged(file, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s; %s", ErrDamaged, file, fmt.Sprintf(format, args...), rejoinHint)
}

// brokenSnapshotsDir is where Open moves a damaged snapshot it falls back
// from: out of snapshots/, so raft never tries it, and kept for inspection.
const brokenSnapshotsDir = "snapshots.broken"

// CheckState checks the raft state in dir before raft is given it: bolt's
// own structure and every log entry in raft.db (decodable, at its key's
// index, its seal intact), and every snapshot (meta.json readable and
// consistent with its directory's name, state.bin of the recorded size and
// checksum). A damaged newest snapshot is moved to snapshots.broken/ when
// the log still holds every entry from the older snapshot on through the
// damaged one's index, so falling back loses nothing; otherwise it is an
// error. Errors wrap ErrDamaged. A missing dir is fine.
func CheckState(dir string, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.Default()
	}
	runs, err := checkBolt(filepath.Join(dir, boltFile))
	if err != nil {
		return err
	}
	more, err := checkRaftlog(filepath.Join(dir, logDir))
	if err != nil {
		return err
	}
	return checkSnapshots(dir, append(runs, more...), logger)
}

// checkRaftlog opens the log in dir (which cuts a torn tail off) and
// checks every entry's seal; it returns the run of entries it holds.
func checkRaftlog(dir string) ([]logRun, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	l, err := raftlog.Open(raftlog.Options{Dir: dir})
	if errors.Is(err, raftlog.ErrCorrupt) {
		return nil, damaged(dir, "%v", err)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	defer l.Close()
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	if last == 0 {
		return nil, nil
	}
	for i := first; i <= last; i++ {
		var e raft.Log
		if err := l.GetLog(i, &e); err != nil {
			return nil, damaged(dir, "raft log entry %d: %v", i, err)
		}
		if e.Type == raft.LogCommand {
			if _, ok := unsealEntry(e.Data); !ok {
				return nil, damaged(dir, "raft log entry %d is corrupt: CRC-32C mismatch", i)
			}
		}
	}
	return []logRun{{first, last}}, nil
}

// logRun is a stretch of consecutive entries in raft.db. After a follower
// installs a snapshot from the leader its log may hold two.
type logRun struct{ first, last uint64 }

// covers reports whether one run holds every entry in first..last.
func coversAll(runs []logRun, first, last uint64) bool {
	if first > last {
		return true
	}
	for _, r := range runs {
		if r.first <= first && last <= r.last {
			return true
		}
	}
	return false
}

var boltLogsBucket = []byte("logs") // raft-boltdb's bucket of log entries

// checkBolt opens raft.db read-only and checks it; it returns the runs of
// log entries it holds. bolt checks only its meta pages on open, and may
// panic on a damaged page, so the walk recovers.
func checkBolt(path string) (runs []logRun, err error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: boltOpenTimeout})
	if errors.Is(err, bbolt.ErrTimeout) {
		return nil, fmt.Errorf("cluster: %s is in use by another process", path)
	}
	if err != nil {
		return nil, damaged(path, "cannot be opened: %v", err)
	}
	defer db.Close()
	defer func() {
		if p := recover(); p != nil {
			err = damaged(path, "reading it failed: %v", p)
		}
	}()
	err = db.View(func(tx *bbolt.Tx) error {
		// Check's goroutine reads pages until it closes the channel:
		// drain it before the transaction ends.
		var first error
		for cerr := range tx.Check() {
			if first == nil {
				first = cerr
			}
		}
		if first != nil {
			return damaged(path, "bolt's consistency check failed: %v", first)
		}
		b := tx.Bucket(boltLogsBucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if len(k) != 8 {
				return damaged(path, "a log key of %d bytes", len(k))
			}
			index := binary.BigEndian.Uint64(k)
			if err := checkEntry(index, v); err != nil {
				return damaged(path, "raft log entry %d is corrupt: %v", index, err)
			}
			if n := len(runs); n > 0 && runs[n-1].last+1 == index {
				runs[n-1].last = index
			} else {
				runs = append(runs, logRun{index, index})
			}
			return nil
		})
	})
	return runs, err
}

// checkEntry decodes one stored entry as raft-boltdb does and checks it.
func checkEntry(index uint64, v []byte) error {
	var l raft.Log
	if err := codec.NewDecoder(bytes.NewReader(v), &codec.MsgpackHandle{}).Decode(&l); err != nil {
		return fmt.Errorf("does not decode: %v", err)
	}
	if l.Index != index {
		return fmt.Errorf("holds index %d", l.Index)
	}
	if l.Type == raft.LogCommand {
		if _, ok := unsealEntry(l.Data); !ok {
			return errors.New("CRC-32C mismatch")
		}
	}
	return nil
}

// snapshotMeta is the part of raft's meta.json that is checked.
type snapshotMeta struct {
	ID    string
	Index uint64
	Term  uint64
	Size  int64
	CRC   []byte
}

// snapshotInfo is one snapshot directory and what checking it found.
type snapshotInfo struct {
	dir  string
	meta snapshotMeta
	err  error // nil: usable
}

// checkSnapshots checks every snapshot and handles a damaged newest one
// (see CheckState).
func checkSnapshots(dir string, runs []logRun, logger *slog.Logger) error {
	base := filepath.Join(dir, "snapshots")
	entries, err := os.ReadDir(base)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	var snaps []snapshotInfo
	for _, e := range entries {
		if !e.IsDir() || isTempSnapshot(e.Name()) {
			continue
		}
		s := snapshotInfo{dir: filepath.Join(base, e.Name())}
		s.meta, s.err = checkSnapshot(s.dir, e.Name())
		snaps = append(snaps, s)
	}
	// Newest first, as raft orders them (term, index, then ID); a damaged
	// meta.json is ordered by its directory name, which raft's IDs
	// (term-index-time) spell the same way.
	sort.Slice(snaps, func(i, j int) bool { return snapNewer(snaps[i], snaps[j]) })
	var bad []snapshotInfo
	for len(snaps) > 0 && snaps[0].err != nil {
		bad, snaps = append(bad, snaps[0]), snaps[1:]
	}
	for _, s := range snaps {
		if s.err != nil {
			logger.Warn("an older raft snapshot is damaged; it is not needed while a newer one is good", "dir", s.dir, "err", s.err)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	var from uint64 // the log must hold from..upTo for the fallback
	fellBackTo := "no snapshot (the log from its start)"
	if len(snaps) > 0 {
		from, fellBackTo = snaps[0].meta.Index+1, snaps[0].dir
	} else {
		from = 1
	}
	upTo := bad[0].meta.Index
	if upTo == 0 {
		upTo = idIndex(filepath.Base(bad[0].dir))
	}
	if !coversAll(runs, from, upTo) {
		return fmt.Errorf("%w (falling back to %s would need raft log entries %d..%d, which %s does not hold)",
			bad[0].err, fellBackTo, from, upTo, filepath.Join(dir, boltFile))
	}
	for _, s := range bad {
		logger.Error("raft snapshot is damaged; falling back to the one before it and the log after it, which lose nothing",
			"dir", s.dir, "err", s.err, "fallback", fellBackTo)
		if err := setAside(dir, s.dir); err != nil {
			return err
		}
	}
	return nil
}

// snapNewer orders snapshots as raft does: term, index, ID.
func snapNewer(a, b snapshotInfo) bool {
	at, ai := a.meta.Term, a.meta.Index
	bt, bi := b.meta.Term, b.meta.Index
	if a.err != nil {
		at, ai = idTerm(filepath.Base(a.dir)), idIndex(filepath.Base(a.dir))
	}
	if b.err != nil {
		bt, bi = idTerm(filepath.Base(b.dir)), idIndex(filepath.Base(b.dir))
	}
	if at != bt {
		return at > bt
	}
	if ai != bi {
		return ai > bi
	}
	return filepath.Base(a.dir) > filepath.Base(b.dir)
}

// idPart returns the i'th number of a raft snapshot ID, term-index-msec.
func idPart(id string, i int) uint64 {
	parts := strings.Split(id, "-")
	if len(parts) != 3 {
		return 0
	}
	n, _ := strconv.ParseUint(parts[i], 10, 64)
	return n
}

func idTerm(id string) uint64  { return idPart(id, 0) }
func idIndex(id string) uint64 { return idPart(id, 1) }

// checkSnapshot checks one snapshot directory named name.
func checkSnapshot(dir, name string) (snapshotMeta, error) {
	metaPath := filepath.Join(dir, "meta.json")
	var m snapshotMeta
	b, err := os.ReadFile(metaPath)
	if err != nil {
		return m, damaged(metaPath, "cannot be read: %v", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, damaged(metaPath, "does not parse: %v", err)
	}
	if m.ID != name || idTerm(name) != m.Term || idIndex(name) != m.Index {
		return m, damaged(metaPath, "names snapshot %q at term %d, index %d, but its directory is %q", m.ID, m.Term, m.Index, name)
	}
	statePath := filepath.Join(dir, "state.bin")
	f, err := os.Open(statePath)
	if err != nil {
		return m, damaged(statePath, "cannot be opened: %v", err)
	}
	defer f.Close()
	h := crc64.New(crc64.MakeTable(crc64.ECMA))
	n, err := io.Copy(h, f)
	if err != nil {
		return m, damaged(statePath, "cannot be read: %v", err)
	}
	if n != m.Size {
		return m, damaged(statePath, "holds %d bytes, meta.json says %d", n, m.Size)
	}
	if !bytes.Equal(h.Sum(nil), m.CRC) {
		return m, damaged(statePath, "CRC-64 mismatch over its %d bytes (or meta.json's checksum is damaged)", n)
	}
	return m, nil
}

// setAside moves a snapshot directory to dir/snapshots.broken/.
func setAside(dir, snap string) error {
	to := filepath.Join(dir, brokenSnapshotsDir)
	if err := mkdirDurable(to); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	dst := filepath.Join(to, filepath.Base(snap))
	for i := 1; ; i++ {
		if _, err := os.Stat(dst); errors.Is(err, os.ErrNotExist) {
			break
		}
		dst = filepath.Join(to, fmt.Sprintf("%s.%d", filepath.Base(snap), i))
	}
	if err := os.Rename(snap, dst); err != nil {
		return fmt.Errorf("cluster: set damaged snapshot aside: %w", err)
	}
	if err := syncDir(filepath.Dir(snap)); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return syncDir(to)
}
