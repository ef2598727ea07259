package cluster

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"

	"kvs/fsm"
)

// muxNode opens a replica of group on mux, with a fresh store.
func muxNode(t *testing.T, mux *Mux, group uint32, id string, bootstrap bool) (*Node, *fsm.Store) {
	t.Helper()
	store := fsm.NewStore()
	cfg := Config{NodeID: id, RaftAddr: mux.Addr().String(), Dir: t.TempDir(), Bootstrap: bootstrap,
		FSM: fsm.NewRaftFSM(store), Logger: testLogger().With("test_node", fmt.Sprintf("%s/g%d", id, group)),
		Mux: mux, Group: group}
	testTiming(&cfg)
	n, err := Open(cfg)
	if err != nil {
		t.Fatalf("open %s group %d: %v", id, group, err)
	}
	t.Cleanup(func() { n.Close() })
	return n, store
}

func listenMux(t *testing.T, nt ...*TLS) *Mux {
	t.Helper()
	var tl *TLS
	if len(nt) > 0 {
		tl = nt[0]
	}
	m, err := ListenMux("127.0.0.1:0", tl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// getKey is key's value in store, or "" when it is missing.
func getKey(s *fsm.Store, key string) string {
	r := s.Read(time.Now().UnixMilli(), fsm.Command{Op: fsm.OpGet, Args: [][]byte{[]byte(key)}})
	return string(r.Bulk)
}

// TestMuxGroups: two nodes, one Raft port each, hold two groups; each
// group elects, replicates and applies on its own, and nothing of one
// reaches the other's store. A node with a listener of its own, as before
// groups, is a member of group 0 beside them: group 0's connections carry
// no header.
func TestMuxGroups(t *testing.T) {
	ma, mb := listenMux(t), listenMux(t)
	type replica struct {
		n     *Node
		store *fsm.Store
	}
	groups := map[uint32][2]replica{}
	for _, g := range []uint32{0, 7} {
		na, sa := muxNode(t, ma, g, "a", true)
		nb, sb := muxNode(t, mb, g, "b", false)
		eventually(t, fmt.Sprintf("group %d: a leads", g), func() error {
			if !na.IsLeader() {
				return fmt.Errorf("a does not lead group %d yet", g)
			}
			return nil
		})
		if err := na.AddVoter("b", mb.Addr().String()); err != nil {
			t.Fatalf("group %d: AddVoter b: %v", g, err)
		}
		groups[g] = [2]replica{{na, sa}, {nb, sb}}
	}
	// A node before groups: its own listener, no Mux.
	old := fsm.NewStore()
	cfg := Config{NodeID: "c", RaftAddr: "127.0.0.1:0", Dir: t.TempDir(), FSM: fsm.NewRaftFSM(old),
		Logger: testLogger().With("test_node", "c")}
	testTiming(&cfg)
	nc, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if err := groups[0][0].n.AddVoter("c", nc.Addr()); err != nil {
		t.Fatalf("group 0: AddVoter c: %v", err)
	}

	for g, rs := range groups {
		if _, err := rs[0].n.Apply(setEntry("k", fmt.Sprintf("group %d", g))); err != nil {
			t.Fatalf("group %d: Apply: %v", g, err)
		}
		if _, err := rs[0].n.Apply(setEntry(fmt.Sprintf("only%d", g), "x")); err != nil {
			t.Fatalf("group %d: Apply: %v", g, err)
		}
	}
	for g, rs := range groups {
		stores := []*fsm.Store{rs[0].store, rs[1].store}
		if g == 0 {
			stores = append(stores, old)
		}
		for i, s := range stores {
			eventually(t, fmt.Sprintf("group %d replica %d applying", g, i), func() error {
				if v := getKey(s, "k"); v != fmt.Sprintf("group %d", g) {
					return fmt.Errorf("k = %q", v)
				}
				if getKey(s, fmt.Sprintf("only%d", g)) != "x" {
					return fmt.Errorf("only%d missing", g)
				}
				return nil
			})
			for other := range groups {
				if other != g && getKey(s, fmt.Sprintf("only%d", other)) != "" {
					t.Fatalf("group %d replica %d holds group %d's key", g, i, other)
				}
			}
		}
	}

	// A connection to a group the node does not hold is closed unanswered.
	conn, err := net.Dial("tcp", ma.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hdr := []byte{muxMagic, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(hdr[1:], 99)
	if _, err := conn.Write(append(hdr, bytes.Repeat([]byte{0}, 64)...)); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(waitTimeout))
	// Closed with bytes unread, it may be reset rather than ended.
	n, err := conn.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); n != 0 || err == nil || ok && ne.Timeout() {
		t.Fatalf("a connection to group 99 read %d bytes, %v; want it closed", n, err)
	}
}

// TestMuxLayerOnce: a group has one transport on a Mux at a time; closing
// it frees the group, and a closed Mux gives none.
func TestMuxLayerOnce(t *testing.T) {
	m := listenMux(t)
	l, err := m.Layer(3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Layer(3); err == nil {
		t.Fatal("a second layer for group 3 was given")
	}
	l.Close()
	if _, err := l.Accept(); err == nil {
		t.Fatal("Accept on a closed layer succeeded")
	}
	l2, err := m.Layer(3)
	if err != nil {
		t.Fatalf("group 3 after its layer closed: %v", err)
	}
	m.Close()
	if _, err := l2.Accept(); err == nil {
		t.Fatal("Accept after the Mux closed succeeded")
	}
	if _, err := m.Layer(4); err == nil {
		t.Fatal("a closed Mux gave a layer")
	}
}

// TestMuxLayerFreedAfterSelfRemoval: a leader that removes itself from
// its group shuts its raft down without closing the transport; closing
// the node closes it, freeing the group's id on the Mux for a replica
// opened later.
func TestMuxLayerFreedAfterSelfRemoval(t *testing.T) {
	ma, mb := listenMux(t), listenMux(t)
	a, _ := muxNode(t, ma, 5, "a", true)
	eventually(t, "a electing itself", func() error {
		if !a.IsLeader() {
			return fmt.Errorf("not leader yet")
		}
		return nil
	})
	b, _ := muxNode(t, mb, 5, "b", false)
	if err := a.AddVoter("b", mb.Addr().String()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a removing itself", func() error {
		var lead *Node
		for _, n := range []*Node{a, b} {
			if n.IsLeader() {
				lead = n
			}
		}
		if lead == nil {
			return fmt.Errorf("no leader")
		}
		if err := lead.Remove("a"); err != nil {
			return err
		}
		ms, err := b.Members()
		if err != nil {
			return err
		}
		if len(ms) != 1 || ms[0].ID != "b" {
			return fmt.Errorf("b's configuration: %v", ms)
		}
		return nil
	})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := ma.Layer(5)
	if err != nil {
		t.Fatalf("group 5 after its replica closed: %v", err)
	}
	l.Close()
}

// TestMuxTLS: over mutual TLS, a group replicates between two nodes of the
// cluster's CA; a node whose certificate another CA signed gets nothing
// through, and stays behind.
func TestMuxTLS(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	ma, mb := listenMux(t, nodeTLS(ca.node(t), ca)), listenMux(t, nodeTLS(ca.node(t), ca))
	mx := listenMux(t, nodeTLS(other.node(t), ca))
	na, sa := muxNode(t, ma, 5, "a", true)
	_, sb := muxNode(t, mb, 5, "b", false)
	_, sx := muxNode(t, mx, 5, "x", false)
	eventually(t, "a leading", func() error {
		if !na.IsLeader() {
			return fmt.Errorf("a does not lead yet")
		}
		return nil
	})
	if err := na.AddVoter("b", mb.Addr().String()); err != nil {
		t.Fatalf("AddVoter b: %v", err)
	}
	if _, err := na.Apply(setEntry("k", "v")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b applying", func() error {
		if getKey(sb, "k") != "v" {
			return fmt.Errorf("b has not applied k")
		}
		return nil
	})
	// x's certificate is another CA's: a and b commit its addition
	// without it, and raft cannot reach it to catch it up.
	if err := na.AddVoter("x", mx.Addr().String()); err != nil {
		t.Fatalf("AddVoter x: %v", err)
	}
	if _, err := na.Apply(setEntry("k2", "v")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a and b applying k2", func() error {
		if getKey(sa, "k2") != "v" || getKey(sb, "k2") != "v" {
			return fmt.Errorf("k2 not applied")
		}
		return nil
	})
	if getKey(sx, "k") != "" || getKey(sx, "k2") != "" {
		t.Fatal("a node of another CA received entries")
	}
}
