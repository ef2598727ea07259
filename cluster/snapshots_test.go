package cluster

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSnapshotDue(t *testing.T) {
	c := Config{SnapshotThreshold: 100, SnapshotGrowth: 100, SnapshotMinSize: 1 << 20}
	for _, tc := range []struct {
		name                string
		applied, snapIndex  uint64
		snapSize, sinceSize int64
		growth              int
		want                bool
	}{
		{"too few entries", 150, 100, 0, 1 << 30, 100, false},
		{"entries, no snapshot yet", 100, 0, 0, 0, 100, true},
		{"entries, a small store", 300, 100, 1<<20 - 1, 10, 100, true},
		{"entries, a large store grown little", 300, 100, 10 << 20, 9 << 20, 100, false},
		{"entries, a large store grown by its size", 300, 100, 10 << 20, 10 << 20, 100, true},
		{"half its size at 50%", 300, 100, 10 << 20, 5 << 20, 50, true},
		{"the rule off", 300, 100, 10 << 20, 0, -1, true},
		{"a snapshot installed past what was applied", 50, 100, 0, 0, 100, false},
	} {
		c.SnapshotGrowth = tc.growth
		if got := snapshotDue(c, tc.applied, tc.snapIndex, tc.snapSize, tc.sinceSize); got != tc.want {
			t.Errorf("%s: snapshotDue = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSnapshotGrowth: a store whose last snapshot holds SnapshotMinSize
// bytes or more is not snapshotted again by entries alone: many small
// writes after it, far more entries than SnapshotThreshold, take no new
// snapshot through several checks; writes adding up to more than the
// snapshot's size do. Every node decides for itself, by what its FSM
// applied.
func TestSnapshotGrowth(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.SnapshotThreshold = 16
		c.TrailingLogs = 8
		c.SnapshotInterval = 20 * time.Millisecond
		c.SnapshotMinSize = 32 << 10
	})
	lead := h.cluster3()
	value := strings.Repeat("v", 1024)
	for i := range 64 {
		put(t, lead, "big"+strconv.Itoa(i), value+strconv.Itoa(i))
	}
	h.converged(lead, lead.store.AppliedIndex())
	// Each node snapshots the 64 KiB now (as SAVE does), whatever its
	// checks took during the writes: the rule counts from this snapshot.
	snapIndex := map[string]uint64{}
	for _, tn := range h.running() {
		if err := tn.n.Snapshot(); err != nil {
			t.Fatalf("%s: snapshot: %v", tn.id, err)
		}
		metas, err := tn.n.snaps.List()
		if err != nil || len(metas) == 0 {
			t.Fatalf("%s: snapshots %v, %v", tn.id, metas, err)
		}
		if metas[0].Size < 32<<10 {
			t.Fatalf("%s's snapshot of 64 KiB holds %d bytes, under SnapshotMinSize", tn.id, metas[0].Size)
		}
		snapIndex[tn.id] = metas[0].Index
	}

	// Small writes: many entries, few bytes.
	for i := range 200 {
		put(t, lead, "small", strconv.Itoa(i))
	}
	h.converged(lead, lead.store.AppliedIndex())
	for _, tn := range h.running() {
		checks := tn.n.snapshotChecks.Load()
		eventually(t, tn.id+" checking three times more", func() error {
			if n := tn.n.snapshotChecks.Load(); n < checks+3 {
				return fmt.Errorf("%d checks", n-checks)
			}
			return nil
		})
		metas, err := tn.n.snaps.List()
		if err != nil {
			t.Fatal(err)
		}
		if metas[0].Index != snapIndex[tn.id] {
			t.Errorf("%s snapshotted at %d after small writes only (the last at %d)", tn.id, metas[0].Index, snapIndex[tn.id])
		}
	}

	// More bytes than the snapshot holds: the next check takes one.
	for i := range 160 {
		put(t, lead, "big"+strconv.Itoa(i), value+"x"+strconv.Itoa(i))
	}
	h.converged(lead, lead.store.AppliedIndex())
	for _, tn := range h.running() {
		eventually(t, tn.id+" snapshotting once the writes add up", func() error {
			metas, err := tn.n.snaps.List()
			if err != nil {
				return err
			}
			if metas[0].Index <= snapIndex[tn.id] {
				return errors.New("no new snapshot")
			}
			return nil
		})
	}
}
