package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
)

// A file's name lives in its directory, and is durable only once the
// directory is fsynced; neither bbolt (creating raft.db) nor raft's file
// snapshot store (creating snapshots/ and each snapshot's files) does that.
// Without it a power cut can take raft.db, or every file of the snapshot
// the log was just compacted behind, with everything acknowledged.

// mkdirDurable creates dir and any missing parents, and fsyncs the parent
// of every level it created and of dir itself (a run that created dir may
// have crashed before syncing).
func mkdirDurable(dir string) error {
	dir = filepath.Clean(dir)
	var created []string
	for p := dir; ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		created = append(created, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if len(created) == 0 {
		created = []string{dir}
	}
	for i := len(created) - 1; i >= 0; i-- { // top down
		if parent := filepath.Dir(created[i]); parent != created[i] {
			if err := syncDir(parent); err != nil {
				return err
			}
		}
	}
	return nil
}

// syncDir makes dir's entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// syncedSnapshots is raft's file snapshot store, except that a snapshot's
// own directory (holding state.bin and meta.json) is fsynced before Close
// returns. raft fsyncs the two files and, after renaming the snapshot's
// directory into place, the parent, but never the snapshot's directory
// itself, and compacts the log as soon as Close returns.
type syncedSnapshots struct {
	*raft.FileSnapshotStore
	dir string // where the store keeps snapshots: its base dir + "snapshots"
}

func (s syncedSnapshots) Create(version raft.SnapshotVersion, index, term uint64,
	configuration raft.Configuration, configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	return &syncedSink{SnapshotSink: sink, dir: s.dir}, nil
}

type syncedSink struct {
	raft.SnapshotSink
	dir string
}

// Close finishes the snapshot as raft does, then makes its files' names
// durable.
func (s *syncedSink) Close() error {
	if err := s.SnapshotSink.Close(); err != nil {
		return err
	}
	return syncDir(filepath.Join(s.dir, s.ID()))
}

// retainingLogs is the log store raft is given. Its DeleteRange keeps, when
// raft compacts the log behind a new snapshot, every entry after the older
// of the two snapshots the file store retains: if the newest snapshot is
// found damaged at start, raft falls back to the older one (CheckState
// makes sure it may), and replaying the log from there loses nothing.
// raft alone trims to TrailingLogs behind the newest snapshot, which may be
// well past the older one.
//
// raft calls DeleteRange for two things: compaction, from the first index
// up to below the last (kvs never runs with TrailingLogs 0), and removing a
// follower's conflicting suffix, which ends at the last index. Only the
// first is held back.
type retainingLogs struct {
	raft.LogStore
	snaps *raft.FileSnapshotStore
}

func (r retainingLogs) DeleteRange(min, max uint64) error {
	first, err := r.FirstIndex()
	if err != nil {
		return err
	}
	last, err := r.LastIndex()
	if err != nil {
		return err
	}
	if min <= first && max < last {
		metas, err := r.snaps.List() // newest first, the retained ones
		if err != nil {
			return err
		}
		keep := uint64(0) // with one snapshot, the whole log is its fallback
		if len(metas) >= 2 {
			keep = metas[1].Index
		}
		if max > keep {
			max = keep
		}
		if max < min {
			return nil
		}
	}
	return r.LogStore.DeleteRange(min, max)
}
