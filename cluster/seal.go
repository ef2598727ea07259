package cluster

import (
	"encoding/binary"
	"hash/crc32"
)

// Every command entry kvs hands raft is sealed with a CRC-32C of its bytes:
//
//	sealed = crc:uint32 little-endian || entry
//
// raft-boltdb keeps no checksums (bolt checks only its meta pages), so a bit
// flipped on disk in a log entry would otherwise reach the FSM as a
// different, valid-looking write. The FSM wrapper checks the seal before it
// applies an entry, on the live path and when a restarted node replays its
// log, and stops the node on a mismatch (trackingFSM.unseal).

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// seal returns a new slice holding entry's checksum and entry.
func seal(entry []byte) []byte {
	out := make([]byte, 4+len(entry))
	binary.LittleEndian.PutUint32(out, crc32.Checksum(entry, castagnoli))
	copy(out[4:], entry)
	return out
}

// unsealEntry returns the entry inside a sealed one, and whether its
// checksum matched.
func unsealEntry(sealed []byte) ([]byte, bool) {
	if len(sealed) < 4 {
		return nil, false
	}
	entry := sealed[4:]
	return entry, binary.LittleEndian.Uint32(sealed) == crc32.Checksum(entry, castagnoli)
}
