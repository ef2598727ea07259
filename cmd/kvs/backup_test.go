package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"kvs/backup"
	"kvs/fsm"
)

// TestBackupPlan: each group is taken from the node asked where it holds
// a replica, else from the group's leader, then from its other replicas,
// at the client addresses the members list; a node that holds every group
// is asked for the whole backup (no plan).
func TestBackupPlan(t *testing.T) {
	member := func(id, role string) any { return []any{id, "raft-" + id, role} }
	row := func(id int64, state, leader string, members ...any) any {
		return []any{id, state, leader, int64(9), int64(9), members}
	}
	status := func(groups ...any) nodeStatus {
		st, err := parseStatus([]any{
			"id", "n1",
			"addr", "10.0.0.1:6379",
			"members", []any{
				[]any{"n1", "raft-n1", "10.0.0.1:6379", "follower"},
				[]any{"n2", "raft-n2", "10.0.0.2:6379", "leader"},
				[]any{"n3", "raft-n3", "10.0.0.3:6379", "follower"},
				[]any{"n4", "raft-n4", "10.0.0.4:6379", "nonvoter"},
			},
			"replicas", int64(2),
			"groups", groups,
		})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	const asked = "127.0.0.1:7000" // n1, as the operator reaches it
	st := status(
		row(0, "follower", "n2", member("n1", "follower"), member("n2", "leader"), member("n3", "follower"), member("n4", "nonvoter")),
		row(1, "leader", "n1", member("n1", "leader"), member("n2", "follower")),
		row(2, "none", "n3", member("n3", "leader"), member("n4", "follower")),
		row(3, "none", "", member("n4", "follower"), member("n2", "follower")),
		row(4, "none", "n5", member("n5", "leader")),
		row(5, "none", ""),
	)
	want := [][]backupSource{
		{{"n1", asked}, {"n2", "10.0.0.2:6379"}, {"n3", "10.0.0.3:6379"}, {"n4", "10.0.0.4:6379"}},
		{{"n1", asked}, {"n2", "10.0.0.2:6379"}},
		{{"n3", "10.0.0.3:6379"}, {"n4", "10.0.0.4:6379"}},
		{{"n4", "10.0.0.4:6379"}, {"n2", "10.0.0.2:6379"}},
		{{"n5", ""}},
		{}, // a group without a known replica: fetching it fails
	}
	if got := backupPlan(st, asked); !reflect.DeepEqual(got, want) {
		t.Errorf("plan\n%v\nwant\n%v", got, want)
	}
	every := status(
		row(0, "leader", "n1", member("n1", "leader")),
		row(1, "follower", "n2", member("n1", "follower"), member("n2", "leader")),
	)
	if got := backupPlan(every, asked); got != nil {
		t.Errorf("plan of a node holding every group: %v, want none", got)
	}
	if got := backupPlan(status(), asked); got != nil {
		t.Errorf("plan of a node of one group: %v, want none", got)
	}
}

// fakeBackupNode serves KVS.BACKUP GROUPS k with a backup of group k
// alone (a store holding the key k<k>), or, when cut, with the first
// half of that stream before it closes the connection, to a client that
// has sent AUTH backup-user s3cret first. It returns its address.
func fakeBackupNode(t *testing.T, cut bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(nc)
			auth, err := readCommand(br)
			if err != nil || !slices.Equal(auth, []string{"AUTH", "backup-user", "s3cret"}) {
				nc.Write([]byte("-WRONGPASS invalid username-password pair or user is disabled.\r\n"))
				nc.Close()
				continue
			}
			nc.Write([]byte("+OK\r\n"))
			args, err := readCommand(br)
			if err != nil || len(args) != 3 || args[0] != "KVS.BACKUP" || args[1] != "GROUPS" {
				nc.Write([]byte("-ERR not a backup of one group\r\n"))
				nc.Close()
				continue
			}
			id, _ := strconv.Atoi(args[2])
			stream := groupStream(t, uint32(id))
			if cut {
				stream = stream[:len(stream)/2]
			}
			nc.Write(stream)
			nc.Close()
		}
	}()
	return l.Addr().String()
}

// readCommand reads one RESP array of bulk strings.
func readCommand(br *bufio.Reader) ([]string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil {
		return nil, err
	}
	var args []string
	for range n {
		if _, err := br.ReadString('\n'); err != nil {
			return nil, err
		}
		arg, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		args = append(args, strings.TrimSuffix(arg, "\r\n"))
	}
	return args, nil
}

// groupStream is KVS.BACKUP GROUPS id's reply: a backup of group id alone,
// as one streamed-string chunk.
func groupStream(t *testing.T, id uint32) []byte {
	var file bytes.Buffer
	w, err := backup.NewWriter(&file, backup.Header{Mode: backup.ModeCluster, Flags: backup.FlagGroups, Index: uint64(10 + id), Created: time.Unix(int64(id), 0)})
	if err != nil {
		t.Error(err)
		return nil
	}
	st := fsm.NewStore()
	st.Apply(uint64(10+id), 0, []fsm.Command{{Op: fsm.OpSet, Args: [][]byte{fmt.Appendf(nil, "k%d", id), []byte("v")}}})
	snap := st.Snapshot()
	defer snap.Release()
	backup.WritePart(w, id, snap.Index(), func(w io.Writer) error {
		_, err := snap.WriteTo(w)
		return err
	})
	w.Close()
	return fmt.Appendf(nil, "$?\r\n;%d\r\n%s\r\n;0\r\n", file.Len(), file.Bytes())
}

// TestAssembleBackup: each group comes from the first of its sources that
// gives the whole of it, one cut midway passing to the next; the file
// holds every group in order. A group whose every source fails midway
// fails the backup, naming the group and where its stream ended, and
// leaves FILE as it was and no file of its own behind. Every node is
// logged in to with the user and password given.
func TestAssembleBackup(t *testing.T) {
	good, cut := fakeBackupNode(t, false), fakeBackupNode(t, true)
	o := backupOptions{timeout: 10 * time.Second, user: "backup-user", password: "s3cret"}
	dir := t.TempDir()
	path := filepath.Join(dir, "b.kvsb")
	res, err := assembleBackup(good, path, [][]backupSource{
		{{"n1", good}},
		{{"n2", cut}, {"n3", ""}, {"n1", good}},
	}, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.h.Index != 10 || !res.h.Created.Equal(time.Unix(0, 0)) || len(res.elsewhere) != 0 {
		t.Errorf("result %+v", res)
	}
	parts, h, err := loadBackup(path)
	if err != nil || len(parts) != 2 || h.Flags != backup.FlagGroups {
		t.Fatalf("loadBackup: %d parts, header %+v, %v", len(parts), h, err)
	}
	for i, p := range parts {
		r := p.store.Read(0, fsm.Command{Op: fsm.OpGet, Args: [][]byte{[]byte("k" + itoa(i))}})
		if string(r.Bulk) != "v" {
			t.Errorf("group %d's GET k%d: %+v", i, i, r)
		}
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	_, err = assembleBackup(good, path, [][]backupSource{
		{{"n1", good}},
		{{"n2", good}},
		{{"n2", cut}, {"n4", cut}},
	}, o)
	if err == nil || !strings.Contains(err.Error(), "group 2: no node holding it gave a backup of it") ||
		!strings.Contains(err.Error(), "n4 at "+cut+": backup: bad stream: the node closed the connection after") {
		t.Errorf("backup with group 2's sources cut midway: %v", err)
	}
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, before) {
		t.Errorf("%s changed by a failed backup (%v)", path, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files left beside the backup: %v", entries)
	}

	// Every node asked is logged in to.
	o.password = "wrong"
	_, err = assembleBackup(good, path, [][]backupSource{{{"n1", good}}, {{"n2", good}}}, o)
	if err == nil || !strings.Contains(err.Error(), "group 0: no node holding it gave a backup of it (n1 at "+good+": the node at "+good+" refused AUTH: WRONGPASS") {
		t.Errorf("backup with a wrong password: %v", err)
	}
}
