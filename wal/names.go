package wal

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

const (
	segmentExt  = ".wal"
	snapPrefix  = "snapshot-"
	snapExt     = ".snap"
	tmpExt      = ".tmp"
	brokenExt   = ".broken"
	indexDigits = 20
)

func segmentName(first uint64) string { return fmt.Sprintf("%020d%s", first, segmentExt) }

func snapshotName(index uint64) string { return fmt.Sprintf("%s%020d%s", snapPrefix, index, snapExt) }

// parseIndexName parses prefix + 20 digits + ext.
func parseIndexName(name, prefix, ext string) (uint64, bool) {
	s, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, ext)
	if !ok || len(s) != indexDigits {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// dirContents is what a log directory holds, each list sorted by index.
type dirContents struct {
	segments  []uint64 // first index of each segment
	snapshots []uint64 // index each snapshot covers
	temps     []string // leftovers of interrupted snapshot writes
}

func listDir(fsys FS, dir string) (dirContents, error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return dirContents{}, fmt.Errorf("wal: read dir %s: %w", dir, err)
	}
	var c dirContents
	for _, name := range names { // sorted, and the fixed-width names sort by index
		if i, ok := parseIndexName(name, "", segmentExt); ok {
			c.segments = append(c.segments, i)
		} else if i, ok := parseIndexName(name, snapPrefix, snapExt); ok {
			c.snapshots = append(c.snapshots, i)
		} else if strings.HasSuffix(name, tmpExt) {
			c.temps = append(c.temps, filepath.Join(dir, name))
		}
	}
	return c, nil
}
