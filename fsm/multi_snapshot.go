package fsm

import (
	"encoding/binary"
	"fmt"
)

// The versions section of snapshot version 4 (snapshot.go): what WATCH
// compares, kept so that every replica, whether it applied the log or
// restored a snapshot, decides an EXEC the same way.

// appendVersions appends v as the snapshot's versions section.
func appendVersions(dst []byte, v *versions) []byte {
	dst = binary.AppendUvarint(dst, v.now)
	dst = binary.AppendUvarint(dst, v.flushed)
	n := 0
	if v.gone != nil {
		for _, g := range v.gone {
			if g != 0 {
				n++
			}
		}
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	if n > 0 {
		for b, g := range v.gone {
			if g != 0 {
				dst = binary.AppendUvarint(dst, uint64(b))
				dst = binary.AppendUvarint(dst, g)
			}
		}
	}
	return dst
}

// versions reads the versions section, validating it: nothing later than
// the counter, buckets in range and ascending.
func (s *snapReader) versions() versions {
	var v versions
	v.now = s.uvarint()
	v.flushed = s.uvarint()
	n := s.uvarint()
	if s.err == nil && (v.flushed > v.now || n > goneBuckets) {
		s.fail(fmt.Errorf("%w: snapshot versions: flushed %d, counter %d, %d deleted buckets", ErrCorrupt, v.flushed, v.now, n))
	}
	prev := -1
	for i := uint64(0); i < n && s.err == nil; i++ {
		b, g := s.uvarint(), s.uvarint()
		switch {
		case s.err != nil:
		case b >= goneBuckets || int(b) <= prev || g == 0 || g > v.now:
			s.fail(fmt.Errorf("%w: snapshot versions: deleted bucket %d (after %d) at version %d, counter %d", ErrCorrupt, b, prev, g, v.now))
		default:
			if v.gone == nil {
				v.gone = new([goneBuckets]uint64)
			}
			v.gone[b] = g
			prev = int(b)
		}
	}
	return v
}

// itemVersion reads a record's version.
func (s *snapReader) itemVersion() uint64 {
	ver := s.uvarint()
	if s.err == nil && ver > versionMask {
		s.fail(fmt.Errorf("%w: item version %d exceeds 48 bits", ErrCorrupt, ver))
	}
	return ver
}
