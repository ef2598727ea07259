package backup

import (
	"fmt"
	"io"
)

// A backup of a cluster in which no node holds every group is put
// together from several: one FlagGroups backup per source, each holding
// some of the groups, their parts copied in group order into one file
// with a header of its own and a checksum over all of it. Each source is
// verified whole before its parts are taken.

// MergeHeaders is the header of a backup assembled from sources whose
// headers are hs, the first being the source of group 0: a cluster
// backup of several groups (FlagGroups), at group 0's index as a backup
// of one node holding every group would be, unsynced if any source is,
// and taken when the first of them was taken (every write acknowledged
// before then is in it).
func MergeHeaders(hs []Header) Header {
	h := Header{Mode: ModeCluster, Flags: FlagGroups}
	for i, s := range hs {
		h.Flags |= s.Flags & FlagUnsynced
		if i == 0 {
			h.Index, h.Created = s.Index, s.Created
		} else if s.Created.Before(h.Created) {
			h.Created = s.Created
		}
	}
	return h
}

// Assembler writes one FlagGroups backup from the parts of others, which
// must bring groups 0, 1, 2 ... each once and in that order, as kvs
// restore reads them.
type Assembler struct {
	w     *Writer
	next  uint32 // the lowest group whose part may come next
	parts int    // the parts added
}

// NewAssembler writes h (MergeHeaders) to w and returns the assembler of
// the body.
func NewAssembler(w io.Writer, h Header) (*Assembler, error) {
	bw, err := NewWriter(w, h)
	if err != nil {
		return nil, err
	}
	return &Assembler{w: bw}, nil
}

// Add copies the parts of a verified FlagGroups backup, of header h and
// body body. A part of another group than the next one is refused with
// an error wrapping ErrCorrupt, and the assembled file is then unusable.
func (a *Assembler) Add(h Header, body io.Reader) error {
	if h.Flags&FlagGroups == 0 {
		return fmt.Errorf("%w: a backup of one group where the parts of a backup of several belong", ErrCorrupt)
	}
	return ReadParts(body, func(id uint32, index uint64, snap io.Reader) error {
		// In id order from 0; ids may skip groups that were removed
		// from the cluster.
		if id < a.next || a.parts == 0 && id != 0 {
			return fmt.Errorf("%w: group %d's part where group %d's or a later one belongs", ErrCorrupt, id, a.next)
		}
		a.next = id + 1
		a.parts++
		return WritePart(a.w, id, index, func(w io.Writer) error {
			_, err := io.Copy(w, snap)
			return err
		})
	})
}

// Close writes the trailer; a backup of fewer than two groups is refused,
// as kvs restore would refuse it.
func (a *Assembler) Close() error {
	if a.parts < 2 {
		return fmt.Errorf("%w: %d groups in a backup of several", ErrCorrupt, a.parts)
	}
	return a.w.Close()
}
