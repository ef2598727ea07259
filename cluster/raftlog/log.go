// Package raftlog is a raft.LogStore on segment files: appends are one
// write and one fdatasync per StoreLogs, entries are read back by index
// through an in-memory table of offsets, and the two deletions raft makes
// are cheap: a prefix (after a snapshot) removes whole segment files, a
// suffix (a follower's conflicting entries) truncates. It replaces
// raft-boltdb as the log of a group's replica, whose every write costs a
// bolt transaction (several pages and an fsync).
//
// A segment is named by the index of its first entry; records are framed
// as the wal's are: CRC-32C, length, then the entry (index, term, type,
// append time, data, extensions). Opening reads every segment; a record
// cut short or failing its checksum at the end of the last segment is a
// torn write and is cut away; anywhere else it is corruption, reported
// with the file and offset.
package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
	"github.com/hashicorp/raft"

	"kvs/wal"
)

// DefaultSegmentSize is the size past which a new segment starts.
const DefaultSegmentSize = 64 << 20

// ErrCorrupt wraps damage that is not a torn tail.
var ErrCorrupt = errors.New("raftlog: corrupt log")

const (
	suffix     = ".rlog"
	headerSize = 8 // crc u32, length u32
	maxRecord  = 1 << 30
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Options configure a Log.
type Options struct {
	Dir         string
	SegmentSize int64  // 0: DefaultSegmentSize
	FS          wal.FS // nil: the operating system's
}

// Log is a raft.LogStore. Safe for concurrent use.
type Log struct {
	dir  string
	fs   wal.FS
	size int64

	mu   sync.RWMutex // guards the fields below
	segs []*segment   // by first index; the last one is written
	w    wal.File     // the last segment, open for writing
	buf  []byte       // StoreLogs' encoding buffer
	// floor is the first index raft has not deleted, where a prefix
	// deletion ended inside a segment (0: none); the entries below it stay
	// in their file until the whole segment goes, but are not served. A
	// reopened log serves them again, which raft takes as a longer log
	// behind its snapshot.
	floor uint64
}

type segment struct {
	first uint64
	name  string
	f     wal.File // open for reading
	offs  []int64  // offs[i] is the offset of entry first+i
	end   int64    // the offset after the last entry
	// zeroed is the file's size: past end it holds zeros, written and
	// synced ahead of the records, so that an append's fdatasync finds the
	// size unchanged and writes the data alone.
	zeroed int64
}

func (s *segment) last() uint64 { return s.first + uint64(len(s.offs)) - 1 }

// Open opens (creating if needed) the log in o.Dir and recovers it.
func Open(o Options) (*Log, error) {
	l := &Log{dir: o.Dir, fs: o.FS, size: o.SegmentSize}
	if l.fs == nil {
		l.fs = wal.OSFS{}
	}
	if l.size <= 0 {
		l.size = DefaultSegmentSize
	}
	// The directory's name is made durable in its parent before anything
	// in it counts on it.
	if err := l.fs.MkdirAll(l.dir); err != nil {
		return nil, err
	}
	if err := l.fs.SyncDir(filepath.Dir(l.dir)); err != nil {
		return nil, err
	}
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	var firsts []uint64
	for _, n := range names {
		if !strings.HasSuffix(n, suffix) {
			continue
		}
		first, err := strconv.ParseUint(strings.TrimSuffix(n, suffix), 10, 64)
		if err != nil || first == 0 {
			continue
		}
		firsts = append(firsts, first)
	}
	slices.Sort(firsts)
	for i, first := range firsts {
		seg, err := l.load(first, i == len(firsts)-1)
		if err != nil {
			l.closeFiles()
			return nil, err
		}
		if n := len(l.segs); n > 0 && len(l.segs[n-1].offs) > 0 && len(seg.offs) > 0 && seg.first != l.segs[n-1].last()+1 {
			l.closeFiles()
			return nil, fmt.Errorf("%w: %s starts at %d, after %d", ErrCorrupt, seg.name, seg.first, l.segs[n-1].last())
		}
		l.segs = append(l.segs, seg)
	}
	if n := len(l.segs); n > 0 {
		if l.w, err = l.fs.OpenAppend(l.segs[n-1].name); err != nil {
			l.closeFiles()
			return nil, err
		}
	}
	return l, nil
}

func segName(dir string, first uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", first, suffix))
}

// load reads a segment's records; a bad one ends the last segment (its
// torn tail is cut off) and is corruption in any other.
func (l *Log) load(first uint64, last bool) (*segment, error) {
	seg := &segment{first: first, name: segName(l.dir, first)}
	f, err := l.fs.Open(seg.name)
	if err != nil {
		return nil, err
	}
	seg.f = f
	data, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<62))
	if err != nil {
		f.Close()
		return nil, err
	}
	off := int64(0)
	for off < int64(len(data)) {
		if isZeros(data[off:min(off+headerSize, int64(len(data)))]) {
			break // the preallocated rest
		}
		index, n, err := decodeHeader(data[off:])
		if err == nil && index != first+uint64(len(seg.offs)) {
			err = fmt.Errorf("entry %d where %d was due", index, first+uint64(len(seg.offs)))
		}
		if err != nil {
			if !last || !tornTail(data, off, first+uint64(len(seg.offs))) {
				f.Close()
				return nil, fmt.Errorf("%w: %s at offset %d: %v", ErrCorrupt, seg.name, off, err)
			}
			// A torn tail: cut it off, durably.
			w, werr := l.fs.OpenAppend(seg.name)
			if werr == nil {
				werr = w.Truncate(off)
				if werr == nil {
					werr = w.Sync()
				}
				w.Close()
			}
			if werr != nil {
				f.Close()
				return nil, werr
			}
			break
		}
		seg.offs = append(seg.offs, off)
		off += int64(n)
	}
	seg.end = off
	seg.zeroed = int64(len(data))
	if off < int64(len(data)) && !isZeros(data[off:min(off+headerSize, int64(len(data)))]) {
		seg.zeroed = off // a torn tail, cut off above
	}
	return seg, nil
}

// decodeHeader checks the record at the start of b and returns its entry's
// index and the record's size.
func decodeHeader(b []byte) (index uint64, n int, err error) {
	if len(b) < headerSize+8 {
		return 0, 0, errors.New("record cut short")
	}
	length := binary.LittleEndian.Uint32(b[4:])
	if length < 8 || length > maxRecord {
		return 0, 0, fmt.Errorf("record length %d", length)
	}
	n = headerSize + int(length)
	if len(b) < n {
		return 0, 0, errors.New("record cut short")
	}
	if crc32.Checksum(b[4:n], crcTable) != binary.LittleEndian.Uint32(b) {
		return 0, 0, errors.New("record checksum mismatch")
	}
	return binary.LittleEndian.Uint64(b[headerSize:]), n, nil
}

// appendEntry appends log's record to dst.
func appendEntry(dst []byte, log *raft.Log) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, headerSize)...)
	dst = binary.LittleEndian.AppendUint64(dst, log.Index)
	dst = binary.LittleEndian.AppendUint64(dst, log.Term)
	dst = append(dst, byte(log.Type))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(log.AppendedAt.UnixNano()))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(log.Data)))
	dst = append(dst, log.Data...)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(log.Extensions)))
	dst = append(dst, log.Extensions...)
	binary.LittleEndian.PutUint32(dst[start+4:], uint32(len(dst)-start-headerSize))
	binary.LittleEndian.PutUint32(dst[start:], crc32.Checksum(dst[start+4:], crcTable))
	return dst
}

// decodeEntry decodes a record (checked already) into out; out's slices
// are fresh.
func decodeEntry(b []byte, out *raft.Log) error {
	p := b[headerSize:]
	if len(p) < 8+8+1+8+4 {
		return errors.New("entry cut short")
	}
	out.Index = binary.LittleEndian.Uint64(p)
	out.Term = binary.LittleEndian.Uint64(p[8:])
	out.Type = raft.LogType(p[16])
	out.AppendedAt = time.Unix(0, int64(binary.LittleEndian.Uint64(p[17:])))
	p = p[25:]
	dl := binary.LittleEndian.Uint32(p)
	if uint64(len(p)) < 4+uint64(dl)+4 {
		return errors.New("entry data cut short")
	}
	out.Data = slices.Clone(p[4 : 4+dl])
	p = p[4+dl:]
	el := binary.LittleEndian.Uint32(p)
	if uint64(len(p)) < 4+uint64(el) {
		return errors.New("entry extensions cut short")
	}
	out.Extensions = nil
	if el > 0 {
		out.Extensions = slices.Clone(p[4 : 4+el])
	}
	return nil
}

// FirstIndex is the first entry's index, 0 when the log is empty.
func (l *Log) FirstIndex() (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.firstLocked(), nil
}

func (l *Log) firstLocked() uint64 {
	for _, s := range l.segs {
		if len(s.offs) > 0 {
			return max(s.first, l.floor)
		}
	}
	return 0
}

// LastIndex is the last entry's index, 0 when the log is empty.
func (l *Log) LastIndex() (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.lastLocked(), nil
}

func (l *Log) lastLocked() uint64 {
	for i := len(l.segs) - 1; i >= 0; i-- {
		if s := l.segs[i]; len(s.offs) > 0 {
			return s.last()
		}
	}
	return 0
}

// GetLog reads entry index into out; raft.ErrLogNotFound when the log
// does not hold it.
func (l *Log) GetLog(index uint64, out *raft.Log) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if index < l.floor {
		return raft.ErrLogNotFound
	}
	i, _ := slices.BinarySearchFunc(l.segs, index, func(s *segment, idx uint64) int {
		switch {
		case s.first > idx:
			return 1
		case s.first == idx:
			return 0
		}
		return -1
	})
	if i == len(l.segs) || l.segs[i].first != index {
		i--
	}
	if i < 0 {
		return raft.ErrLogNotFound
	}
	s := l.segs[i]
	if len(s.offs) == 0 || index > s.last() {
		return raft.ErrLogNotFound
	}
	k := index - s.first
	end := s.end
	if k+1 < uint64(len(s.offs)) {
		end = s.offs[k+1]
	}
	b := make([]byte, end-s.offs[k])
	if _, err := s.f.ReadAt(b, s.offs[k]); err != nil {
		return err
	}
	if _, _, err := decodeHeader(b); err != nil {
		return fmt.Errorf("%w: %s at offset %d: %v", ErrCorrupt, s.name, s.offs[k], err)
	}
	return decodeEntry(b, out)
}

// StoreLog stores one entry.
func (l *Log) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

// StoreLogs appends logs, which must follow the last entry, or start
// anywhere in an empty log, or past the end after a snapshot (the log then
// starts again there), with one write and one fdatasync per segment they
// go to.
func (l *Log) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	defer metrics.MeasureSince([]string{"raft", "raftlog", "storeLogs"}, time.Now())
	metrics.AddSample([]string{"raft", "raftlog", "logsPerBatch"}, float32(len(logs)))
	l.mu.Lock()
	defer l.mu.Unlock()
	next := logs[0].Index
	switch last := l.lastLocked(); {
	case last == 0 || next == last+1:
	case next > last+1:
		l.floor = 0
		// A gap: raft installed a snapshot past the log's end and goes
		// on from it. What the log held is covered by the snapshot (and
		// raft-boltdb, keyed by index, would keep it as an island);
		// this log starts again at next.
		for len(l.segs) > 0 {
			if err := l.dropLast(); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("raftlog: entry %d stored after %d", next, last)
	}
	for i := 0; i < len(logs); {
		if err := l.ensureSegment(logs[i].Index); err != nil {
			return err
		}
		s := l.segs[len(l.segs)-1]
		buf := l.buf[:0]
		var offs []int64
		for ; i < len(logs); i++ {
			if logs[i].Index != next {
				return fmt.Errorf("raftlog: entry %d stored after %d", logs[i].Index, next-1)
			}
			if len(offs) > 0 && s.end+int64(len(buf)) >= l.size {
				break // the rest go to a new segment
			}
			offs = append(offs, s.end+int64(len(buf)))
			buf = appendEntry(buf, logs[i])
			next++
		}
		l.zeroAhead(s, s.end+int64(len(buf)))
		if _, err := l.w.WriteAt(buf, s.end); err != nil {
			return err
		}
		if err := l.w.Sync(); err != nil {
			return err
		}
		s.offs = append(s.offs, offs...)
		s.end += int64(len(buf))
		if cap(buf) <= 1<<20 {
			l.buf = buf
		}
	}
	return nil
}

// ensureSegment starts a segment at index when there is none, or when the
// last one is full.
func (l *Log) ensureSegment(index uint64) error {
	if n := len(l.segs); n > 0 && (l.segs[n-1].end < l.size || len(l.segs[n-1].offs) == 0) {
		if len(l.segs[n-1].offs) == 0 && l.segs[n-1].first != index {
			// An empty segment named for another index: replace it.
			if err := l.dropLast(); err != nil {
				return err
			}
		} else {
			return nil
		}
	}
	name := segName(l.dir, index)
	w, err := l.fs.Create(name)
	if err != nil {
		return err
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		w.Close()
		return err
	}
	f, err := l.fs.Open(name)
	if err != nil {
		w.Close()
		return err
	}
	if l.w != nil {
		l.w.Close()
	}
	l.w = w
	l.segs = append(l.segs, &segment{first: index, name: name, f: f})
	return nil
}

// dropLast removes the last segment file.
func (l *Log) dropLast() error {
	s := l.segs[len(l.segs)-1]
	if l.w != nil {
		l.w.Close()
		l.w = nil
	}
	s.f.Close()
	if err := l.fs.Remove(s.name); err != nil {
		return err
	}
	l.segs = l.segs[:len(l.segs)-1]
	if n := len(l.segs); n > 0 {
		w, err := l.fs.OpenAppend(l.segs[n-1].name)
		if err != nil {
			return err
		}
		l.w = w
	}
	return l.fs.SyncDir(l.dir)
}

// DeleteRange deletes entries min to max, inclusive: a prefix of the log
// (raft's compaction after a snapshot; whole segments go, a segment that
// holds entries past max stays whole), a suffix (conflicting entries;
// the segment holding min is cut there), or all of it.
func (l *Log) DeleteRange(min, max uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	last := l.lastLocked()
	if last == 0 || min > max {
		return nil
	}
	first := l.firstLocked()
	switch {
	case min <= first && max >= last:
		for len(l.segs) > 0 {
			if err := l.dropLast(); err != nil {
				return err
			}
		}
		l.floor = 0
		return nil
	case min <= first:
		for len(l.segs) > 1 && l.segs[0].last() <= max {
			s := l.segs[0]
			s.f.Close()
			if err := l.fs.Remove(s.name); err != nil {
				return err
			}
			l.segs = l.segs[1:]
		}
		l.floor = max + 1
		return l.fs.SyncDir(l.dir)
	case max >= last:
		for len(l.segs) > 0 && l.segs[len(l.segs)-1].first >= min {
			if err := l.dropLast(); err != nil {
				return err
			}
		}
		s := l.segs[len(l.segs)-1]
		k := min - s.first
		if k >= uint64(len(s.offs)) {
			return nil
		}
		if err := l.w.Truncate(s.offs[k]); err != nil {
			return err
		}
		if err := l.w.Sync(); err != nil {
			return err
		}
		s.end, s.offs, s.zeroed = s.offs[k], s.offs[:k], s.offs[k]
		return nil
	}
	return fmt.Errorf("raftlog: DeleteRange(%d, %d) is neither a prefix nor a suffix of %d..%d", min, max, first, last)
}

// Close closes the files.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closeFiles()
}

func (l *Log) closeFiles() error {
	var err error
	for _, s := range l.segs {
		if cerr := s.f.Close(); err == nil {
			err = cerr
		}
	}
	if l.w != nil {
		if cerr := l.w.Close(); err == nil {
			err = cerr
		}
		l.w = nil
	}
	l.segs = nil
	return err
}

// segsLen is the number of segment files, for the tests.
func (l *Log) segsLen() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs)
}

// tornTail reports whether the bad record at data[off:], in the last
// segment, is a write a crash interrupted rather than corruption: no valid
// later record follows it, or a whole zero sector lies between it and the
// next one (a page the crash never wrote), as the wal decides.
func tornTail(data []byte, off int64, next uint64) bool {
	p := findValidRecord(data, off+1, next)
	if p < 0 {
		return true
	}
	for s := (off + 511) / 512 * 512; s+512 <= p; s += 512 {
		if isZeros(data[s : s+512]) {
			return true
		}
	}
	return false
}

// findValidRecord returns the offset of the first record at or after from
// that checks and holds a plausible index (next or later), or -1.
func findValidRecord(data []byte, from int64, next uint64) int64 {
	maxIndex := next + uint64(len(data)/headerSize)
	for p := from; p+headerSize+8 <= int64(len(data)); p++ {
		idx := binary.LittleEndian.Uint64(data[p+headerSize:])
		if idx < next || idx > maxIndex {
			continue
		}
		if got, _, err := decodeHeader(data[p:]); err == nil && got == idx {
			return p
		}
	}
	return -1
}

// zeroChunk is how much of a segment is zeroed ahead of its records at a
// time.
const zeroChunk = 1 << 20

// zeroBuf is what zeroAhead writes, never written itself: one for every
// log, so that zeroing a chunk ahead allocates (and clears) nothing. A
// replica taking a move's copy writes megabytes a second, and an
// allocation of each megabyte made the collector run as often again.
var zeroBuf = make([]byte, zeroChunk)

// zeroAhead makes s's zeros reach past need, a chunk at a time, up to
// the segment size: the write that extends the file pays for its new size
// once per chunk, not once per batch. It gives up quietly on a full disk:
// the records are then written past the zeros, growing the file as they
// go, and their own write reports the error if there is no room for them.
func (l *Log) zeroAhead(s *segment, need int64) {
	if need <= s.zeroed {
		return
	}
	to := min(max(need, s.zeroed+zeroChunk), max(need, l.size))
	zeros := zeroBuf[:min(to-s.zeroed, zeroChunk)]
	for off := s.zeroed; off < to; off += int64(len(zeros)) {
		if _, err := l.w.WriteAt(zeros[:min(int64(len(zeros)), to-off)], off); err != nil {
			return
		}
		s.zeroed = off + min(int64(len(zeros)), to-off)
	}
}

func isZeros(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// HasEntries reports whether the log in dir holds any entry, reading
// only: a segment file that begins with a record.
func HasEntries(dir string) (bool, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), suffix) {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return false, err
		}
		var b [headerSize]byte
		n, _ := io.ReadFull(f, b[:])
		f.Close()
		if n == headerSize && !isZeros(b[:]) {
			return true, nil
		}
	}
	return false, nil
}
