package server

import (
	"strconv"
	"sync/atomic"
	"time"

	"kvs/fsm"
)

// min-replicas-to-write and min-replicas-max-lag: a node refuses writes
// with Redis's NOREPLICAS while fewer than min-replicas-to-write of its
// replicas have been in contact within min-replicas-max-lag seconds
// (Redis's checkGoodReplicasStatus; either parameter 0 turns the check
// off). Its replicas are:
//
//   - in memory and durable mode, none: as a Redis master without
//     replicas, such a node refuses every write once the check is on;
//   - in a cluster, on the leader, the followers that answered its
//     replication or heartbeats within the lag (Cluster.GoodReplicas).
//     Followers forward writes, and the leader decides with its own
//     parameters (runForward), as a Redis replica leaves the check to its
//     master: the parameters are per node, so set them on every node that
//     may lead. In a sharded cluster each write is judged by the replicas
//     of the group it goes to, as each Redis Cluster master counts its own;
//     INFO shows those of the group ROLE describes (router.scriptGroup).
//
// What is refused is what Redis refuses (processCommand, script.c): a
// command Redis flags as a write, a script or function that declares it
// may write (admit.go), an EXEC whose transaction holds one. A script
// that declares no flags runs, and its first call of a write is refused
// with NOREPLICAS (scriptVerifyWriteCommandAllow): the proposer decides
// and marks the script (fsm.FlagScriptNoReplicas), so that every replica
// refuses the same call. Reads, read-only scripts and PUBLISH run.

// minReplicas holds the two parameters, read before each command while
// toWrite is not 0.
type minReplicas struct {
	toWrite atomic.Int64
	maxLag  atomic.Int64 // seconds
}

// defaultMinReplicasMaxLag is min-replicas-max-lag's default in Redis.
const defaultMinReplicasMaxLag = 10

// setMinReplicas makes the parameter p (canonical name) take the value v,
// already checked.
func (s *Server) setMinReplicas(p, v string) {
	n, _ := strconv.ParseInt(v, 10, 64)
	if p == "min-replicas-to-write" {
		s.minReplicas.toWrite.Store(n)
	} else {
		s.minReplicas.maxLag.Store(n)
	}
}

// checkingReplicas reports whether the check is on: both parameters set.
func (s *Server) checkingReplicas() bool {
	return s.minReplicas.toWrite.Load() > 0 && s.minReplicas.maxLag.Load() > 0
}

// goodReplicas is Redis's repl_good_slaves_count for group g: its replicas
// in contact within min-replicas-max-lag. A follower has none of its own,
// nor has a group held elsewhere.
func (s *Server) goodReplicas(g *groupRef) int {
	if g.remote() || g.raft == nil {
		return 0
	}
	return g.raft.GoodReplicas(time.Duration(s.minReplicas.maxLag.Load()) * time.Second)
}

// roleGroup is the group whose replicas INFO and ROLE describe: the home,
// or on a sharded node the group ROLE speaks of.
func (s *Server) roleGroup() *groupRef {
	if s.router.sharded() {
		return s.router.scriptGroup()
	}
	return &s.router.home
}

// addGoodReplicas adds INFO replication's min_slaves_good_slaves, which
// Redis shows while the check is on.
func (s *Server) addGoodReplicas(fs []InfoField) []InfoField {
	if !s.checkingReplicas() {
		return fs
	}
	return append(fs, InfoField{"min_slaves_good_slaves", strconv.Itoa(s.goodReplicas(s.roleGroup()))})
}

// tooFewReplicas reports whether writes to group g are refused for want
// of good replicas: the check is on, and this node decides g's writes
// (not a follower, which forwards them) with fewer good replicas than it
// needs.
func (s *Server) tooFewReplicas(g *groupRef) bool {
	if !s.checkingReplicas() {
		return false
	}
	if !g.leads() {
		return false
	}
	return int64(s.goodReplicas(g)) < s.minReplicas.toWrite.Load()
}

// writeGroup is the group the command being admitted writes to: the one
// routeCommand chose on a sharded node, else the home.
func (c *client) writeGroup() *groupRef {
	if c.s.router.sharded() && c.grp != nil {
		return c.grp
	}
	return &c.s.router.home
}

// forwardedRefusals applies the check to a batch a follower forwarded, as
// admit applies it to a client's commands: refused[i] is the error of the
// commands Redis would refuse (those refused already keep their error),
// and a script that declares no flags is marked to refuse its first write
// (in cmds, in place). any reports whether one was refused. Called only
// while tooFewReplicas.
func (s *Server) forwardedRefusals(cmds []fsm.Command, refused []string) ([]string, bool) {
	any := false
	for i := range cmds {
		if refused != nil && refused[i] != "" {
			any = true
			continue
		}
		e := s.replicaRefusal(&cmds[i])
		if e == "" {
			continue
		}
		if refused == nil {
			refused = make([]string, len(cmds))
		}
		refused[i], any = e, true
	}
	return refused, any
}

// replicaRefusal is the error a forwarded command gets while there are
// too few good replicas, or "", having marked a script that declares no
// flags (within a transaction too).
func (s *Server) replicaRefusal(fc *fsm.Command) string {
	switch s.replicaVerdict(fc) {
	case replicaRefused:
		return errNoReplicas
	case replicaMarked:
		fc.Flags |= fsm.FlagScriptNoReplicas
		return ""
	}
	if fc.Op != fsm.OpExec {
		return ""
	}
	subs, err := fsm.DecodeCommands(fc.Args[1])
	if err != nil {
		return "" // the store's validation refuses the entry
	}
	marked := false
	for i := range subs {
		switch s.replicaVerdict(&subs[i]) {
		case replicaRefused:
			return errExecAbortBecause + errNoReplicas
		case replicaMarked:
			subs[i].Flags |= fsm.FlagScriptNoReplicas
			marked = true
		}
	}
	if marked {
		fc.Args = [][]byte{fc.Args[0], fsm.AppendCommands(nil, subs)}
	}
	return ""
}

type replicaVerdict uint8

const (
	replicaRuns    replicaVerdict = iota // not a write in Redis's sense
	replicaRefused                       // a write: NOREPLICAS
	replicaMarked                        // a script that may write at run time
)

// replicaVerdict judges one command that is not an EXEC as Redis's
// processCommand and scriptPrepareForRun judge the command it stands for.
func (s *Server) replicaVerdict(fc *fsm.Command) replicaVerdict {
	switch fc.Op {
	case fsm.OpEval:
		return s.evalVerdict(fc)
	case fsm.OpFCall:
		// FCALL runs a function, whose flags are always declared: one
		// without no-writes is a write (FCALL of a no-writes function
		// is OpFCallRO). One the node does not have fails anyway.
		if found, _, _ := s.cfg.Store.Function(string(fc.Args[0])); found {
			return replicaRefused
		}
		return replicaRuns
	case fsm.OpExec:
		return replicaRuns // judged by what it holds
	case fsm.OpRestoreRefused:
		// A RESTORE whose TTL or payload was refused is a read to kvs,
		// and a write to Redis, which refuses it before reading a byte.
		return replicaRefused
	}
	if !fc.Op.IsWrite() || notRedisWrites[fc.Op] {
		return replicaRuns
	}
	return replicaRefused
}

// notRedisWrites are the ops that go through the log but stand for no
// command Redis flags as a write: the node's own upkeep (expiry,
// eviction, cluster metadata), the user table (ACL SETUSER, CONFIG SET
// requirepass), the script cache (SCRIPT LOAD, FLUSH), a script's
// PUBLISH, and PFCOUNT's update of a HyperLogLog's cached cardinality.
var notRedisWrites = map[fsm.Op]bool{
	fsm.OpDelExpired: true, fsm.OpEvict: true, fsm.OpMetaSet: true, fsm.OpACLSet: true,
	fsm.OpScriptLoad: true, fsm.OpScriptFlush: true, fsm.OpPublish: true, fsm.OpPFCount: true,
}

// evalVerdict judges a forwarded OpEval: a script that declares flags
// without no-writes is refused, one that declares none is marked.
func (s *Server) evalVerdict(fc *fsm.Command) replicaVerdict {
	if fc.Flags&fsm.FlagScriptNoWrites != 0 {
		return replicaRuns
	}
	body := fc.Args[0]
	if fc.Flags&fsm.FlagScriptSHA != 0 {
		body, _ = s.scriptShebang(body)
	}
	sf, _ := shebangFlags(body)
	switch {
	case !sf.shebang:
		return replicaMarked
	case sf.noWrites:
		return replicaRuns
	}
	return replicaRefused
}
