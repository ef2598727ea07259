package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"kvs/group"
)

// TestRecoverTargets: which groups kvs recover recovers in a data dir, and
// the --group values it refuses.
func TestRecoverTargets(t *testing.T) {
	one := t.TempDir()
	if ids, n, slots, err := recoverTargets(one, -1); err != nil || !slices.Equal(ids, []uint32{0}) || n != 1 || slots != nil {
		t.Errorf("a one-group node: %v %d %v %v", ids, n, slots != nil, err)
	}
	if _, _, _, err := recoverTargets(one, 2); err == nil || !strings.Contains(err.Error(), "has one group") {
		t.Errorf("--group 2 of a one-group node: %v", err)
	}

	dir := t.TempDir()
	if err := writeGroups(dir, shape{groups: 3, replicas: 2}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint32{0, 1, 3} {
		if err := os.MkdirAll(group.GroupDir(dir, id), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ids, n, slots, err := recoverTargets(dir, -1)
	if err != nil || !slices.Equal(ids, []uint32{0, 1, 3}) || n != 4 || len(slots) != 16384 || slots[0] != 1 || slots[16383] != 3 {
		t.Errorf("every group held: %v %d %v", ids, n, err)
	}
	if ids, _, _, err := recoverTargets(dir, 3); err != nil || !slices.Equal(ids, []uint32{3}) {
		t.Errorf("--group 3: %v %v", ids, err)
	}
	for only, want := range map[int]string{
		2: "holds no replica of it",
		4: "the cluster's groups are 0 (meta) to 3",
	} {
		if _, _, _, err := recoverTargets(dir, only); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--group %d: %v, want %q", only, err, want)
		}
	}
}
