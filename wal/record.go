package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

const (
	// headerSize is crc u32 + len u32 + index u64.
	headerSize = 16
	// MaxRecordSize bounds a record's payload. It keeps a corrupt length
	// from asking recovery for gigabytes, and is above Redis's 512 MB
	// proto-max-bulk-len.
	MaxRecordSize = 1 << 30
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Why a record failed to decode. Recovery turns these into ErrCorrupt with
// file and offset, or into a torn-tail truncation.
var (
	errShortHeader  = errors.New("record header cut short")
	errShortPayload = errors.New("record payload cut short")
	errBadLength    = errors.New("record length out of range")
	errChecksum     = errors.New("record checksum mismatch")
)

// payloadCRC is the first half of a record's checksum, computable before the
// index is known.
func payloadCRC(payload []byte) uint32 {
	return crc32.Checksum(payload, crcTable)
}

// appendRecord appends the framed record to dst; pcrc is payloadCRC(payload).
func appendRecord(dst []byte, index uint64, payload []byte, pcrc uint32) []byte {
	// The header is built in place in dst: a local array would escape
	// through crc32.Update and cost an allocation per record.
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.LittleEndian.AppendUint64(dst, index)
	binary.LittleEndian.PutUint32(dst[start:], crc32.Update(pcrc, crcTable, dst[start+4:]))
	return append(dst, payload...)
}

// decodeRecord decodes the record at the start of b. It returns the payload
// (aliasing b) and the record's total size n.
func decodeRecord(b []byte) (index uint64, payload []byte, n int, err error) {
	if len(b) < headerSize {
		return 0, nil, 0, errShortHeader
	}
	length := binary.LittleEndian.Uint32(b[4:])
	if length > MaxRecordSize {
		return 0, nil, 0, fmt.Errorf("%w: %d", errBadLength, length)
	}
	n = headerSize + int(length)
	if len(b) < n {
		return 0, nil, 0, errShortPayload
	}
	payload = b[headerSize:n:n]
	want := binary.LittleEndian.Uint32(b[0:])
	if got := crc32.Update(payloadCRC(payload), crcTable, b[4:headerSize]); got != want {
		return 0, nil, 0, errChecksum
	}
	return binary.LittleEndian.Uint64(b[8:]), payload, n, nil
}
