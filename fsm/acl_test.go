package fsm

import (
	"bytes"
	"errors"
	"maps"
	"testing"
)

func aclSet(mode int64, pairs ...string) Command {
	cmd := Command{Op: OpACLSet, Int: mode}
	for _, p := range pairs {
		cmd.Args = append(cmd.Args, []byte(p))
	}
	return cmd
}

func TestACLSetModes(t *testing.T) {
	s := NewStore()
	gen := s.ACLGen()
	s.Apply(1, t0, []Command{aclSet(ACLSeed, "default", "on #aa ~* &* +@all")})
	s.Apply(2, t0, []Command{aclSet(ACLSeed, "default", "on nopass ~* &* +@all")}) // loses: seeded already
	s.Apply(3, t0, []Command{aclSet(ACLUpdate, "alice", "on nopass -@all +get")})
	users, g := s.ACLUsers()
	want := map[string]string{"default": "on #aa ~* &* +@all", "alice": "on nopass -@all +get"}
	if !maps.Equal(users, want) || g == gen {
		t.Fatalf("users %v gen %d (was %d), want %v and a new generation", users, g, gen, want)
	}
	s.Apply(4, t0, []Command{aclSet(ACLUpdate, "alice", "")})
	s.Apply(5, t0, []Command{aclSet(ACLReplace, "bob", "off -@all")})
	if users, _ := s.ACLUsers(); !maps.Equal(users, map[string]string{"bob": "off -@all"}) {
		t.Fatalf("after delete and replace: %v", users)
	}
	s.Apply(6, t0, []Command{{Op: OpFlushAll}})
	if users, _ := s.ACLUsers(); len(users) != 1 {
		t.Fatalf("FLUSHALL removed ACL users: %v", users)
	}
	for _, bad := range []Command{aclSet(7, "a", "on"), aclSet(ACLUpdate, "a")} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v validates", bad)
		}
	}
}

func TestACLSnapshotRoundTrip(t *testing.T) {
	s := NewStore()
	s.Apply(1, t0, []Command{c(OpSet, "k", "v"), aclSet(ACLUpdate, "alice", "on nopass ~a* -@all +get", "bob", "off -@all", "", "on -@all")})
	b := snapshotBytes(t, s)
	r := NewStore()
	gen := r.ACLGen()
	if _, err := r.Restore(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	users, g := r.ACLUsers()
	want, _ := s.ACLUsers()
	if !maps.Equal(users, want) || g == gen {
		t.Fatalf("restored users %v (gen %d, was %d), want %v", users, g, gen, want)
	}
	// The seed loses against a restored table too.
	r.Apply(2, t0, []Command{aclSet(ACLSeed, "default", "on #aa ~* &* +@all")})
	if users, _ := r.ACLUsers(); users["default"] != "" {
		t.Fatal("a seed applied over a restored ACL table")
	}
}

// A version 4 snapshot (no ACL section) still restores, to a store with
// no users that a seed may still initialise.
func TestACLRestoreVersion4(t *testing.T) {
	s := NewStore()
	s.Apply(1, t0, []Command{c(OpSet, "k", "v")})
	v5 := snapshotBytes(t, s)
	// version, index 1, no metadata, then the ACL section's two bytes.
	if !bytes.Equal(v5[:5], []byte{snapshotVersionV5, 1, 0, 0, 0}) {
		t.Fatalf("unexpected head % x", v5[:5])
	}
	v4 := append([]byte{snapshotVersionV4, 1, 0}, v5[5:len(v5)-4]...)
	v4 = appendCRC(v4)
	r := NewStore()
	if _, err := r.Restore(bytes.NewReader(v4)); err != nil {
		t.Fatalf("version 4: %v", err)
	}
	if !bytes.Equal(snapshotBytes(t, r), v5) {
		t.Fatal("a version 4 snapshot restored to a different state")
	}
	r.Apply(2, t0, []Command{aclSet(ACLSeed, "default", "on #aa ~* &* +@all")})
	if users, _ := r.ACLUsers(); users["default"] == "" {
		t.Fatal("the seed did not apply to a store restored from version 4")
	}
}

func TestACLSnapshotCorrupt(t *testing.T) {
	s := NewStore()
	s.Apply(1, t0, []Command{aclSet(ACLUpdate, "b", "on", "a", "off")})
	b := snapshotBytes(t, s)
	// Swap the two users' names ("a" then "b" ascending) to put them out
	// of order, with a fresh CRC.
	i := bytes.Index(b, []byte{1, 'a', 3, 'o', 'f', 'f'})
	j := bytes.Index(b, []byte{1, 'b', 2, 'o', 'n'})
	if i < 0 || j < 0 {
		t.Fatalf("users not found in % x", b)
	}
	bad := bytes.Clone(b[:len(b)-4])
	bad[i+1], bad[j+1] = 'b', 'a'
	_, err := NewStore().Restore(bytes.NewReader(appendCRC(bad)))
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("out-of-order users: %v, want ErrCorrupt", err)
	}
}
