package wal

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// ErrRepairEmpty is returned by Open when a repair would leave an empty
// log (no usable snapshot, no record kept) in a directory that held data,
// and Options.RepairAllowEmpty is not set. Nothing has been cut then.
var ErrRepairEmpty = errors.New("wal: repair would leave an empty store")

// cutPlan is what a repair removes, worked out before anything is touched,
// so that it can be announced (and, without Repair, reported as what a
// repair would do).
type cutPlan struct {
	files []cutFile     // segment bytes cut, in log order
	snaps []badSnapshot // damaged snapshots set aside
	// first..last are the records lost: not covered by the snapshot kept,
	// and no longer in the log. first > last: none.
	first, last uint64
	// missing is set when records from first on are in no file at all (a
	// segment gone, or the log after a fallback snapshot).
	missing  string
	decoded  uint64              // lost records whose payload could be read
	keys     map[string]struct{} // keys those records touch (Options.RecordKeys)
	named    bool                // Options.RecordKeys is set: keys are known where readable
	empty    bool                // nothing would be left: no snapshot, no record
	lastSeen uint64              // highest record index found in the cut bytes
}

// cutFile is one segment's share of a cut: bytes from off to its end.
type cutFile struct {
	name  string
	off   int64
	bytes int64
}

func (p *cutPlan) records() uint64 {
	if p.last < p.first {
		return 0
	}
	return p.last - p.first + 1
}

// note records a valid record found in bytes that will be cut.
func (l *Log) note(p *cutPlan, index uint64, payload []byte) {
	if index > p.lastSeen {
		p.lastSeen = index
	} else {
		return // a stale duplicate; counted once
	}
	if index < p.first {
		return // covered by the snapshot: not lost
	}
	p.decoded++
	if l.opts.RecordKeys == nil {
		return
	}
	keys, err := l.opts.RecordKeys(payload)
	if err != nil {
		return
	}
	for _, k := range keys {
		p.keys[k] = struct{}{}
	}
}

// scanCut notes every valid record in data[from:], whose records have
// indexes base or later.
func (l *Log) scanCut(p *cutPlan, data []byte, from int, base uint64) {
	for {
		q := findValidRecord(data, from, base)
		if q < 0 {
			return
		}
		index, payload, n, _ := decodeRecord(data[q:])
		l.note(p, index, payload)
		from, base = q+n, index+1
	}
}

// planCut works out what cutting the log at d removes: the rest of the
// damaged segment (all of it when the damage is at its start) and every
// later segment. next is the index replay expected at d, snapIndex the
// snapshot restored.
func (l *Log) planCut(segs []uint64, d *damage, next, snapIndex uint64) (*cutPlan, error) {
	p := &cutPlan{first: max(next, snapIndex+1), keys: map[string]struct{}{}, lastSeen: next - 1, named: l.opts.RecordKeys != nil}
	p.empty = snapIndex == 0 && next <= 1
	for i := d.seg; i < len(segs); i++ {
		name := l.path(segmentName(segs[i]))
		data := d.data
		if i != d.seg || data == nil {
			var err error
			if data, err = l.readFile(name); err != nil {
				return nil, err
			}
		}
		off, base := int64(0), segs[i]
		if i == d.seg {
			off = d.off
			if off > 0 {
				base = next
			} else if segs[i] > next {
				p.missing = fmt.Sprintf("records %d..%d are in no segment", next, segs[i]-1)
			}
		}
		p.files = append(p.files, cutFile{name: name, off: off, bytes: int64(len(data)) - off})
		l.scanCut(p, data, int(off), base)
	}
	// The damaged record itself is lost even when nothing after it reads.
	p.last = max(p.lastSeen, next)
	return p, nil
}

// planFallbackGap is the plan when a fallback snapshot's log ends before
// the damaged newer snapshot: the records after the log's end up to what
// that snapshot covered are in no readable file.
func planFallbackGap(next, snapIndex uint64, bad []badSnapshot) *cutPlan {
	return &cutPlan{
		first: next, last: bad[0].index, snaps: bad, keys: map[string]struct{}{},
		missing: fmt.Sprintf("records %d..%d were only in the damaged snapshot %s", next, bad[0].index, bad[0].name),
		empty:   snapIndex == 0 && next <= 1,
	}
}

// maxKeysNamed bounds the keys an announcement lists.
const maxKeysNamed = 100

// keyList returns the plan's keys, sorted, at most maxKeysNamed of them,
// and how many more there are.
func (p *cutPlan) keyList() (string, int) {
	keys := make([]string, 0, len(p.keys))
	for k := range p.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	more := 0
	if len(keys) > maxKeysNamed {
		keys, more = keys[:maxKeysNamed], len(keys)-maxKeysNamed
	}
	return strings.Join(keys, " "), more
}

// String says what the plan loses in one sentence, for errors.
func (p *cutPlan) String() string {
	n := p.records()
	if n == 0 {
		return "no record the snapshot does not cover"
	}
	s := fmt.Sprintf("%d records (index %d..%d)", n, p.first, p.last)
	unknown := n - min(p.decoded, n)
	if p.named {
		s += fmt.Sprintf(", touching %d keys", len(p.keys))
		if unknown > 0 {
			s += fmt.Sprintf(" and whatever the %d unreadable ones touched", unknown)
		}
	} else if unknown > 0 {
		s += fmt.Sprintf(", %d of them unreadable", unknown)
	}
	if p.empty {
		s += "; nothing would be left"
	}
	return s
}

// announce logs the plan at error level, file by file, then in sum. verb
// is "will cut" or "would cut".
func (l *Log) announce(p *cutPlan, verb string) {
	for _, f := range p.files {
		if f.off == 0 {
			l.logger.Error("wal: repair "+verb+" a whole segment (renamed to .broken)", "file", f.name, "bytes", f.bytes)
		} else {
			l.logger.Error("wal: repair "+verb+" the end of a segment (copied to .broken)", "file", f.name,
				"from_offset", f.off, "to_offset", f.off+f.bytes, "bytes", f.bytes)
		}
	}
	for _, s := range p.snaps {
		l.logger.Error("wal: repair "+verb+" a damaged snapshot (renamed to .broken)", "file", s.name, "index", s.index)
	}
	keys, more := p.keyList()
	args := []any{"records", p.records(), "unreadable_records", p.records() - min(p.decoded, p.records())}
	if p.named {
		args = append(args, "keys_count", len(p.keys), "keys", keys)
	}
	if p.records() > 0 {
		args = append(args, "first_index", p.first, "last_index", p.last)
	}
	if more > 0 {
		args = append(args, "keys_not_listed", more)
	}
	if p.missing != "" {
		args = append(args, "missing", p.missing)
	}
	if p.empty {
		args = append(args, "leaves", "nothing: no snapshot and no record kept")
	}
	l.logger.Error("wal: repair "+verb+" these records", args...)
}

// startRepair says what repairing the corruption cerr cuts (plan): without
// Options.Repair it returns the refusal naming it; with Repair it returns
// nil once the repair may go ahead (see checkEmpty).
func (l *Log) startRepair(plan *cutPlan, cerr error) error {
	if !l.opts.Repair {
		l.announce(plan, "would cut")
		return fmt.Errorf("%w; a repair would cut %s", cerr, plan)
	}
	l.logger.Error("wal: repairing corrupt log", "err", cerr)
	l.announce(plan, "will cut")
	return l.checkEmpty(plan, cerr)
}

// checkEmpty refuses a repair that would leave nothing, unless allowed;
// cerr is the corruption being repaired.
func (l *Log) checkEmpty(p *cutPlan, cerr error) error {
	if p.empty && !l.opts.RepairAllowEmpty {
		return fmt.Errorf("%w: it would cut %s from %s, which held data; nothing has been cut: %w",
			ErrRepairEmpty, p, l.opts.Dir, cerr)
	}
	return nil
}

// setAsideSnapshots renames damaged snapshots to .broken as part of a
// repair, so that no later start tries them.
func (l *Log) setAsideSnapshots(bad []badSnapshot) error {
	for _, s := range bad {
		b, err := l.brokenName(s.name)
		if err != nil {
			return err
		}
		if err := l.fs.Rename(s.name, b); err != nil {
			return fmt.Errorf("wal: repair: %w", err)
		}
		l.logger.Warn("wal: repair set a damaged snapshot aside", "file", s.name, "to", filepath.Base(b))
	}
	return nil
}
