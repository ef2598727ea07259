package group

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The data groups of a cluster of several are listed in the meta group's
// metadata, under GroupSetMeta, so that every node agrees on which groups
// exist as groups are added and removed while the cluster runs (kvs groups
// add and remove). Its value is a GroupSet's encoding (JSON):
//
//	{"version":2,"made":2,"last":3,"live":[1,2,3],"created":{"3":[{"id":"n1","addr":"127.0.0.1:7001"},...]}}
//
// version counts the changes (from 1; each Add or Remove adds one); made
// is the number of groups the cluster was made with; last
// is the highest id ever given, so an id is never given twice, even after
// its group was removed; live are the groups that exist, in id order;
// created names, for each live group made while the cluster ran, the
// voters it was bootstrapped with (Placement at its creation, with their
// Raft addresses): every one of them bootstraps its replica with exactly
// that configuration, as hashicorp/raft allows (Bootstraps).
//
// A cluster made with n data groups holds no set until its first change:
// DefaultGroupSet(n) stands for it, groups 1 to n (version 0). Values are
// written by compare-and-set (fsm.OpMetaCAS) from the value read, so two
// changes made at once do not both land.

// GroupSetMeta is the meta group's metadata name that holds the set.
const GroupSetMeta = "groups"

// MaxGroupID is the highest id a data group can have: the slot map keeps
// a slot's owner in 16 bits.
const MaxGroupID = 1<<16 - 1

// ErrBadGroupSet is returned for a group set value that is not well
// formed, and for a change the set cannot take; errors wrap it with what
// is wrong.
var ErrBadGroupSet = errors.New("group: bad group set")

// A Peer is a voter of a data group's initial configuration.
type Peer struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
}

// GroupSet is a version of the list of a cluster's data groups. A GroupSet
// is a value: its methods never change it.
type GroupSet struct {
	Version uint64 `json:"version"`
	// Made is the number of data groups the cluster was made with (groups
	// 1 to Made, and the slot map's first version): what a node restored
	// from a backup of the cluster starts from.
	Made    int               `json:"made,omitempty"`
	Last    uint32            `json:"last"`
	Live    []uint32          `json:"live"`
	Created map[string][]Peer `json:"created,omitempty"`
}

// DefaultGroupSet is the set of a cluster made with n data groups before
// any change: groups 1 to n, version 0.
func DefaultGroupSet(n int) GroupSet {
	s := GroupSet{Made: n, Last: uint32(n)}
	for id := 1; id <= n; id++ {
		s.Live = append(s.Live, uint32(id))
	}
	return s
}

// Has reports whether data group id is live.
func (s GroupSet) Has(id uint32) bool {
	_, ok := slices.BinarySearch(s.Live, id)
	return ok
}

// Removed reports whether data group id existed and was removed: it was
// given (id <= Last) and is not live. An id past Last is one this view of
// the set has not heard of yet (a replica of the meta group behind), not
// a removed one.
func (s GroupSet) Removed(id uint32) bool { return id >= 1 && id <= s.Last && !s.Has(id) }

// InitialVoters returns the voters data group id was created with while
// the cluster ran, nil for a group made with the cluster.
func (s GroupSet) InitialVoters(id uint32) []Peer {
	return s.Created[strconv.FormatUint(uint64(id), 10)]
}

// Bootstraps reports whether node bootstraps its replica of data group id
// (the bootstrap rule): the group is live, was created while the cluster
// ran with node among its initial voters, this node holds no state of it
// (hasState false), and the group's leader has not yet published a
// membership (published false). Once one is published the group runs,
// and a replica opened since is an empty one its leader adds.
func (s GroupSet) Bootstraps(id uint32, node string, hasState, published bool) bool {
	if hasState || published || !s.Has(id) {
		return false
	}
	return slices.ContainsFunc(s.InitialVoters(id), func(p Peer) bool { return p.ID == node })
}

// Add returns the next version of the set with n new groups, their ids
// the next unused, each created with voters (its placement, one list a
// group, in order), and the new ids.
func (s GroupSet) Add(voters [][]Peer) (GroupSet, []uint32, error) {
	n := len(voters)
	switch {
	case n < 1:
		return GroupSet{}, nil, fmt.Errorf("%w: no group to add", ErrBadGroupSet)
	case len(s.Live)+n > MaxGroups:
		return GroupSet{}, nil, fmt.Errorf("%w: %d groups and %d more is past the most, %d", ErrBadGroupSet, len(s.Live), n, MaxGroups)
	case int(s.Last)+n > MaxGroupID:
		return GroupSet{}, nil, fmt.Errorf("%w: group ids would pass %d", ErrBadGroupSet, MaxGroupID)
	}
	next := s.clone()
	next.Version++
	var ids []uint32
	for _, vs := range voters {
		if len(vs) == 0 {
			return GroupSet{}, nil, fmt.Errorf("%w: a new group needs voters", ErrBadGroupSet)
		}
		next.Last++
		ids = append(ids, next.Last)
		next.Live = append(next.Live, next.Last)
		if next.Created == nil {
			next.Created = map[string][]Peer{}
		}
		vs = slices.Clone(vs)
		slices.SortFunc(vs, func(a, b Peer) int { return strings.Compare(a.ID, b.ID) })
		next.Created[strconv.FormatUint(uint64(next.Last), 10)] = vs
	}
	return next, ids, nil
}

// Remove returns the next version of the set without data group id. It
// refuses an id that is not live and the last live group; whether the
// group still owns slots is the caller's to check.
func (s GroupSet) Remove(id uint32) (GroupSet, error) {
	switch {
	case !s.Has(id):
		return GroupSet{}, fmt.Errorf("%w: no data group %d", ErrBadGroupSet, id)
	case len(s.Live) == 1:
		return GroupSet{}, fmt.Errorf("%w: group %d is the last data group", ErrBadGroupSet, id)
	}
	next := s.clone()
	next.Version++
	next.Live = slices.DeleteFunc(next.Live, func(g uint32) bool { return g == id })
	delete(next.Created, strconv.FormatUint(uint64(id), 10))
	if len(next.Created) == 0 {
		next.Created = nil
	}
	return next, nil
}

func (s GroupSet) clone() GroupSet {
	c := s
	c.Live = slices.Clone(s.Live)
	if s.Created != nil {
		c.Created = make(map[string][]Peer, len(s.Created))
		for k, v := range s.Created {
			c.Created[k] = slices.Clone(v)
		}
	}
	return c
}

// Encode is the set as the meta group holds it. encoding/json writes a
// map's keys sorted, so equal sets encode alike.
func (s GroupSet) Encode() string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // numbers and strings always encode
	}
	return string(b)
}

// ParseGroupSet reads a set Encode wrote, checking it: a version from 1,
// live ids from 1 to last in increasing order, at most MaxGroups of them
// and last at most MaxGroupID, and initial voters only of live groups.
func ParseGroupSet(v string) (GroupSet, error) {
	var s GroupSet
	bad := func(format string, args ...any) (GroupSet, error) {
		return GroupSet{}, fmt.Errorf("%w: %q: %s", ErrBadGroupSet, v, fmt.Sprintf(format, args...))
	}
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return bad("%v", err)
	}
	switch {
	case s.Version == 0:
		return bad("version 0")
	case len(s.Live) == 0:
		return bad("no live group")
	case len(s.Live) > MaxGroups:
		return bad("%d live groups, more than %d", len(s.Live), MaxGroups)
	case s.Last > MaxGroupID:
		return bad("last id %d past %d", s.Last, MaxGroupID)
	case s.Made < 0 || s.Made > MaxGroups || uint32(s.Made) > s.Last:
		return bad("made with %d groups", s.Made)
	}
	for i, id := range s.Live {
		switch {
		case id == 0 || id > s.Last:
			return bad("live group %d not within 1-%d", id, s.Last)
		case i > 0 && id <= s.Live[i-1]:
			return bad("live groups out of order or repeated at %d", id)
		}
	}
	for k, vs := range s.Created {
		id, err := canonicalUint(k)
		if err != nil || id > MaxGroupID || !s.Has(uint32(id)) {
			return bad("initial voters of %q, not a live group", k)
		}
		if len(vs) == 0 {
			return bad("group %s created without voters", k)
		}
	}
	return s, nil
}
