// Package backup is the format of a kvs backup file: what `kvs backup`
// writes, a node's KVS.BACKUP streams and `kvs restore` reads. It imports
// no package of kvs's; the body is the fsm's snapshot, opaque here.
//
// # Format
//
//	file    = header body trailer
//	header  = magic:"KVSBACKP" version:uint32 mode:byte flags:byte reserved:2 bytes
//	          index:uint64 created:int64                                   (32 bytes)
//	body    = the fsm's snapshot bytes (its own versioned format)
//	trailer = bodylen:uint64 crc:uint32                                    (12 bytes)
//
// Integers are little-endian. index is the node's applied index when the
// snapshot was taken (the wal's or raft's, 0 in memory mode), created its
// clock then in Unix nanoseconds. crc is CRC-32C (Castagnoli) over every
// byte before it, header, body and bodylen alike, so a file damaged
// anywhere, or cut anywhere, fails Verify. The trailer comes last because
// a node streams the body as it writes it, without knowing its length
// beforehand.
//
// Version 1 is the only version; a reader refuses others by name.
package backup

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"time"
)

const (
	// Magic opens every backup file.
	Magic = "KVSBACKP"
	// Version is the format version written.
	Version = 1
	// HeaderSize and TrailerSize are the fixed parts around the body.
	HeaderSize  = 32
	TrailerSize = 12
)

// Mode is the mode of the node a backup was taken from.
type Mode byte

const (
	ModeMemory  Mode = 1
	ModeDurable Mode = 2
	ModeCluster Mode = 3
)

func (m Mode) String() string {
	switch m {
	case ModeMemory:
		return "memory"
	case ModeDurable:
		return "durable"
	case ModeCluster:
		return "cluster"
	}
	return fmt.Sprintf("mode(%d)", byte(m))
}

// FlagUnsynced marks a backup of a cluster follower that could not confirm
// with a leader that it had applied every acknowledged write (no leader
// reachable): it holds what that node had applied, which may lag.
const FlagUnsynced byte = 1

// Header is what a backup says about itself.
type Header struct {
	Mode    Mode
	Flags   byte
	Index   uint64    // the node's applied index at the snapshot
	Created time.Time // the node's clock at the snapshot
}

// ErrCorrupt is wrapped by every error about a damaged, truncated or
// unknown file; the error says what and at which offset.
var ErrCorrupt = errors.New("backup: damaged file")

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func (h Header) encode() []byte {
	b := make([]byte, HeaderSize)
	copy(b, Magic)
	binary.LittleEndian.PutUint32(b[8:], Version)
	b[12] = byte(h.Mode)
	b[13] = h.Flags
	binary.LittleEndian.PutUint64(b[16:], h.Index)
	binary.LittleEndian.PutUint64(b[24:], uint64(h.Created.UnixNano()))
	return b
}

func decodeHeader(b []byte) (Header, error) {
	if string(b[:8]) != Magic {
		return Header{}, fmt.Errorf("%w: at offset 0: not a kvs backup (bad magic %q)", ErrCorrupt, b[:8])
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != Version {
		return Header{}, fmt.Errorf("%w: at offset 8: unknown format version %d (this kvs reads version %d)", ErrCorrupt, v, Version)
	}
	m := Mode(b[12])
	if m < ModeMemory || m > ModeCluster {
		return Header{}, fmt.Errorf("%w: at offset 12: unknown mode %d", ErrCorrupt, b[12])
	}
	return Header{
		Mode:    m,
		Flags:   b[13],
		Index:   binary.LittleEndian.Uint64(b[16:]),
		Created: time.Unix(0, int64(binary.LittleEndian.Uint64(b[24:]))),
	}, nil
}

// Writer writes one backup: the header at once, then the body through
// Write, then the trailer on Close. It does not close w.
type Writer struct {
	w   io.Writer
	crc hash.Hash32
	n   uint64 // body bytes
	err error  // sticky
}

// NewWriter writes h to w and returns the writer for the body.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	bw := &Writer{w: w, crc: crc32.New(crcTable)}
	b := h.encode()
	bw.crc.Write(b)
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	return bw, nil
}

// Write adds p to the body.
func (bw *Writer) Write(p []byte) (int, error) {
	if bw.err != nil {
		return 0, bw.err
	}
	n, err := bw.w.Write(p)
	bw.crc.Write(p[:n])
	bw.n += uint64(n)
	bw.err = err
	return n, err
}

// Close writes the trailer.
func (bw *Writer) Close() error {
	if bw.err != nil {
		return bw.err
	}
	t := binary.LittleEndian.AppendUint64(make([]byte, 0, TrailerSize), bw.n)
	bw.crc.Write(t)
	t = binary.LittleEndian.AppendUint32(t, bw.crc.Sum32())
	_, bw.err = bw.w.Write(t)
	if bw.err == nil {
		bw.err = errors.New("backup: writer closed")
		return nil
	}
	return bw.err
}

// Verify reads a whole backup of size bytes from r and checks its
// header, length and checksum; it returns the header and the body's
// offset and length. Errors about the file's content wrap ErrCorrupt.
func Verify(r io.Reader, size int64) (h Header, bodyOff, bodyLen int64, err error) {
	if size < HeaderSize+TrailerSize {
		return Header{}, 0, 0, fmt.Errorf("%w: %d bytes is shorter than a backup's header and trailer (%d): truncated", ErrCorrupt, size, HeaderSize+TrailerSize)
	}
	br := bufio.NewReaderSize(r, 1<<20)
	hb := make([]byte, HeaderSize)
	if _, err := io.ReadFull(br, hb); err != nil {
		return Header{}, 0, 0, readErr(err, 0)
	}
	if h, err = decodeHeader(hb); err != nil {
		return Header{}, 0, 0, err
	}
	crc := crc32.New(crcTable)
	crc.Write(hb)
	bodyLen = size - HeaderSize - TrailerSize
	if _, err := io.CopyN(crc, br, bodyLen); err != nil {
		return Header{}, 0, 0, readErr(err, HeaderSize)
	}
	t := make([]byte, TrailerSize)
	if _, err := io.ReadFull(br, t); err != nil {
		return Header{}, 0, 0, readErr(err, size-TrailerSize)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return Header{}, 0, 0, fmt.Errorf("%w: more than the %d bytes expected", ErrCorrupt, size)
	}
	crc.Write(t[:8])
	if n := binary.LittleEndian.Uint64(t); n != uint64(bodyLen) {
		return Header{}, 0, 0, fmt.Errorf("%w: at offset %d: the trailer says the snapshot holds %d bytes, the file holds %d: truncated or damaged",
			ErrCorrupt, size-TrailerSize, n, bodyLen)
	}
	if binary.LittleEndian.Uint32(t[8:]) != crc.Sum32() {
		return Header{}, 0, 0, fmt.Errorf("%w: checksum mismatch: some byte in 0..%d, or the checksum at offset %d, is damaged",
			ErrCorrupt, size-4, size-4)
	}
	return h, HeaderSize, bodyLen, nil
}

func readErr(err error, off int64) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: ends early, reading at offset %d: truncated", ErrCorrupt, off)
	}
	return fmt.Errorf("backup: read at offset %d: %w", off, err)
}
