package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
)

const (
	snapMagic         = "kvs-snap"
	snapVersion       = 1
	snapHeaderSize    = 24 // magic, version, reserved, index
	snapTrailerSize   = 12 // body length, crc
	snapWriteBufBytes = 1 << 20
)

var errSnapshotWrite = errors.New("wal: write snapshot")

func snapHeader(index uint64) []byte {
	h := make([]byte, snapHeaderSize)
	copy(h, snapMagic)
	binary.LittleEndian.PutUint32(h[8:], snapVersion)
	binary.LittleEndian.PutUint64(h[16:], index)
	return h
}

// writebackWriter starts writeback of what was written every
// writebackBytes, where the file supports it (see osFile.startWriteback).
type writebackWriter struct {
	f       File
	off     int64 // bytes written
	flushed int64 // bytes handed to writeback
}

const writebackBytes = 1 << 20

type writebacker interface{ startWriteback(off, n int64) error }

func (w *writebackWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.off += int64(n)
	if wb, ok := w.f.(writebacker); ok && w.off-w.flushed >= writebackBytes {
		// Best effort: the final fsync is what makes the snapshot durable.
		_ = wb.startWriteback(0, w.off)
		w.flushed = w.off
	}
	return n, err
}

// countingWriter counts and checksums what passes through it.
type countingWriter struct {
	w   io.Writer
	crc hash.Hash32
	n   uint64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.crc.Write(p[:n])
	c.n += uint64(n)
	return n, err
}

// writeSnapshot writes the snapshot covering index atomically: a temp file,
// fsynced, renamed into place, directory fsynced. It returns the file size.
func (l *Log) writeSnapshot(index uint64, write func(io.Writer) error) (int64, error) {
	final := l.path(snapshotName(index))
	tmp := final + tmpExt
	f, err := l.fs.Create(tmp)
	if err != nil {
		abandon(write) // it must still run once, to release its view
		return 0, fmt.Errorf("%w: create %s: %w", errSnapshotWrite, tmp, err)
	}
	size, err := writeSnapshotBody(&writebackWriter{f: f}, index, write)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = l.fs.Rename(tmp, final)
	}
	if err == nil {
		err = l.fs.SyncDir(l.opts.Dir)
	}
	if err != nil {
		if rerr := l.fs.Remove(tmp); rerr != nil && !errors.Is(rerr, errNotExist) {
			l.logger.Warn("wal: remove failed snapshot temp file", "file", tmp, "err", rerr)
		}
		return 0, fmt.Errorf("%w %s: %w", errSnapshotWrite, final, err)
	}
	// Nothing older is deleted on the strength of this snapshot until it
	// reads back whole.
	if _, err := l.verifySnapshot(final, index); err != nil {
		l.setAside(final)
		return 0, fmt.Errorf("%w %s: reading it back: %w", errSnapshotWrite, final, err)
	}
	return size, nil
}

// setAside renames a snapshot that failed verification to .broken, so that
// recovery never tries it; failing that, it stays and recovery skips it.
func (l *Log) setAside(name string) {
	b, err := l.brokenName(name)
	if err == nil {
		err = l.fs.Rename(name, b)
	}
	if err == nil {
		err = l.fs.SyncDir(l.opts.Dir)
	}
	if err != nil {
		l.logger.Warn("wal: could not set a bad snapshot aside", "file", name, "err", err)
	}
}

func writeSnapshotBody(f io.Writer, index uint64, write func(io.Writer) error) (int64, error) {
	bw := bufio.NewWriterSize(f, snapWriteBufBytes)
	crc := crc32.New(crcTable)
	h := snapHeader(index)
	crc.Write(h)
	if _, err := bw.Write(h); err != nil {
		return 0, err
	}
	body := &countingWriter{w: bw, crc: crc}
	if err := write(body); err != nil {
		return 0, fmt.Errorf("snapshot writer: %w", err)
	}
	var t [snapTrailerSize]byte
	binary.LittleEndian.PutUint64(t[0:], body.n)
	binary.LittleEndian.PutUint32(t[8:], crc.Sum32())
	if _, err := bw.Write(t[:]); err != nil {
		return 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, err
	}
	return int64(snapHeaderSize + body.n + snapTrailerSize), nil
}

// verifySnapshot checks a snapshot file's header, length and checksum and
// returns its body length.
func (l *Log) verifySnapshot(name string, index uint64) (int64, error) {
	f, err := l.fs.Open(name)
	if err != nil {
		return 0, fmt.Errorf("wal: open %s: %w", name, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return 0, fmt.Errorf("wal: stat %s: %w", name, err)
	}
	if size < snapHeaderSize+snapTrailerSize {
		return 0, fmt.Errorf("%w: %s at offset 0: snapshot of %d bytes is too short", ErrCorrupt, name, size)
	}
	bodyLen := size - snapHeaderSize - snapTrailerSize
	br := bufio.NewReaderSize(f, snapWriteBufBytes)
	h := make([]byte, snapHeaderSize)
	if _, err := io.ReadFull(br, h); err != nil {
		return 0, fmt.Errorf("wal: read %s: %w", name, err)
	}
	if string(h[:8]) != snapMagic {
		return 0, fmt.Errorf("%w: %s at offset 0: bad snapshot magic", ErrCorrupt, name)
	}
	if v := binary.LittleEndian.Uint32(h[8:]); v != snapVersion {
		return 0, fmt.Errorf("%w: %s at offset 8: unknown snapshot version %d", ErrCorrupt, name, v)
	}
	if got := binary.LittleEndian.Uint64(h[16:]); got != index {
		return 0, fmt.Errorf("%w: %s at offset 16: snapshot index %d does not match its name", ErrCorrupt, name, got)
	}
	crc := crc32.New(crcTable)
	crc.Write(h)
	if _, err := io.CopyN(crc, br, bodyLen); err != nil {
		return 0, fmt.Errorf("wal: read %s: %w", name, err)
	}
	var t [snapTrailerSize]byte
	if _, err := io.ReadFull(br, t[:]); err != nil {
		return 0, fmt.Errorf("wal: read %s: %w", name, err)
	}
	if n := binary.LittleEndian.Uint64(t[0:]); n != uint64(bodyLen) {
		return 0, fmt.Errorf("%w: %s at offset %d: snapshot length %d, file holds %d", ErrCorrupt, name, size-snapTrailerSize, n, bodyLen)
	}
	if binary.LittleEndian.Uint32(t[8:]) != crc.Sum32() {
		return 0, fmt.Errorf("%w: %s at offset %d: snapshot checksum mismatch: bytes 0..%d (header and body) or the checksum itself are damaged",
			ErrCorrupt, name, size-4, size-snapTrailerSize)
	}
	return bodyLen, nil
}

// badSnapshot is a snapshot file recovery could not use.
type badSnapshot struct {
	index uint64
	name  string
	err   error
}

// loadSnapshot restores the newest usable snapshot and returns the index it
// covers (0 if none) and the newer snapshots it had to pass over, newest
// first. A damaged snapshot is logged at error level, naming the file and
// the damage, and the one before it is tried: compaction keeps the previous
// snapshot and the log after it until a newer one is verified, so falling
// back loses nothing as long as that log is there (recover checks it).
func (l *Log) loadSnapshot(snaps []uint64) (uint64, []badSnapshot, error) {
	var bad []badSnapshot
	for i := len(snaps) - 1; i >= 0; i-- {
		index := snaps[i]
		name := l.path(snapshotName(index))
		if l.opts.Restore == nil {
			return 0, nil, fmt.Errorf("wal: %s exists but Options.Restore is nil", name)
		}
		err := l.restoreSnapshot(name, index)
		if errors.Is(err, ErrCorrupt) {
			l.logger.Error("wal: snapshot is damaged; trying the one before it", "file", name, "index", index, "err", err)
			bad = append(bad, badSnapshot{index: index, name: name, err: err})
			continue
		}
		if err != nil {
			return 0, nil, err
		}
		l.logger.Info("wal: restored snapshot", "file", name, "index", index)
		if len(bad) > 0 {
			l.logger.Warn("wal: fell back to an older snapshot; the log after it replaces the damaged one",
				"file", name, "index", index, "damaged", bad[0].name, "damaged_index", bad[0].index)
		}
		return index, bad, nil
	}
	return 0, bad, nil
}

// restoreSnapshot verifies the snapshot file and hands its body to
// Options.Restore. Damage, in the file or found by Restore, wraps
// ErrCorrupt; the caller may then try an older snapshot.
func (l *Log) restoreSnapshot(name string, index uint64) error {
	bodyLen, err := l.verifySnapshot(name, index)
	if err != nil {
		return err
	}
	f, err := l.fs.Open(name)
	if err != nil {
		return fmt.Errorf("wal: open %s: %w", name, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, snapWriteBufBytes)
	if _, err := br.Discard(snapHeaderSize); err != nil {
		return fmt.Errorf("wal: read %s: %w", name, err)
	}
	if err := l.opts.Restore(io.LimitReader(br, bodyLen)); err != nil {
		// The checksum matched, so the file holds what was written: a body
		// its own decoder rejects is damage all the same, and an older
		// snapshot may do.
		return fmt.Errorf("%w: %s: restoring the body (which starts at offset %d): %w", ErrCorrupt, name, snapHeaderSize, err)
	}
	return nil
}
