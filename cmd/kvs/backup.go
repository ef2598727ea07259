package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"kvs/backup"
	"kvs/group"
	"kvs/resp"
)

// `kvs backup ADDR FILE` asks the node at ADDR for KVS.BACKUP and writes
// the stream to FILE.tmp, checks it whole (header, length, checksum),
// fsyncs it, renames it to FILE and fsyncs the directory: FILE is either
// absent or a complete, verified backup.
//
// A cluster of several groups each on --replicas nodes may have no node
// that holds every group. Then kvs backup takes each group on its own
// (KVS.BACKUP GROUPS k): from ADDR where it holds it, otherwise from the
// group's leader, or failing that from its other replicas, as ADDR's
// KVS.STATUS names them. Each stream lands in a file of its own beside
// FILE and is verified whole; only when every group's has been are their
// parts copied, in group order, into FILE.tmp under a header of their own
// (backup.Assembler), each group's file deleted once copied, so that the
// disk holds at most the backup and one group's part more. One group per
// request lets a group whose node fails be taken from another, and the
// parts be copied in group order, each file read once.

// backupOptions are how kvs backup reaches every node it asks: over TLS
// with --tls (adminTLS, as join, remove and status), else plain TCP,
// logging in as user where password is set.
type backupOptions struct {
	timeout        time.Duration
	user, password string
}

func backupCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kvs backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o backupOptions
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "how long to wait for a node to connect and to send each part of the backup")
	fs.StringVar(&o.user, "user", "default", "user to authenticate as, on every node asked")
	fs.StringVar(&o.password, "password", "", "password to authenticate with (default: $REDISCLI_AUTH; none: no AUTH)")
	var tf adminTLSFlags
	tf.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: kvs backup [--timeout D] [--user U --password P] [--tls --cacert F [--cert F --key F]] ADDR FILE\n\n"+
			"Writes a consistent, checksummed backup of the node at client address ADDR\n"+
			"(any mode: memory, durable, cluster leader or follower) to FILE. Of a cluster\n"+
			"of several groups it backs up every group, taking those ADDR holds no replica\n"+
			"of from nodes that hold one.\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return 2
	}
	if err := tf.apply(); err != nil {
		fmt.Fprintf(stderr, "kvs backup: %v\n", err)
		return 2
	}
	if o.password == "" {
		o.password = os.Getenv("REDISCLI_AUTH")
	}
	adminLogin = func() (string, string) { return o.user, o.password }
	addr, path := fs.Arg(0), fs.Arg(1)
	var res backupResult
	before, err := slotsSettled(addr, "")
	if err == nil {
		if plan := planBackup(addr, o); plan != nil {
			res, err = assembleBackup(addr, path, plan, o)
		} else {
			res.h, res.size, err = takeBackup(addr, path, o)
		}
	}
	if err == nil {
		if _, err = slotsSettled(addr, before); err != nil {
			os.Remove(path)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "kvs backup: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "backup of the %s node at %s written to %s: %d bytes, applied index %d, taken at %s\n",
		res.h.Mode, addr, path, res.size, res.h.Index, res.h.Created.UTC().Format(time.RFC3339))
	if len(res.from) > 0 {
		fmt.Fprintf(stdout, "groups %s held elsewhere were taken from other nodes, each at its own index: %s\n",
			joinInts(res.elsewhere), strings.Join(res.from, ", "))
	}
	switch {
	case len(res.unsynced) > 0:
		fmt.Fprintf(stdout, "warning: groups %s were taken from followers that could not reach their leader: they hold what those had applied, which may miss recent writes\n",
			joinInts(res.unsynced))
	case res.h.Flags&backup.FlagUnsynced != 0:
		fmt.Fprintf(stdout, "warning: the node is a follower that could not reach a leader: the backup holds what it had applied, which may miss recent writes\n")
	}
	return 0
}

// backupResult is what a backup wrote.
type backupResult struct {
	h    backup.Header
	size int64
	// Of a backup taken from several nodes: the groups taken elsewhere
	// than ADDR and from where ("K from ID at ADDR"), and the groups
	// taken from a follower that could not reach its leader.
	elsewhere []int
	from      []string
	unsynced  []int
}

func joinInts[T int | uint64](ns []T) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}

// takeBackup streams the node's backup into path, atomically.
func takeBackup(addr, path string, o backupOptions) (backup.Header, int64, error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return backup.Header{}, 0, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	h, size, err := fetchBackup(addr, nil, f, o)
	if err != nil {
		return backup.Header{}, 0, err
	}
	ok = true
	return h, size, commitBackup(f, path)
}

// dialBackup connects to the node at addr, over TLS with --tls.
func dialBackup(addr string, timeout time.Duration) (net.Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil || adminTLS == nil {
		return nc, err
	}
	tc := tls.Client(nc, adminTLS())
	tc.SetDeadline(time.Now().Add(timeout))
	if err := tc.Handshake(); err != nil {
		nc.Close()
		return nil, err
	}
	tc.SetDeadline(time.Time{})
	return tc, nil
}

// fetchBackup sends KVS.BACKUP args to the node at addr, writes the stream
// it answers to f from its start, and verifies it there whole.
func fetchBackup(addr string, args []string, f *os.File, o backupOptions) (backup.Header, int64, error) {
	nc, err := dialBackup(addr, o.timeout)
	if err != nil {
		return backup.Header{}, 0, err
	}
	defer nc.Close()
	dl := &deadlineConn{Conn: nc, timeout: o.timeout}
	br := bufio.NewReaderSize(dl, 1<<20)
	if o.password != "" {
		auth := resp.AppendArrayLen(nil, 3)
		auth = resp.AppendBulkString(auth, "AUTH")
		auth = resp.AppendBulkString(auth, o.user)
		auth = resp.AppendBulkString(auth, o.password)
		if _, err := dl.Write(auth); err != nil {
			return backup.Header{}, 0, err
		}
		line, err := br.ReadString('\n')
		if err != nil {
			return backup.Header{}, 0, err
		}
		if line != "+OK\r\n" {
			return backup.Header{}, 0, fmt.Errorf("the node at %s refused AUTH: %s", addr, strings.TrimSpace(strings.TrimPrefix(line, "-")))
		}
	}
	req := resp.AppendArrayLen(nil, 1+len(args))
	req = resp.AppendBulkString(req, "KVS.BACKUP")
	for _, a := range args {
		req = resp.AppendBulkString(req, a)
	}
	if _, err := dl.Write(req); err != nil {
		return backup.Header{}, 0, err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	size, err := backup.ReadStream(br, bw)
	if err != nil {
		var re *backup.ReplyError
		if errors.As(err, &re) {
			return backup.Header{}, 0, fmt.Errorf("the node at %s refused: %s", addr, re.Text)
		}
		return backup.Header{}, 0, err
	}
	if err := bw.Flush(); err != nil {
		return backup.Header{}, 0, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return backup.Header{}, 0, err
	}
	h, _, _, err := backup.Verify(f, size)
	if err != nil {
		return backup.Header{}, 0, fmt.Errorf("the backup received from %s does not verify: %w", addr, err)
	}
	return h, size, nil
}

// commitBackup makes f, a verified backup written as path.tmp, path:
// fsynced, closed, renamed, and the directory fsynced. It closes f, and
// removes it unless renamed.
func commitBackup(f *os.File, path string) error {
	tmp := f.Name()
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := group.SyncParent(path); err != nil {
		return fmt.Errorf("%s written, but its directory could not be fsynced: %w", path, err)
	}
	return nil
}

// backupSource is a node to take a group from: its id and client address.
type backupSource struct{ id, addr string }

// planBackup returns, when the node at addr is of a cluster of several
// groups and holds no replica of some, the nodes to take each group from
// (backupPlan). It returns nil for a node that holds every group, one of
// a cluster of one group or of no cluster, and one whose KVS.STATUS fails:
// that node is then asked for the whole backup, as it always was, and
// says itself why it cannot give one.
func planBackup(addr string, o backupOptions) [][]backupSource {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	st, err := fetchStatus(ctx, addr)
	if err != nil {
		return nil
	}
	return backupPlan(st, addr)
}

// backupPlan is, from the KVS.STATUS st of the node at addr, each group's
// sources in the order to try them: addr where it holds a replica (so
// that what it holds comes from the node asked), then the group's leader,
// then its other replicas. nil when addr holds every group.
func backupPlan(st nodeStatus, addr string) [][]backupSource {
	if !slices.ContainsFunc(st.groups, func(g []string) bool { return len(g) > 1 && g[1] == "none" }) {
		return nil
	}
	self := st.get("id")
	addrs := map[string]string{}
	for _, m := range st.members {
		if len(m) > 2 {
			addrs[m[0]] = m[2]
		}
	}
	// By group id, nil where there is no group (removed ones).
	plan := make([][]backupSource, slices.Max(st.dataGroupIDs())+1)
	for _, g := range st.groups {
		k, err := strconv.Atoi(g[0])
		if err != nil || k < 0 || k >= len(plan) {
			continue
		}
		plan[k] = []backupSource{}
		var ids []string
		if len(g) > 2 && g[2] != "" {
			ids = append(ids, g[2])
		}
		if len(g) > 5 && g[5] != "" {
			for _, m := range strings.Split(g[5], ",") {
				if id := strings.TrimSuffix(m, "(nonvoter)"); !slices.Contains(ids, id) {
					ids = append(ids, id)
				}
			}
		}
		if len(g) > 1 && g[1] != "none" {
			plan[k] = append(plan[k], backupSource{self, addr})
		}
		for _, id := range ids {
			if id != self {
				plan[k] = append(plan[k], backupSource{id, addrs[id]})
			}
		}
	}
	return plan
}

// groupFile is a group's stream as received: verified, in a file of its
// own beside the backup.
type groupFile struct {
	f    *os.File
	h    backup.Header
	size int64
	from backupSource
}

// assembleBackup takes every group of plan from its first source that
// gives it, then writes them together to path, atomically.
func assembleBackup(addr, path string, plan [][]backupSource, o backupOptions) (backupResult, error) {
	parts := make([]*groupFile, len(plan))
	defer func() {
		for _, p := range parts {
			if p != nil {
				p.f.Close()
				os.Remove(p.f.Name())
			}
		}
	}()
	var res backupResult
	for k, srcs := range plan {
		if srcs == nil {
			continue // no group has this id
		}
		p, err := fetchGroup(k, srcs, path, o)
		if err != nil {
			return res, err
		}
		parts[k] = p
		if p.from.addr != addr {
			res.elsewhere = append(res.elsewhere, k)
			res.from = append(res.from, fmt.Sprintf("%d from %s at %s", k, p.from.id, p.from.addr))
		}
		if p.h.Flags&backup.FlagUnsynced != 0 {
			res.unsynced = append(res.unsynced, k)
		}
	}
	var hs []backup.Header
	for _, p := range parts {
		if p != nil {
			hs = append(hs, p.h)
		}
	}
	res.h = backup.MergeHeaders(hs)

	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return res, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	as, err := backup.NewAssembler(bw, res.h)
	if err != nil {
		return res, err
	}
	for k, p := range parts {
		if p == nil {
			continue
		}
		if err := addGroupFile(as, p); err != nil {
			return res, fmt.Errorf("group %d from %s at %s: %w", k, p.from.id, p.from.addr, err)
		}
		p.f.Close()
		os.Remove(p.f.Name())
		parts[k] = nil
	}
	if err := as.Close(); err != nil {
		return res, err
	}
	if err := bw.Flush(); err != nil {
		return res, err
	}
	// Checked whole, as a backup received from one node is.
	if res.size, err = f.Seek(0, io.SeekEnd); err != nil {
		return res, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return res, err
	}
	if _, _, _, err := backup.Verify(f, res.size); err != nil {
		return res, fmt.Errorf("the backup put together does not verify: %w", err)
	}
	ok = true
	return res, commitBackup(f, path)
}

// fetchGroup takes group k's stream from the first of srcs that gives a
// whole one, into a file beside path.
func fetchGroup(k int, srcs []backupSource, path string, o backupOptions) (*groupFile, error) {
	if len(srcs) == 0 {
		return nil, fmt.Errorf("group %d: no node is known to hold a replica of it", k)
	}
	name := path + ".group" + strconv.Itoa(k) + ".tmp"
	var tried []string
	for _, src := range srcs {
		if src.addr == "" {
			tried = append(tried, src.id+": no client address known")
			continue
		}
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, err
		}
		h, size, err := fetchBackup(src.addr, []string{"GROUPS", strconv.Itoa(k)}, f, o)
		if err == nil {
			return &groupFile{f: f, h: h, size: size, from: src}, nil
		}
		f.Close()
		os.Remove(name)
		tried = append(tried, fmt.Sprintf("%s at %s: %v", src.id, src.addr, err))
	}
	return nil, fmt.Errorf("group %d: no node holding it gave a backup of it (%s)", k, strings.Join(tried, "; "))
}

// addGroupFile copies the parts of p's verified backup into as.
func addGroupFile(as *backup.Assembler, p *groupFile) error {
	off := int64(backup.HeaderSize)
	body := io.NewSectionReader(p.f, off, p.size-off-backup.TrailerSize)
	return as.Add(p.h, bufio.NewReaderSize(body, 1<<20))
}

// deadlineConn gives every read and write its own deadline, so a stalled
// node fails the backup while a large one may take as long as it streams.
type deadlineConn struct {
	net.Conn
	timeout time.Duration
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	c.Conn.SetReadDeadline(time.Now().Add(c.timeout))
	return c.Conn.Read(p)
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	c.Conn.SetWriteDeadline(time.Now().Add(c.timeout))
	return c.Conn.Write(p)
}

// slotsSettled returns the slot map version of the cluster at addr (""
// for a node without one), or an error while a move of slots is in
// flight there, or when the version is no longer was (a move ended
// meanwhile): each group's part of a backup is of its own moment, and a
// move is steps in two groups' logs, so a backup taken across one could
// hold its slots' keys twice, or half a move.
func slotsSettled(addr, was string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	st, err := fetchStatus(ctx, addr)
	if err != nil {
		return "", nil // not a cluster node, or not one that answers: the backup says
	}
	v := st.get("slot_map_version")
	if v == "" {
		return "", nil
	}
	if was != "" && v != was {
		return "", fmt.Errorf("slots moved between groups while the backup was taken (slot map version %s, then %s): take it again", was, v)
	}
	ms, err := fetchMoves(addr)
	if err != nil {
		return "", err
	}
	for _, m := range ms {
		if m.phase != phaseDone && m.phase != phaseCancelled {
			return "", fmt.Errorf("slots are moving between groups (move %d: %s): back up once the move is over (kvs slots status)", m.id, m.phase)
		}
	}
	return v, nil
}
