package backup

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// A backup of a cluster of several groups (FlagGroups) holds every
// group's snapshot, each at its own index: its body is one part per group,
// in group order,
//
//	part:  group id (u32)  index (u64)  frame* end
//	frame: length (u32, > 0)  that many bytes of the group's fsm snapshot
//	end:   length 0 (u32)
//
// little-endian, the frames being the snapshot's own writes, so that a
// part is written as the snapshot streams, without knowing its length
// first. The file's checksum covers the parts like any body. The header's
// index is the first part's: group 0's in a backup of every group, whether
// one node wrote it or it was assembled from several (Assembler).

// FlagGroups marks a backup of a cluster of several groups.
const FlagGroups byte = 2

// WritePart writes group id's part: its index, then what write writes.
func WritePart(w io.Writer, id uint32, index uint64, write func(io.Writer) error) error {
	hdr := binary.LittleEndian.AppendUint32(nil, id)
	hdr = binary.LittleEndian.AppendUint64(hdr, index)
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	if err := write(frameWriter{w}); err != nil {
		return err
	}
	_, err := w.Write([]byte{0, 0, 0, 0})
	return err
}

// frameWriter frames each write as one frame.
type frameWriter struct{ w io.Writer }

func (fw frameWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), 1<<30)]
		if _, err := fw.w.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(chunk)))); err != nil {
			return n, err
		}
		m, err := fw.w.Write(chunk)
		n += m
		if err != nil {
			return n, err
		}
		p = p[len(chunk):]
	}
	return n, nil
}

// ReadParts reads the parts of a FlagGroups body from r, calling part with
// each one's group id, index and snapshot bytes; part may leave some of
// them unread. Errors about the body's shape wrap ErrCorrupt.
func ReadParts(r io.Reader, part func(id uint32, index uint64, snap io.Reader) error) error {
	br := bufio.NewReader(r)
	for n := 0; ; n++ {
		var hdr [12]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if err == io.EOF && n > 0 {
				return nil
			}
			return fmt.Errorf("%w: part %d: %v", ErrCorrupt, n, readShort(err))
		}
		fr := &frameReader{r: br}
		if err := part(binary.LittleEndian.Uint32(hdr[:4]), binary.LittleEndian.Uint64(hdr[4:]), fr); err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, fr); err != nil {
			return fmt.Errorf("%w: part %d: %v", ErrCorrupt, n, err)
		}
	}
}

// frameReader reads one part's frames, up to its end.
type frameReader struct {
	r    *bufio.Reader
	left uint32 // bytes left in the current frame
	done bool
}

func (fr *frameReader) Read(p []byte) (int, error) {
	for fr.left == 0 {
		if fr.done {
			return 0, io.EOF
		}
		var b [4]byte
		if _, err := io.ReadFull(fr.r, b[:]); err != nil {
			return 0, readShort(err)
		}
		fr.left = binary.LittleEndian.Uint32(b[:])
		fr.done = fr.left == 0
	}
	n, err := fr.r.Read(p[:min(len(p), int(fr.left))])
	fr.left -= uint32(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func readShort(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
