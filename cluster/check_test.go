package cluster

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

func testSnapshotStore(t *testing.T, dir string) *raft.FileSnapshotStore {
	t.Helper()
	s, err := raft.NewFileSnapshotStoreWithLogger(dir, retainSnapshots, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func takeSnapshot(t *testing.T, s *raft.FileSnapshotStore, index uint64) string {
	t.Helper()
	sink, err := s.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(sink, strings.Repeat("state ", 100))
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return sink.ID()
}

func storeLogs(t *testing.T, logs raft.LogStore, first, last uint64) {
	t.Helper()
	for i := first; i <= last; i++ {
		if err := logs.StoreLog(&raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: seal([]byte("x"))}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRetainingLogs: compaction behind a new snapshot keeps the log after
// the older retained snapshot; deleting a conflicting suffix is untouched.
func TestRetainingLogs(t *testing.T) {
	snaps := testSnapshotStore(t, t.TempDir())
	logs := retainingLogs{LogStore: raft.NewInmemStore(), snaps: snaps}
	storeLogs(t, logs, 1, 100)

	takeSnapshot(t, snaps, 40)
	if err := logs.DeleteRange(1, 30); err != nil { // one snapshot: its fallback is the whole log
		t.Fatal(err)
	}
	if first, _ := logs.FirstIndex(); first != 1 {
		t.Fatalf("first index %d after compaction behind the only snapshot, want 1", first)
	}
	takeSnapshot(t, snaps, 80)
	if err := logs.DeleteRange(1, 70); err != nil { // raft trims to TrailingLogs
		t.Fatal(err)
	}
	if first, _ := logs.FirstIndex(); first != 41 {
		t.Fatalf("first index %d, want 41: the log after the older snapshot (40) stays", first)
	}
	if err := logs.DeleteRange(90, 100); err != nil { // a conflicting suffix
		t.Fatal(err)
	}
	if last, _ := logs.LastIndex(); last != 89 {
		t.Fatalf("last index %d after deleting a suffix, want 89", last)
	}
}

// TestCheckSnapshotsFallBack: a damaged newest snapshot is set aside when
// the log covers the older one onward, and is an error naming it when not.
func TestCheckSnapshotsFallBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		runs []logRun
		ok   bool
	}{
		{"log after the older snapshot", []logRun{{41, 100}}, true},
		{"log trimmed past it", []logRun{{61, 100}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			snaps := testSnapshotStore(t, dir)
			takeSnapshot(t, snaps, 40)
			id := takeSnapshot(t, snaps, 80)
			state := filepath.Join(dir, "snapshots", id, "state.bin")
			b, _ := os.ReadFile(state)
			b[10] ^= 1
			os.WriteFile(state, b, 0o644)

			err := checkSnapshots(dir, tc.runs, discardLogger())
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(filepath.Join(dir, brokenSnapshotsDir, id)); err != nil {
					t.Fatalf("damaged snapshot not set aside: %v", err)
				}
				if metas, _ := snaps.List(); len(metas) != 1 || metas[0].Index != 40 {
					t.Fatalf("snapshots left: %v", metas)
				}
				return
			}
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), state) || !strings.Contains(err.Error(), "41..80") {
				t.Fatalf("checkSnapshots = %v, want ErrDamaged naming %s and entries 41..80", err, state)
			}
		})
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
