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
	return size, nil
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
		return 0, fmt.Errorf("%w: %s: snapshot of %d bytes is too short", ErrCorrupt, name, size)
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
		return 0, fmt.Errorf("%w: %s at offset %d: snapshot checksum mismatch", ErrCorrupt, name, size-4)
	}
	return bodyLen, nil
}

// loadSnapshot restores the newest valid snapshot and returns the index it
// covers, or 0 if there is none. An invalid snapshot is skipped with a
// warning: an older one may still do, and replay reports a gap if not.
func (l *Log) loadSnapshot(snaps []uint64) (uint64, error) {
	for i := len(snaps) - 1; i >= 0; i-- {
		index := snaps[i]
		name := l.path(snapshotName(index))
		bodyLen, err := l.verifySnapshot(name, index)
		if err != nil {
			l.logger.Warn("wal: skipping invalid snapshot", "file", name, "err", err)
			continue
		}
		if l.opts.Restore == nil {
			return 0, fmt.Errorf("wal: %s exists but Options.Restore is nil", name)
		}
		f, err := l.fs.Open(name)
		if err != nil {
			return 0, fmt.Errorf("wal: open %s: %w", name, err)
		}
		br := bufio.NewReaderSize(f, snapWriteBufBytes)
		_, err = br.Discard(snapHeaderSize)
		if err == nil {
			err = l.opts.Restore(io.LimitReader(br, bodyLen))
		}
		f.Close()
		if err != nil {
			return 0, fmt.Errorf("wal: restore %s: %w", name, err)
		}
		l.logger.Info("wal: restored snapshot", "file", name, "index", index, "bytes", bodyLen)
		return index, nil
	}
	return 0, nil
}
