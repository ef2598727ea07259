package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
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

func backupCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kvs backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the node to connect and to send each part of the backup")
	user := fs.String("user", "default", "user to authenticate as")
	password := fs.String("password", "", "password to authenticate with (default: $REDISCLI_AUTH; none: no AUTH)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: kvs backup [--timeout D] [--user U --password P] ADDR FILE\n\n"+
			"Writes a consistent, checksummed backup of the node at client address ADDR\n"+
			"(any mode: memory, durable, cluster leader or follower) to FILE.\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return 2
	}
	if *password == "" {
		*password = os.Getenv("REDISCLI_AUTH")
	}
	h, size, err := takeBackup(fs.Arg(0), fs.Arg(1), *timeout, *user, *password)
	if err != nil {
		fmt.Fprintf(stderr, "kvs backup: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "backup of the %s node at %s written to %s: %d bytes, applied index %d, taken at %s\n",
		h.Mode, fs.Arg(0), fs.Arg(1), size, h.Index, h.Created.UTC().Format(time.RFC3339))
	if h.Flags&backup.FlagUnsynced != 0 {
		fmt.Fprintf(stdout, "warning: the node is a follower that could not reach a leader: the backup holds what it had applied, which may miss recent writes\n")
	}
	return 0
}

// takeBackup streams the node's backup into path, atomically.
func takeBackup(addr, path string, timeout time.Duration, user, password string) (backup.Header, int64, error) {
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return backup.Header{}, 0, err
	}
	defer nc.Close()
	dl := &deadlineConn{Conn: nc, timeout: timeout}
	br := bufio.NewReaderSize(dl, 1<<20)
	if password != "" {
		auth := resp.AppendArrayLen(nil, 3)
		auth = resp.AppendBulkString(auth, "AUTH")
		auth = resp.AppendBulkString(auth, user)
		auth = resp.AppendBulkString(auth, password)
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
	if _, err := dl.Write(resp.AppendBulkString(resp.AppendArrayLen(nil, 1), "KVS.BACKUP")); err != nil {
		return backup.Header{}, 0, err
	}
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
	if err := f.Sync(); err != nil {
		return backup.Header{}, 0, err
	}
	if err := f.Close(); err != nil {
		return backup.Header{}, 0, err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return backup.Header{}, 0, err
	}
	ok = true
	if err := group.SyncParent(path); err != nil {
		return h, size, fmt.Errorf("%s written, but its directory could not be fsynced: %w", path, err)
	}
	return h, size, nil
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
