package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
)

// damage is the first bad spot recovery found in the segments.
type damage struct {
	seg    int   // position in the segment list
	off    int64 // byte offset in that segment
	reason error // why it is bad
	torn   bool  // a torn write in the newest segment, safe to cut
	// zero: only zero bytes from off to the end of the newest segment,
	// space preallocated and never written (or a write the crash never
	// reached). Cut like a torn tail, but expected, so not warned about.
	zero bool
	data []byte // the segment's contents, for keeping a copy of the cut bytes
}

// recover brings the directory to a consistent state and the caller's state
// up to date: it loads the newest snapshot, replays the records after it,
// handles damage as the package doc describes, and opens the active
// segment. It runs before the flush goroutine starts.
func (l *Log) recover() error {
	dir := l.opts.Dir
	if err := MkdirDurable(l.fs, dir); err != nil {
		return err
	}
	c, err := listDir(l.fs, dir)
	if err != nil {
		return err
	}
	for _, t := range c.temps { // an interrupted snapshot write: never renamed, never used
		if err := l.fs.Remove(t); err != nil {
			l.logger.Warn("wal: remove leftover temp file", "file", t, "err", err)
		}
	}
	snapIndex, bad, err := l.loadSnapshot(c.snapshots)
	if err != nil {
		return err
	}
	l.stats.snapshotIndex.Store(snapIndex)

	next, d, err := l.replay(c.segments, snapIndex)
	if err != nil {
		return err
	}
	segs := c.segments
	if d != nil {
		if err := l.handleDamage(segs, d, next, snapIndex, bad); err != nil {
			return err
		}
		if d.off == 0 && !d.torn {
			segs = segs[:d.seg] // renamed away whole
		} else {
			segs = segs[:d.seg+1]
		}
	}
	if (d == nil || d.torn) && len(bad) > 0 && next-1 < bad[0].index {
		// The fallback snapshot's log ends before what the damaged one
		// covered: those records are in no readable file.
		if err := l.handleFallbackGap(next, snapIndex, bad); err != nil {
			return err
		}
	}
	return l.openActive(segs, next, snapIndex)
}

// MkdirDurable creates dir and any missing parents, and makes their entries
// durable: a created directory's name lives in its parent, and until the
// parent is fsynced a power cut takes the directory, with every segment
// synced inside it. The parent of dir is synced even when dir exists, as a
// run that created it may have crashed before syncing. Open calls it for
// Options.Dir; kvs serve calls it for the data dir before anything opens a
// file there (the dir lock), so the log or the raft stores never find a
// directory whose name is not yet durable.
func MkdirDurable(fsys FS, dir string) error {
	dir = filepath.Clean(dir)
	var created []string
	for p := dir; ; p = filepath.Dir(p) {
		if _, err := fsys.ReadDir(p); !errors.Is(err, errNotExist) {
			break
		}
		created = append(created, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return fmt.Errorf("wal: create dir %s: %w", dir, err)
	}
	if len(created) == 0 {
		created = []string{dir}
	}
	// Top down, so each entry synced is in a directory already durable.
	for i := len(created) - 1; i >= 0; i-- {
		parent := filepath.Dir(created[i])
		if parent == created[i] {
			continue
		}
		if err := fsys.SyncDir(parent); err != nil {
			return fmt.Errorf("wal: sync dir %s after creating %s: %w", parent, created[i], err)
		}
	}
	return nil
}

// replay decodes every segment in order and applies the records after
// snapIndex. It returns the next index and the first damage found, if any;
// records before the damage have been applied.
func (l *Log) replay(segs []uint64, snapIndex uint64) (next uint64, d *damage, err error) {
	next = snapIndex + 1
	if len(segs) > 0 && segs[0] <= next {
		next = segs[0]
	}
	for i, first := range segs {
		// A segment must start where the previous one ended, except that
		// records the snapshot covers may be missing.
		if first != next && !(first > next && first <= snapIndex+1) {
			reason := fmt.Errorf("segment starts at index %d, want %d: no usable snapshot, and the records before it are in no segment", first, next)
			if snapIndex > 0 {
				reason = fmt.Errorf("segment starts at index %d, want %d: the log after the snapshot restored (%s, index %d) is missing",
					first, next, snapshotName(snapIndex), snapIndex)
			}
			if i > 0 {
				reason = fmt.Errorf("segment starts at index %d, want %d: %s ends early (truncated?) or a segment between them is missing",
					first, next, segmentName(segs[i-1]))
			}
			return next, &damage{seg: i, reason: reason}, nil
		}
		next = first
		data, err := l.readFile(l.path(segmentName(first)))
		if err != nil {
			return 0, nil, err
		}
		last := i == len(segs)-1
		for off := 0; off < len(data); {
			index, payload, n, derr := decodeRecord(data[off:])
			if derr == nil && index != next {
				return next, &damage{seg: i, off: int64(off), data: data,
					reason: fmt.Errorf("record has index %d, want %d", index, next)}, nil
			}
			if derr != nil {
				zero := last && allZero(data[off:])
				torn := zero || last && tornTail(data, off, next)
				return next, &damage{seg: i, off: int64(off), reason: derr, torn: torn, zero: zero, data: data}, nil
			}
			if index > snapIndex {
				l.opts.Apply(index, payload)
			}
			next++
			off += n
		}
	}
	return next, nil, nil
}

func (l *Log) readFile(name string) ([]byte, error) {
	f, err := l.fs.Open(name)
	if err != nil {
		return nil, fmt.Errorf("wal: open %s: %w", name, err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("wal: read %s: %w", name, err)
	}
	return data, nil
}

// tornTail reports whether the bad record at data[off:], in the newest
// segment, looks like a write a crash interrupted rather than corruption:
// no valid later record follows it, or a whole zero sector lies between it
// and the next valid record (a page the crash never wrote; what follows was
// in the same unsynced write and was never acknowledged under FsyncAlways).
func tornTail(data []byte, off int, next uint64) bool {
	p := findValidRecord(data, off+1, next)
	return p < 0 || hasZeroSector(data, off, p)
}

// findValidRecord returns the offset of the first record at or after from
// that decodes and has a plausible index (next or later), or -1.
func findValidRecord(data []byte, from int, next uint64) int {
	maxIndex := next + uint64(len(data)/headerSize)
	for p := from; p+headerSize <= len(data); p++ {
		// The index check is cheap and rejects almost every offset before
		// the checksum is computed.
		idx := binary.LittleEndian.Uint64(data[p+8:])
		if idx < next || idx > maxIndex {
			continue
		}
		if got, _, _, err := decodeRecord(data[p:]); err == nil && got == idx {
			return p
		}
	}
	return -1
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

const sectorSize = 512

// hasZeroSector reports whether a whole sector-aligned, all-zero 512-byte
// chunk lies within data[from:to].
func hasZeroSector(data []byte, from, to int) bool {
	for s := (from + sectorSize - 1) / sectorSize * sectorSize; s+sectorSize <= to; s += sectorSize {
		zero := true
		for _, b := range data[s : s+sectorSize] {
			if b != 0 {
				zero = false
				break
			}
		}
		if zero {
			return true
		}
	}
	return false
}

// handleDamage truncates a torn tail, repairs corruption if Repair is set,
// or returns the ErrCorrupt error naming file and offset. Either way, for
// corruption it first logs what a repair cuts (or would cut). next is the
// index replay expected at the damage, bad the damaged snapshots passed
// over.
func (l *Log) handleDamage(segs []uint64, d *damage, next, snapIndex uint64, bad []badSnapshot) error {
	name := l.path(segmentName(segs[d.seg]))
	if d.torn {
		cut := int64(len(d.data)) - d.off
		if err := l.truncate(name, d.off); err != nil {
			return err
		}
		if d.zero {
			// Preallocated space: the next extension writes it again.
			l.logger.Debug("wal: cut preallocated zeros after the last record of newest segment",
				"file", name, "offset", d.off, "bytes", cut)
			return nil
		}
		l.logger.Warn("wal: truncated torn tail of newest segment",
			"file", name, "offset", d.off, "bytes", cut, "index", next, "reason", d.reason)
		return nil
	}
	cerr := fmt.Errorf("%w: %s at offset %d: %w", ErrCorrupt, name, d.off, d.reason)
	if len(bad) > 0 {
		cerr = fmt.Errorf("%w (replaying after the damaged snapshot %s was passed over: %w)", cerr, bad[0].name, bad[0].err)
	}
	plan, err := l.planCut(segs, d, next, snapIndex)
	if err != nil {
		return errors.Join(cerr, err)
	}
	plan.snaps = bad
	if len(bad) > 0 {
		plan.last = max(plan.last, bad[0].index)
	}
	if err := l.startRepair(plan, cerr); err != nil {
		return err
	}
	if d.off == 0 {
		if err := l.keepBroken(name); err != nil {
			return err
		}
	} else {
		if err := l.copyBroken(name, d.data[d.off:]); err != nil {
			return err
		}
		if err := l.truncate(name, d.off); err != nil {
			return err
		}
	}
	for _, first := range segs[d.seg+1:] {
		if err := l.keepBroken(l.path(segmentName(first))); err != nil {
			return err
		}
	}
	if err := l.setAsideSnapshots(bad); err != nil {
		return err
	}
	if err := l.fs.SyncDir(l.opts.Dir); err != nil {
		return fmt.Errorf("wal: sync dir after repair: %w", err)
	}
	return nil
}

// handleFallbackGap handles a log that ends (at next-1) before the index
// of the newest damaged snapshot: corruption, or with Repair, the damaged
// snapshots set aside and the log continued from where it ends.
func (l *Log) handleFallbackGap(next, snapIndex uint64, bad []badSnapshot) error {
	fellBackTo := "no snapshot"
	if snapIndex > 0 {
		fellBackTo = l.path(snapshotName(snapIndex))
	}
	cerr := fmt.Errorf("%w: %w; fell back to %s, but the log after it ends at index %d, before index %d that the damaged snapshot covers",
		ErrCorrupt, bad[0].err, fellBackTo, next-1, bad[0].index)
	plan := planFallbackGap(next, snapIndex, bad)
	if err := l.startRepair(plan, cerr); err != nil {
		return err
	}
	if err := l.setAsideSnapshots(bad); err != nil {
		return err
	}
	if err := l.fs.SyncDir(l.opts.Dir); err != nil {
		return fmt.Errorf("wal: sync dir after repair: %w", err)
	}
	return nil
}

func (l *Log) truncate(name string, size int64) error {
	f, err := l.fs.OpenAppend(name)
	if err != nil {
		return fmt.Errorf("wal: open %s: %w", name, err)
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("wal: truncate %s to %d: %w", name, size, err)
	}
	return nil
}

// brokenName returns a name for keeping a copy of cut bytes of name that
// does not overwrite an earlier copy.
func (l *Log) brokenName(name string) (string, error) {
	for i := 0; ; i++ {
		b := name + brokenExt
		if i > 0 {
			b = fmt.Sprintf("%s.%d%s", name, i, brokenExt)
		}
		f, err := l.fs.Open(b)
		if errors.Is(err, errNotExist) {
			return b, nil
		}
		if err != nil {
			return "", fmt.Errorf("wal: probe %s: %w", b, err)
		}
		f.Close()
	}
}

// keepBroken renames a whole segment out of the log.
func (l *Log) keepBroken(name string) error {
	b, err := l.brokenName(name)
	if err != nil {
		return err
	}
	if err := l.fs.Rename(name, b); err != nil {
		return fmt.Errorf("wal: repair: %w", err)
	}
	l.logger.Warn("wal: repair moved segment out of the log", "file", name, "to", b)
	return nil
}

// copyBroken keeps a durable copy of the bytes repair is about to cut.
func (l *Log) copyBroken(name string, cut []byte) error {
	b, err := l.brokenName(name)
	if err != nil {
		return err
	}
	f, err := l.fs.Create(b)
	if err != nil {
		return fmt.Errorf("wal: repair: create %s: %w", b, err)
	}
	_, err = f.Write(cut)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("wal: repair: write %s: %w", b, err)
	}
	l.logger.Warn("wal: repair kept the cut bytes", "file", name, "copy", b, "bytes", len(cut))
	return nil
}

// openActive opens the newest segment for appending, or starts a new one
// when there is none or when the snapshot runs past its last record. next
// is one past the last record replay kept, which is where the newest
// remaining segment ends.
func (l *Log) openActive(segs []uint64, next, snapIndex uint64) error {
	fresh := len(segs) == 0
	if next <= snapIndex {
		// Every record left is covered by the snapshot (possible only after
		// a repair cut below it): continue after the snapshot, in a new
		// segment so that no segment has a gap inside it.
		next, fresh = snapIndex+1, true
	}
	l.mu.nextIndex = next
	l.w.lastWritten = next - 1
	l.stats.durableIndex.Store(next - 1)
	if fresh {
		name := l.path(segmentName(next))
		f, err := l.fs.Create(name)
		if err != nil {
			return fmt.Errorf("wal: create segment %s: %w", name, err)
		}
		if err := l.fs.SyncDir(l.opts.Dir); err != nil {
			f.Close()
			return fmt.Errorf("wal: sync dir after creating %s: %w", name, err)
		}
		l.w.file, l.w.first, l.w.size, l.w.alloc = f, next, 0, 0
		segs = append(segs, next)
	} else {
		first := segs[len(segs)-1]
		name := l.path(segmentName(first))
		f, err := l.fs.OpenAppend(name)
		if err != nil {
			return fmt.Errorf("wal: open %s: %w", name, err)
		}
		size, err := f.Size()
		if err != nil {
			f.Close()
			return fmt.Errorf("wal: stat %s: %w", name, err)
		}
		l.w.file, l.w.first, l.w.size, l.w.alloc = f, first, size, size
	}
	l.segs.firsts = segs
	l.stats.segments.Store(uint64(len(segs)))
	return nil
}
