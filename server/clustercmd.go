package server

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"net"
	"strconv"
	"strings"

	"kvs/fsm"
)

// Redis Cluster's view of a kvs cluster, answered truthfully: one shard
// owning all 16384 slots, the Raft leader its master and every other member
// (voter or not) a replica. Members whose client address has not been
// replicated yet are left out, since no client could reach them. A node's
// Redis Cluster id is hex(sha1(member ID)), the same on every node.

// topoNode is one member as the topology commands show it.
type topoNode struct {
	Member
	nodeID string
	host   string
	port   int
	cport  int // the Raft port: kvs's node-to-node port
	self   bool
	master bool
}

// topology is the cluster as this node sees it.
type topology struct {
	nodes  []topoNode // by member ID
	master *topoNode  // nil while no leader with an address is known
	status ClusterStatus
}

func (t *topology) replicas() []*topoNode {
	var out []*topoNode
	for i := range t.nodes {
		if !t.nodes[i].master {
			out = append(out, &t.nodes[i])
		}
	}
	return out
}

// offset is the replication offset a topology command reports for n: this
// node's applied index for itself, and the commit index it knows for the
// others (Raft does not tell a node how far the others have applied).
func (t *topology) offset(n *topoNode) int64 {
	if n.self {
		return int64(t.status.AppliedIndex)
	}
	return int64(t.status.CommitIndex)
}

// nodeID is member id's Redis Cluster node id: 40 hex digits.
func nodeID(id string) string {
	sum := sha1.Sum([]byte(id))
	return hex.EncodeToString(sum[:])
}

func (s *Server) topology() (topology, error) {
	cl, g := s.router.cluster, &s.router.home
	members, err := cl.Members()
	if err != nil {
		return topology{}, err
	}
	t := topology{status: g.raft.Status()}
	self := cl.Self().ID
	leader, hasLeader := g.raft.Leader()
	for _, m := range members {
		host, port, ok := splitAddr(m.RESPAddr)
		if !ok {
			continue
		}
		n := topoNode{Member: m, nodeID: nodeID(m.ID), host: host, port: port, self: m.ID == self}
		n.master = hasLeader && m.ID == leader.ID
		if _, cport, ok := splitAddr(m.RaftAddr); ok {
			n.cport = cport
		}
		t.nodes = append(t.nodes, n)
	}
	for i := range t.nodes {
		if t.nodes[i].master {
			t.master = &t.nodes[i]
		}
	}
	return t, nil
}

func splitAddr(addr string) (string, int, bool) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, false
	}
	return host, port, true
}

func runCluster(c *client, args [][]byte) {
	if !c.s.router.clustered() {
		c.out = appendError(c.out, errClusterDisabled)
		return
	}
	name := lowerName(args[1])
	switch name {
	case "keyslot":
		c.out = appendInt(c.out, int64(fsm.KeySlot(args[2])))
		return
	case "myid":
		c.out = appendBulkString(c.out, nodeID(c.s.router.cluster.Self().ID))
		return
	case "help":
		c.out = appendHelp(c.out, clusterHelp)
		return
	case "countkeysinslot", "getkeysinslot":
		c.clusterKeysInSlot(name, args)
		return
	}
	t, err := c.s.topology()
	if err != nil {
		c.out = appendError(c.out, errProposal(err, false))
		return
	}
	if c.s.router.sharded() {
		// One map for the whole answer, however it changes meanwhile.
		m := c.s.router.slotMap()
		shards := c.s.shards(&t, m)
		switch name {
		case "slots":
			c.clusterSlotsSharded(shards)
			return
		case "shards":
			c.clusterShardsSharded(shards)
			return
		case "nodes":
			c.out = appendVerbatim(c.out, t.nodesSharded(t.roles(shards, m.bySlot)), c.proto)
			return
		case "replicas", "slaves":
			c.clusterReplicasSharded(&t, t.roles(shards, m.bySlot), string(args[2]))
			return
		case "info":
			c.out = appendVerbatim(c.out, t.infoSharded(shards), c.proto)
			return
		case "migrateslots":
			c.clusterMigrateSlots(shards, m, args)
			return
		case "getslotmigrations":
			c.clusterGetSlotMigrations(shards)
			return
		case "cancelslotmigrations":
			c.clusterCancelSlotMigrations()
			return
		}
	}
	switch name {
	case "slots":
		c.clusterSlots(&t)
	case "shards":
		c.clusterShards(&t)
	case "nodes":
		var b strings.Builder
		for i := range t.nodes {
			b.WriteString(t.nodeLine(&t.nodes[i]))
			b.WriteByte('\n')
		}
		c.out = appendVerbatim(c.out, b.String(), c.proto)
	case "info":
		c.out = appendVerbatim(c.out, t.info(), c.proto)
	case "replicas", "slaves":
		c.clusterReplicas(&t, string(args[2]))
	case "migrateslots", "getslotmigrations", "cancelslotmigrations":
		c.out = appendError(c.out, errNoMover) // a cluster of one group
	default:
		c.out = appendError(c.out, errClusterUnsupported(name))
	}
}

var clusterHelp = []string{
	"CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"COUNTKEYSINSLOT <slot>",
	"    Return the number of keys in <slot>.",
	"GETKEYSINSLOT <slot> <count>",
	"    Return key names stored by current node in a slot.",
	"INFO",
	"    Return information about the cluster.",
	"KEYSLOT <key>",
	"    Return the hash slot for <key>.",
	"MYID",
	"    Return the node id.",
	"NODES",
	"    Return cluster configuration seen by node. Output format:",
	"    <id> <ip:port@cport[,hostname]> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
	"REPLICAS <node-id>",
	"    Return <node-id> replicas.",
	"SHARDS",
	"    Return information about slot range mappings and the nodes associated with them.",
	"SLAVES <node-id>",
	"    Return <node-id> replicas.",
	"SLOTS",
	"    Return information about slots range mappings. Each range is made of:",
	"    start, end, master and replicas IP addresses, ports and ids",
	"MIGRATESLOTS SLOTSRANGE <start> <end> [<start> <end> ...] NODE <node-id|group> [SLOTSRANGE ...]",
	"    Move the slots to the data group the node leads, or of that number (kvs slots move).",
	"GETSLOTMIGRATIONS",
	"    Return the moves of slots in flight, and those finished lately.",
	"CANCELSLOTMIGRATIONS",
	"    Roll back every move of slots that has not handed its slots over yet.",
	"HELP",
	"    Print this help.",
}

// clusterSlots answers CLUSTER SLOTS: one range, 0-16383, served by the
// master and its replicas, each as [ip, port, id, {}] (Redis 7's fourth
// element is a map of extra endpoints: kvs has none).
func (c *client) clusterSlots(t *topology) {
	if t.master == nil {
		c.out = appendArrayLen(c.out, 0)
		return
	}
	replicas := t.replicas()
	b := appendArrayLen(c.out, 1)
	b = appendArrayLen(b, 3+len(replicas))
	b = appendInt(b, 0)
	b = appendInt(b, fsm.ClusterSlots-1)
	node := func(b []byte, n *topoNode) []byte {
		b = appendArrayLen(b, 4)
		b = appendBulkString(b, n.host)
		b = appendInt(b, int64(n.port))
		b = appendBulkString(b, n.nodeID)
		return appendMapLen(b, 0, c.proto)
	}
	b = node(b, t.master)
	for _, r := range replicas {
		b = node(b, r)
	}
	c.out = b
}

// clusterShards answers CLUSTER SHARDS: one shard with the slots 0-16383,
// its master first, then the replicas.
func (c *client) clusterShards(t *topology) {
	if t.master == nil {
		c.out = appendArrayLen(c.out, 0)
		return
	}
	nodes := append([]*topoNode{t.master}, t.replicas()...)
	b := appendArrayLen(c.out, 1)
	b = appendMapLen(b, 2, c.proto)
	b = appendBulkString(b, "slots")
	b = appendArrayLen(b, 2)
	b = appendInt(b, 0)
	b = appendInt(b, fsm.ClusterSlots-1)
	b = appendBulkString(b, "nodes")
	b = appendArrayLen(b, len(nodes))
	for _, n := range nodes {
		role := "replica"
		if n.master {
			role = "master"
		}
		b = appendShardNode(b, c.proto, n, role, t.offset(n))
	}
	c.out = b
}

// appendShardNode appends one node of a CLUSTER SHARDS shard: its id,
// port, ip, endpoint, role, replication offset and health.
func appendShardNode(b []byte, proto int, n *topoNode, role string, offset int64) []byte {
	b = appendMapLen(b, 7, proto)
	b = appendBulkString(b, "id")
	b = appendBulkString(b, n.nodeID)
	b = appendBulkString(b, "port")
	b = appendInt(b, int64(n.port))
	b = appendBulkString(b, "ip")
	b = appendBulkString(b, n.host)
	b = appendBulkString(b, "endpoint")
	b = appendBulkString(b, n.host)
	b = appendBulkString(b, "role")
	b = appendBulkString(b, role)
	b = appendBulkString(b, "replication-offset")
	b = appendInt(b, offset)
	b = appendBulkString(b, "health")
	return appendBulkString(b, "online")
}

// nodeLine is n's line of CLUSTER NODES (without the newline):
// id ip:port@cport flags master ping-sent pong-recv config-epoch link-state
// [slots]. The config epoch is the Raft term; kvs keeps no ping times.
func (t *topology) nodeLine(n *topoNode) string {
	var b strings.Builder
	b.WriteString(n.nodeID)
	b.WriteByte(' ')
	b.WriteString(net.JoinHostPort(n.host, strconv.Itoa(n.port)))
	b.WriteByte('@')
	b.WriteString(strconv.Itoa(n.cport))
	b.WriteByte(' ')
	if n.self {
		b.WriteString("myself,")
	}
	if n.master {
		b.WriteString("master - ")
	} else {
		b.WriteString("slave ")
		if t.master != nil {
			b.WriteString(t.master.nodeID)
		} else {
			b.WriteByte('-')
		}
		b.WriteByte(' ')
	}
	b.WriteString("0 0 ")
	b.WriteString(strconv.FormatUint(t.status.Term, 10))
	b.WriteString(" connected")
	if n.master {
		b.WriteString(" 0-16383")
	}
	return b.String()
}

// info is CLUSTER INFO's text: the cluster is ok while it has a leader.
func (t *topology) info() string {
	state, slots, size := "fail", 0, 0
	if t.master != nil {
		state, slots, size = "ok", fsm.ClusterSlots, 1
	}
	return t.infoText(state, slots, slots, size)
}

// infoText is CLUSTER INFO's text for the slots assigned and ok and the
// number of masters.
func (t *topology) infoText(state string, slots, slotsOK, size int) string {
	term := strconv.FormatUint(t.status.Term, 10)
	var b strings.Builder
	line := func(name, value string) {
		b.WriteString(name)
		b.WriteByte(':')
		b.WriteString(value)
		b.WriteString("\r\n")
	}
	line("cluster_state", state)
	line("cluster_slots_assigned", strconv.Itoa(slots))
	line("cluster_slots_ok", strconv.Itoa(slotsOK))
	line("cluster_slots_pfail", "0")
	line("cluster_slots_fail", "0")
	line("cluster_known_nodes", strconv.Itoa(len(t.nodes)))
	line("cluster_size", strconv.Itoa(size))
	line("cluster_current_epoch", term)
	line("cluster_my_epoch", term)
	line("cluster_stats_messages_sent", "0")
	line("cluster_stats_messages_received", "0")
	line("total_cluster_links_buffer_limit_exceeded", "0")
	return b.String()
}

// clusterReplicas answers CLUSTER REPLICAS|SLAVES <node-id>.
func (c *client) clusterReplicas(t *topology, id string) {
	var n *topoNode
	for i := range t.nodes {
		if t.nodes[i].nodeID == id {
			n = &t.nodes[i]
		}
	}
	switch {
	case n == nil:
		c.out = appendError(c.out, errUnknownNode(id))
	case !n.master:
		c.out = appendError(c.out, errNotMaster)
	default:
		replicas := t.replicas()
		c.out = appendArrayLen(c.out, len(replicas))
		for _, r := range replicas {
			c.out = appendBulkString(c.out, t.nodeLine(r))
		}
	}
}

// runReadonly answers READONLY: the client is cluster-aware, and a follower
// answers its keyed writes with MOVED instead of forwarding them.
func runReadonly(c *client, args [][]byte) {
	if !c.s.router.clustered() {
		c.out = appendError(c.out, errClusterDisabled)
		return
	}
	c.readonly = true
	c.out = appendStatus(c.out, "OK")
}

func runReadwrite(c *client, args [][]byte) {
	if !c.s.router.clustered() {
		c.out = appendError(c.out, errClusterDisabled)
		return
	}
	c.readonly = false
	c.out = appendStatus(c.out, "OK")
}

// replication is what ROLE and INFO replication say of this node: a
// master, with its replicas, or a replica of a master.
type replication struct {
	master bool
	// offset is this node's replication offset: its applied index of
	// the group it is described by.
	offset   int64
	replicas []replicaOffset // a master's
	of       *topoNode       // a replica's master; nil while none is known
}

// replicaOffset is one replica of a master, at the offset the master
// knows it has.
type replicaOffset struct {
	n      *topoNode
	offset int64
}

// replication describes this node: in a cluster of one group, the master
// when it leads the group, its followers the replicas; on a sharded node,
// as CLUSTER NODES does (replicationSharded). On an error (the members
// could not be read) it is whether this node is a master, and nothing
// more.
func (s *Server) replication() (replication, error) {
	t, err := s.topology()
	if err != nil {
		return replication{master: s.router.leadsSlots()}, err
	}
	if s.router.sharded() {
		return s.replicationSharded(&t), nil
	}
	rp := replication{master: s.router.home.leads(), offset: int64(t.status.AppliedIndex), of: t.master}
	if rp.master {
		for _, r := range t.replicas() {
			rp.replicas = append(rp.replicas, replicaOffset{r, t.offset(r)})
		}
	}
	return rp, nil
}

// runRole answers ROLE as a Redis master (standalone, or the leader, with
// its replicas) or replica (a follower) does.
func runRole(c *client, args [][]byte) {
	if r := c.s.replicaOf(); r != nil {
		c.out = r.appendRole(c.out)
		return
	}
	if !c.s.router.clustered() {
		c.out = append(c.out, "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n"...)
		return
	}
	rp, err := c.s.replication()
	if err != nil {
		c.out = appendError(c.out, errProposal(err, false))
		return
	}
	if rp.master {
		b := appendArrayLen(c.out, 3)
		b = appendBulkString(b, "master")
		b = appendInt(b, rp.offset)
		b = appendArrayLen(b, len(rp.replicas))
		for _, r := range rp.replicas {
			b = appendArrayLen(b, 3)
			b = appendBulkString(b, r.n.host)
			b = appendBulkInt(b, int64(r.n.port))
			b = appendBulkInt(b, r.offset)
		}
		c.out = b
		return
	}
	host, port, state := "", 0, "connect"
	if rp.of != nil {
		host, port, state = rp.of.host, rp.of.port, "connected"
	}
	b := appendArrayLen(c.out, 5)
	b = appendBulkString(b, "slave")
	b = appendBulkString(b, host)
	b = appendInt(b, int64(port))
	b = appendBulkString(b, state)
	c.out = appendInt(b, rp.offset)
}

// replicationInfo is INFO replication in cluster mode.
func (s *Server) replicationInfo() []InfoField {
	cl := s.router.cluster
	rp, err := s.replication()
	if err != nil {
		s.cfg.Logger.Debug("server: INFO replication", "err", err)
	}
	offset := strconv.FormatInt(rp.offset, 10)
	var fs []InfoField
	add := func(name, value string) { fs = append(fs, InfoField{name, value}) }
	replid := nodeID(cl.Self().ID)
	if rp.master {
		add("role", "master")
		add("connected_slaves", strconv.Itoa(len(rp.replicas)))
		fs = s.addGoodReplicas(fs)
		for i, r := range rp.replicas {
			add("slave"+strconv.Itoa(i), "ip="+r.n.host+",port="+strconv.Itoa(r.n.port)+
				",state=online,offset="+strconv.FormatInt(r.offset, 10)+",lag=0")
		}
	} else {
		host, port, link, lastIO := "", "0", "down", "-1"
		if rp.of != nil {
			host, port, link, lastIO = rp.of.host, strconv.Itoa(rp.of.port), "up", "0"
			replid = rp.of.nodeID
		}
		add("role", "slave")
		add("master_host", host)
		add("master_port", port)
		add("master_link_status", link)
		add("master_last_io_seconds_ago", lastIO)
		add("master_sync_in_progress", "0")
		add("slave_read_repl_offset", offset)
		add("slave_repl_offset", offset)
		add("slave_priority", "100")
		add("slave_read_only", "1")
		add("replica_announced", "1")
		add("connected_slaves", "0")
		fs = s.addGoodReplicas(fs)
	}
	add("master_failover_state", "no-failover")
	add("master_replid", replid)
	add("master_replid2", "0000000000000000000000000000000000000000")
	add("master_repl_offset", offset)
	add("second_repl_offset", "-1")
	add("repl_backlog_active", "0")
	add("repl_backlog_size", "1048576")
	add("repl_backlog_first_byte_offset", "0")
	add("repl_backlog_histlen", "0")
	return fs
}

// Admin commands: KVS.JOIN, KVS.REMOVE, KVS.STATUS.

func runJoin(c *client, args [][]byte) {
	cl := c.s.router.cluster
	if cl == nil {
		c.out = appendError(c.out, errClusterDisabled)
		return
	}
	if len(args) > 4 {
		// KVS.JOIN id raft-addr resp-addr groups replicas level: the
		// joining node says how many groups it opened (1 and 0 replicas
		// for a cluster of one group); a node of another count could not
		// hold the cluster's groups.
		if n, err := strconv.Atoi(string(args[4])); err != nil || n != c.s.madeGroups() {
			c.out = appendError(c.out, "ERR the node holds "+string(args[4])+" groups and the cluster's nodes "+
				strconv.Itoa(c.s.madeGroups())+": start it with the cluster's --groups")
			return
		}
	}
	if len(args) > 5 {
		// ... and the replicas a group it was started with.
		if n, err := strconv.Atoi(string(args[5])); err != nil || n != c.s.cfg.Replicas {
			c.out = appendError(c.out, "ERR the node places "+string(args[5])+" replicas of each group and the cluster's nodes "+
				strconv.Itoa(c.s.cfg.Replicas)+": start it with the cluster's --replicas")
			return
		}
	}
	level := -1 // unknown: the leader asks the node if it must know
	if len(args) > 6 {
		// ... and the level of replicated entries it applies.
		n, err := strconv.Atoi(string(args[6]))
		if err != nil || n < 0 {
			c.out = appendError(c.out, "ERR invalid apply level '"+string(args[6])+"'")
			return
		}
		level = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.s.cfg.ForwardTimeout)
	defer cancel()
	err := cl.Join(ctx, string(args[1]), string(args[2]), string(args[3]), level)
	c.adminDone(err, args)
}

func runRemove(c *client, args [][]byte) {
	cl := c.s.router.cluster
	if cl == nil {
		c.out = appendError(c.out, errClusterDisabled)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.s.cfg.ForwardTimeout)
	defer cancel()
	err := cl.Remove(ctx, string(args[1]))
	c.adminDone(err, args)
}

// adminDone answers a membership change: +OK, the relayed answer of the
// leader when this node is not it, or the error.
func (c *client) adminDone(err error, args [][]byte) {
	switch {
	case err == nil:
		c.out = appendStatus(c.out, "OK")
	case errors.Is(err, ErrNotLeader) && !c.peer:
		c.relay(args)
	default:
		c.out = appendError(c.out, errProposal(err, true))
	}
}

// relay sends the command args to the leader as it is and answers with the
// leader's reply. The leader's deadline for the change is ForwardTimeout;
// the relay waits a little longer so that it hears the leader's answer.
func (c *client) relay(args [][]byte) {
	s := c.s
	addr, err := s.leaderAddr(&s.router.home)
	if err != nil {
		c.out = appendError(c.out, errProposal(err, true))
		return
	}
	timeout := s.cfg.ForwardTimeout + s.cfg.ForwardTimeout/2
	r, err := s.peers.roundTrip(addr, timeout, func(pc *peerConn) net.Buffers {
		pc.hdr = appendArrayLen(pc.hdr[:0], len(args))
		for _, a := range args {
			pc.hdr = appendBulk(pc.hdr, a)
		}
		return net.Buffers{pc.hdr}
	})
	switch {
	case err != nil:
		c.out = appendError(c.out, errProposal(err, true))
	case r.kind == '+':
		c.out = appendStatus(c.out, r.text)
	case r.kind == '-':
		c.out = appendError(c.out, r.text)
	default:
		c.out = appendError(c.out, errProposal(errUnexpectedRelayReply, true))
	}
}

var errUnexpectedRelayReply = errors.New("outcome unknown: the leader answered with a bulk string")

// memberRole is how KVS.STATUS names m's part in its group, whose leader
// this node knows as leaderID.
func memberRole(m Member, leaderID string) string {
	switch {
	case m.Leader || (leaderID != "" && m.ID == leaderID):
		return "leader"
	case !m.Voter:
		return "nonvoter"
	}
	return "follower"
}

// runStatus answers KVS.STATUS: this node's identity and Raft state and
// the members, as a map (a flat array of name/value pairs in RESP2): id,
// addr, raft_addr, state, term, last_index, commit_index, applied_index,
// apply_delay_p50_us, apply_delay_p99_us, leader_id, leader_addr,
// apply_level (the level of replicated entries this node applies),
// cluster_level (the level its cluster recorded), members ([id,
// raft_addr, resp_addr, role] each, role "leader", "follower" or
// "nonvoter"), and on a node of several groups replicas (each group's,
// 0: on every node) and the groups.
func runStatus(c *client, args [][]byte) {
	cl := c.s.router.cluster
	if cl == nil {
		c.out = appendError(c.out, errClusterDisabled)
		return
	}
	st := c.s.router.home.raft.Status()
	members, err := cl.Members()
	if err != nil {
		c.out = appendError(c.out, errProposal(err, false))
		return
	}
	leaderID := st.LeaderID
	self := cl.Self()
	fields := 15
	if c.s.router.sharded() {
		fields += 4
		if c.s.cfg.MadeGroups > 0 {
			fields++
		}
	}
	b := appendMapLen(c.out, fields, c.proto)
	pair := func(name, value string) {
		b = appendBulkString(b, name)
		b = appendBulkString(b, value)
	}
	num := func(name string, v uint64) {
		b = appendBulkString(b, name)
		b = appendInt(b, int64(v))
	}
	pair("id", st.ID)
	// This node's own addresses, which a node that has not joined yet
	// reports to the tool that joins it.
	pair("addr", self.RESPAddr)
	pair("raft_addr", self.RaftAddr)
	pair("state", st.State)
	num("term", st.Term)
	num("last_index", st.LastIndex)
	num("commit_index", st.CommitIndex)
	num("applied_index", st.AppliedIndex)
	num("apply_delay_p50_us", uint64(st.ApplyDelayP50.Microseconds()))
	num("apply_delay_p99_us", uint64(st.ApplyDelayP99.Microseconds()))
	pair("leader_id", leaderID)
	pair("leader_addr", st.LeaderAddr)
	num("apply_level", uint64(st.ApplyLevel))
	num("cluster_level", uint64(st.ClusterLevel))
	if c.s.router.sharded() && c.s.cfg.MadeGroups > 0 {
		// The Raft groups the cluster was made with, which a node
		// joining it starts with (--groups) before it learns the
		// cluster's groups now from the meta group.
		num("made_groups", uint64(c.s.cfg.MadeGroups))
	}
	b = appendBulkString(b, "members")
	b = appendArrayLen(b, len(members))
	for _, m := range members {
		b = appendArrayLen(b, 4)
		b = appendBulkString(b, m.ID)
		b = appendBulkString(b, m.RaftAddr)
		b = appendBulkString(b, m.RESPAddr)
		b = appendBulkString(b, memberRole(m, leaderID))
	}
	if c.s.router.sharded() {
		num("replicas", uint64(c.s.cfg.Replicas))
		// The slot map the node routes by, and its version: 0 until the
		// one the cluster stores reaches it.
		m := c.s.router.slotMap()
		num("slot_map_version", m.version)
		pair("slot_map", m.runs())
		// groups: [id, state, leader_id, commit_index, applied_index,
		// members] of each group, state "none" (indexes 0) for one this
		// node holds no replica of, members as this node's replica of
		// the group knows them, or, without one, as the group's leader
		// published them ([id, raft_addr, role] each). A group's members
		// follow the cluster's a few seconds late: an operator about to
		// wipe a removed node's data waits until no group lists it.
		b = appendBulkString(b, "groups")
		b = appendArrayLen(b, c.s.router.count())
		for g := range c.s.router.all() {
			var gs ClusterStatus
			var members []Member
			if g.remote() {
				gs.State = "none"
				members = c.s.router.remote.Members(g.index)
				if l, ok := c.s.router.remote.Leader(g.index); ok {
					gs.LeaderID = l.ID
				}
			} else {
				gs = g.raft.Status()
				// A replica shutting down has no members to show.
				members, _ = g.raft.Members()
			}
			b = appendArrayLen(b, 6)
			b = appendInt(b, int64(g.index))
			b = appendBulkString(b, gs.State)
			b = appendBulkString(b, gs.LeaderID)
			b = appendInt(b, int64(gs.CommitIndex))
			b = appendInt(b, int64(gs.AppliedIndex))
			b = appendArrayLen(b, len(members))
			for _, m := range members {
				b = appendArrayLen(b, 3)
				b = appendBulkString(b, m.ID)
				b = appendBulkString(b, m.RaftAddr)
				b = appendBulkString(b, memberRole(m, gs.LeaderID))
			}
		}
	}
	c.out = b
}
