package group

import (
	"errors"
	"fmt"
	"strconv"
)

// A cluster's level is the level of replicated entries (fsm.ApplyLevel)
// that every node of it can apply, as etcd's cluster version is. Each node
// publishes its own level in the meta group's metadata under
// NodeLevelMeta(id), with OpMetaSet, which every kvs applies; a kvs from
// before levels publishes none, which counts as 0. Once every member of the
// meta group (voters and non-voters) has published at least level L, and
// says it runs a kvs of level L when asked (a node started again on an
// older kvs keeps what its newer one published), the meta group's leader
// records L under ClusterLevelMeta. The recorded level never goes down:
// from then on the cluster may hold entries of level L, so a node that
// cannot apply them is refused when it asks to join, and a node proposes
// an entry of level L only once L is recorded. Levels reads both; its
// Allows and Admits are the one check of each.

// ClusterLevelMeta is the metadata name of the cluster's level.
const ClusterLevelMeta = "cluster/level"

// NodeLevelMeta is the metadata name under which node id publishes its
// level.
func NodeLevelMeta(id string) string { return "node/" + id + "/level" }

// ErrLevel is the error of an entry proposed above the cluster's level,
// and of a node that asks to join a cluster whose level is above its own.
var ErrLevel = errors.New("apply level")

// Levels reads the levels in a meta group's metadata.
type Levels struct {
	// Meta looks a metadata name up (fsm.Store.Meta of the meta group).
	Meta func(name string) (string, bool)
}

// level parses a stored level; absent or unreadable is 0, the level of a
// kvs that stores none.
func (l Levels) level(name string) int {
	v, ok := l.Meta(name)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Node is the level node id has published, 0 when it has published none.
func (l Levels) Node(id string) int { return l.level(NodeLevelMeta(id)) }

// Cluster is the cluster's recorded level.
func (l Levels) Cluster() int { return l.level(ClusterLevelMeta) }

// Lowest is the lowest level the nodes ids have published: the level the
// cluster may record once they are all of its meta group's members. 0 for
// no ids.
func (l Levels) Lowest(ids []string) int {
	lowest := -1
	for _, id := range ids {
		if n := l.Node(id); lowest < 0 || n < lowest {
			lowest = n
		}
	}
	return max(lowest, 0)
}

// Allows returns nil when the cluster's level lets a node propose an entry
// of level need, and an error wrapping ErrLevel when it does not yet.
func (l Levels) Allows(need int) error {
	if c := l.Cluster(); c < need {
		return fmt.Errorf("%w: the entry needs level %d and the cluster's level is %d until every node runs a kvs of level %d or later", ErrLevel, need, c, need)
	}
	return nil
}

// Admits returns nil when node id, of level level, may join the cluster,
// and an error wrapping ErrLevel when the cluster may already hold entries
// that the node could not apply.
func (l Levels) Admits(id string, level int) error {
	if c := l.Cluster(); level < c {
		return fmt.Errorf("%w: node %s applies replicated entries up to level %d and the cluster's level is %d: start it with a kvs of level %d or later (kvs version says its level)", ErrLevel, id, level, c, c)
	}
	return nil
}
