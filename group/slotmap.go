package group

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"kvs/fsm"
)

// The slot map of a cluster of several data groups is kept in the meta
// group's metadata, under SlotMapMeta, so that every node agrees on which
// group owns each slot and follows it when it changes. Its value is the
// map's version and its runs of slots of one owner, in slot order:
//
//	<version> <first>-<last>:<group>,<first>-<last>:<group>,...
//
// for instance "1 0-5460:1,5461-10922:2,10923-16383:3", the map a cluster
// of three data groups starts with. The runs cover every slot from 0 to
// 16383 once, adjacent runs have different owners, and numbers are
// written in decimal without leading zeros: each map has exactly one
// encoding, so two values are equal exactly when the maps are, which the
// compare-and-set that writes a new version (fsm.OpMetaCAS) relies on.
// The version starts at 1 and each change (Flip) adds one.

// SlotMapMeta is the meta group's metadata name that holds the slot map.
const SlotMapMeta = "slots"

// ErrBadSlotMap is returned for a slot map value, or a change to a map,
// that is not well formed; errors wrap it with what is wrong.
var ErrBadSlotMap = errors.New("group: malformed slot map")

// SlotMap is a version of the slot map of a cluster of groups data groups:
// the data group that owns each of the 16384 slots, by its Raft group id
// (1 to groups when there are several; 0, the only group, when there is
// one). A SlotMap is a value: its methods never change it.
type SlotMap struct {
	version uint64
	groups  int
	// live, when set, are the data groups the map may name (a GroupSet's,
	// ParseSlotMapIn), in id order; nil: 1 to groups (0 for one).
	live   []uint32
	owners []uint16 // by slot
}

// SlotRange is the slots First to Last, both included.
type SlotRange struct{ First, Last int }

// InitialSlotMap is version 1 of the slot map of a cluster of n data
// groups: EvenSlots's split, the data groups numbered from 1 when there
// are several.
func InitialSlotMap(n int) (SlotMap, error) {
	even, err := EvenSlots(n)
	if err != nil {
		return SlotMap{}, err
	}
	m := SlotMap{version: 1, groups: n, owners: make([]uint16, len(even))}
	for s, g := range even {
		m.owners[s] = uint16(g)
		if n > 1 {
			m.owners[s]++
		}
	}
	return m, nil
}

// Version is the map's version, from 1; 0 for the zero SlotMap, which
// maps nothing.
func (m SlotMap) Version() uint64 { return m.version }

// Groups is the number of data groups the map spreads the slots over.
func (m SlotMap) Groups() int { return m.groups }

// Owner returns the Raft group id of the data group that owns slot.
func (m SlotMap) Owner(slot int) uint32 { return uint32(m.owners[slot]) }

// Table returns the owner of each slot, by slot: a copy, for the server's
// router.
func (m SlotMap) Table() []uint16 { return append([]uint16(nil), m.owners...) }

// Equal reports whether m and o are the same version of the same map.
func (m SlotMap) Equal(o SlotMap) bool {
	if m.version != o.version || m.groups != o.groups || !slices.Equal(m.live, o.live) || len(m.owners) != len(o.owners) {
		return false
	}
	for s := range m.owners {
		if m.owners[s] != o.owners[s] {
			return false
		}
	}
	return true
}

// validGroup reports whether g is one of the map's data groups.
func (m SlotMap) validGroup(g uint64) bool {
	if m.live != nil {
		_, ok := slices.BinarySearch(m.live, uint32(min(g, MaxGroupID+1)))
		return ok
	}
	if m.groups == 1 {
		return g == 0
	}
	return g >= 1 && g <= uint64(m.groups)
}

// Flip returns the next version of the map: the slots of ranges owned by
// group to, every other slot as in m. It changes no data: the keys of the
// slots must have reached to's store first (moving slots). The ranges
// must lie within 0 to 16383, each first <= last, and to must be one of
// the map's data groups.
func (m SlotMap) Flip(ranges []SlotRange, to uint32) (SlotMap, error) {
	if m.version == 0 {
		return SlotMap{}, fmt.Errorf("%w: no map to change", ErrBadSlotMap)
	}
	if !m.validGroup(uint64(to)) {
		return SlotMap{}, fmt.Errorf("%w: group %d is not one of the data groups (%s)", ErrBadSlotMap, to, m.groupsText())
	}
	next := SlotMap{version: m.version + 1, groups: m.groups, live: m.live, owners: m.Table()}
	for _, r := range ranges {
		if r.First < 0 || r.Last >= fsm.ClusterSlots || r.First > r.Last {
			return SlotMap{}, fmt.Errorf("%w: slot range %d-%d is not within 0-%d", ErrBadSlotMap, r.First, r.Last, fsm.ClusterSlots-1)
		}
		for s := r.First; s <= r.Last; s++ {
			next.owners[s] = uint16(to)
		}
	}
	return next, nil
}

// String is the map's encoding (see the top of this file), the value the
// meta group keeps.
func (m SlotMap) String() string {
	var b strings.Builder
	b.WriteString(strconv.FormatUint(m.version, 10))
	b.WriteByte(' ')
	for first := 0; first < len(m.owners); {
		last := first
		for last+1 < len(m.owners) && m.owners[last+1] == m.owners[first] {
			last++
		}
		if first > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(first))
		b.WriteByte('-')
		b.WriteString(strconv.Itoa(last))
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(int(m.owners[first])))
		first = last + 1
	}
	return b.String()
}

// ParseSlotMap reads a slot map of a cluster of groups data groups from
// its encoding. It returns an error wrapping ErrBadSlotMap for anything
// but the one encoding of a map: a version of 0, runs that leave a gap,
// overlap, come out of order, run past slot 16383 or repeat the previous
// run's owner, a group that is not one of the data groups, stray
// characters.
func ParseSlotMap(v string, groups int) (SlotMap, error) {
	if groups < 1 || groups > MaxGroups {
		return SlotMap{}, fmt.Errorf("%w: %q: %d data groups, want 1 to %d", ErrBadSlotMap, v, groups, MaxGroups)
	}
	return parseSlotMap(v, SlotMap{groups: groups})
}

// ParseSlotMapIn reads a slot map of a cluster whose data groups are
// set's live ones, as ParseSlotMap does: a run may name only a live group
// (a removed one owns no slot), and Flip of the map it returns moves slots
// only to a live group (a group just added is one).
func ParseSlotMapIn(v string, set GroupSet) (SlotMap, error) {
	if len(set.Live) == 0 {
		return SlotMap{}, fmt.Errorf("%w: %q: no data groups", ErrBadSlotMap, v)
	}
	return parseSlotMap(v, SlotMap{groups: len(set.Live), live: slices.Clone(set.Live)})
}

// groupsText names the data groups the map may name, for errors.
func (m SlotMap) groupsText() string {
	if m.live == nil {
		if m.groups == 1 {
			return "0"
		}
		return "1-" + strconv.Itoa(m.groups)
	}
	parts := make([]string, len(m.live))
	for i, g := range m.live {
		parts[i] = strconv.FormatUint(uint64(g), 10)
	}
	return strings.Join(parts, ",")
}

// parseSlotMap reads v into a map of m's groups.
func parseSlotMap(v string, m SlotMap) (SlotMap, error) {
	bad := func(format string, args ...any) (SlotMap, error) {
		return SlotMap{}, fmt.Errorf("%w: %q: %s", ErrBadSlotMap, v, fmt.Sprintf(format, args...))
	}
	ver, runs, ok := strings.Cut(v, " ")
	if !ok {
		return bad("no version")
	}
	m.owners = make([]uint16, fsm.ClusterSlots)
	var err error
	if m.version, err = canonicalUint(ver); err != nil || m.version == 0 {
		return bad("version %q is not a number from 1", ver)
	}
	next := 0 // the first slot the next run must start at
	prev := uint64(1 << 63)
	for run := range strings.SplitSeq(runs, ",") {
		span, owner, ok := strings.Cut(run, ":")
		firstS, lastS, ok2 := strings.Cut(span, "-")
		if !ok || !ok2 {
			return bad("run %q is not first-last:group", run)
		}
		first, err1 := canonicalUint(firstS)
		last, err2 := canonicalUint(lastS)
		g, err3 := canonicalUint(owner)
		switch {
		case err1 != nil || err2 != nil || err3 != nil:
			return bad("run %q is not first-last:group", run)
		case first != uint64(next):
			return bad("run %q starts at %d, want %d (a gap, an overlap or runs out of order)", run, first, next)
		case last < first || last >= fsm.ClusterSlots:
			return bad("run %q ends outside %d-%d", run, first, fsm.ClusterSlots-1)
		case !m.validGroup(g):
			return bad("run %q names group %d, not one of the data groups (%s)", run, g, m.groupsText())
		case g == prev:
			return bad("run %q has the previous run's group", run)
		}
		for s := first; s <= last; s++ {
			m.owners[s] = uint16(g)
		}
		next, prev = int(last)+1, g
	}
	if next != fsm.ClusterSlots {
		return bad("runs end at slot %d, want %d", next-1, fsm.ClusterSlots-1)
	}
	return m, nil
}

// canonicalUint parses a decimal number written as strconv writes it: no
// sign, no leading zero, no space.
func canonicalUint(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err == nil && strconv.FormatUint(n, 10) != s {
		err = strconv.ErrSyntax
	}
	return n, err
}
