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
	dst = appendBuckets(dst, &v.gone)
	return appendBuckets(dst, &v.written)
}

// appendBuckets appends the non-zero entries of bs: their count, then
// bucket and version of each in ascending bucket order.
func appendBuckets(dst []byte, bs *buckets) []byte {
	n := 0
	if bs.t != nil {
		for _, g := range bs.t {
			if g != 0 {
				n++
			}
		}
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	if n > 0 {
		for b, g := range bs.t {
			if g != 0 {
				dst = binary.AppendUvarint(dst, uint64(b))
				dst = binary.AppendUvarint(dst, g)
			}
		}
	}
	return dst
}

// versions reads the versions section, validating it: nothing later than
// the counter, nothing deleted later than written, buckets in range and
// ascending.
func (s *snapReader) versions() versions {
	var v versions
	v.now = s.uvarint()
	v.gone = s.buckets("deleted", v.now)
	v.written = s.buckets("written", v.now)
	if s.err == nil && v.gone.t != nil {
		for b, g := range v.gone.t {
			w := uint64(0)
			if v.written.t != nil {
				w = v.written.t[b]
			}
			if g > w {
				s.fail(fmt.Errorf("%w: snapshot versions: bucket %d deleted at %d, written at %d", ErrCorrupt, b, g, w))
				break
			}
		}
	}
	return v
}

func (s *snapReader) buckets(what string, now uint64) buckets {
	var bs buckets
	n := s.uvarint()
	if s.err == nil && n > numBuckets {
		s.fail(fmt.Errorf("%w: snapshot versions: %d %s buckets", ErrCorrupt, n, what))
	}
	prev := -1
	for i := uint64(0); i < n && s.err == nil; i++ {
		b, g := s.uvarint(), s.uvarint()
		switch {
		case s.err != nil:
		case b >= numBuckets || int(b) <= prev || g == 0 || g > now:
			s.fail(fmt.Errorf("%w: snapshot versions: %s bucket %d (after %d) at version %d, counter %d", ErrCorrupt, what, b, prev, g, now))
		default:
			if bs.t == nil {
				bs.t = new([numBuckets]uint64)
			}
			bs.t[b] = g
			prev = int(b)
		}
	}
	return bs
}

// itemVersion reads a record's version.
func (s *snapReader) itemVersion() uint64 {
	ver := s.uvarint()
	if s.err == nil && ver > versionMask {
		s.fail(fmt.Errorf("%w: item version %d exceeds 48 bits", ErrCorrupt, ver))
	}
	return ver
}
