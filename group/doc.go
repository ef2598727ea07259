// Package group is one replication group as a value: an fsm store holding
// some of the keyspace's 16384 hash slots, and the proposer that orders
// its writes:
//
//   - memory: none; the server applies to the store directly;
//   - durable: kvs's own group-committed append log (package wal); a batch
//     is one record, applied once it is durable under the fsync policy;
//   - raft: a hashicorp/raft group (package cluster); a batch from
//     concurrent connections is one log entry, applied on every replica
//     once committed.
//
// A group also answers for its log: saving (a compaction, or a raft
// snapshot), its leader and read barrier (raft), and closing in order.
//
// In a cluster a node holds replicas of several raft groups. A Node is
// that process's raft side: one Raft port (cluster.Mux, each connection
// naming its group) and one data dir, with group 0's raft state where a
// node before groups kept its only group's (DataDir/raft) and group k's in
// DataDir/groups/<k>/raft. Beside it: EvenSlots, the split a new
// cluster of n groups starts with (redis-cli's); SlotMap, the versioned
// slot map the meta group keeps under SlotMapMeta (InitialSlotMap is
// version 1, EvenSlots's split; Flip makes the next version; ParseSlotMap
// reads the one encoding String writes, ParseSlotMapIn against the live
// groups); GroupSet, the cluster's live data groups as the meta group
// lists them under GroupSetMeta, ids never given twice, with the initial
// voters of a group created while the cluster runs and the rule by which
// they bootstrap it (Bootstraps, Node.OpenCreated) (groupset.go); Levels, the cluster's level of
// replicated entries and each node's, kept in the meta group, with the
// one check of a proposal (Allows) and of a joining node (Admits)
// (level.go); membership changes
// across the groups a node leads (Node.AddVoter, Node.Remove); placement
// (Placement: group 0 on every node, each data group on r of them, worked
// out from group 0's voters alone; Node.Reconcile moves the groups a node
// leads there by adding, catching up and promoting a replica before
// removing the one it replaces); tending (Node.Tend, a node's periodic
// round: open the replicas the placement gives it, serve them, publish
// the leader and membership of the groups it leads, delete the replicas
// it no longer holds); and leadership spreading (Node.SpreadLeaders), so
// that nodes hold and lead about as many groups as each other.
//
// The errors a proposal ends with are defined here, one set for every
// kind of group, so the server can tell a client whether a write certainly
// did not apply (ErrNotLeader, ErrNoLeader, ErrLogWrite) or may have
// (ErrUnknownOutcome).
//
// The package knows nothing of RESP or of command syntax; cmd/kvs builds
// groups and hands them to the server.
package group
