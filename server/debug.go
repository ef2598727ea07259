package server

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"

	"kvs/fsm"
	"kvs/resp"
)

// DEBUG: the subcommands Redis's own tests use that mean something for
// kvs, with Redis 7.0's replies (src/debug.c). Like Redis 7.0, DEBUG is
// refused unless enable-debug-command (immutable: the config file) is
// "yes", or "local" and the client is on the loopback interface or a Unix
// socket (admit.go). What each does in kvs, and what it does not, is in
// docs/compatibility.md.

func init() {
	registerCommands(command{name: "debug", arity: -2, flags: flagAdmin | flagNoScript | flagLoading | flagStale, group: "server", run: runDebug, level: 3})
	commandDocs["debug"] = [2]string{"A container for debugging commands.", "1.0.0"}
}

const (
	errDebugDisabled = "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", " +
		"you can run it from a local connection, otherwise you need to set this option in the configuration file, " +
		"and then restart the server."
	errNoSuchKey       = "ERR no such key"
	errDebugProtocol   = "ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false"
	errDebugThreshold  = "ERR argument must be a memory value bigger than 1 and smaller than 4gb"
	errNotListpack     = "ERR Not a listpack encoded object."
	errNotQuicklist    = "ERR Not a quicklist encoded object."
	errDebugReloadOpts = "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options."
	errReloadFailed    = "ERR Error trying to load the RDB dump"
)

// debugAllowed is Redis's allowProtectedAction for DEBUG.
func (c *client) debugAllowed() bool {
	switch c.s.params.Get("enable-debug-command") {
	case "yes":
		return true
	case "local":
		return c.isLocal()
	}
	return false
}

// isLocal is Redis's islocalClient: a Unix socket, or TCP from 127.0.0.1
// or ::1.
func (c *client) isLocal() bool {
	if c.nc == nil {
		return false
	}
	switch a := c.nc.RemoteAddr().(type) {
	case *net.UnixAddr:
		return true
	case *net.TCPAddr:
		return isLocalIP(a.IP)
	}
	return false
}

var debugHelp = []string{
	"DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"CHANGE-REPL-ID",
	"    Change the replication IDs of the instance.",
	"    Dangerous: should be used only for testing the replication subsystem.",
	"DIGEST",
	"    Output a hex signature representing the current DB content.",
	"DIGEST-VALUE <key> [<key> ...]",
	"    Output a hex signature of the values of all the specified keys.",
	"ERROR <string>",
	"    Return a Redis protocol error with <string> as message. Useful for clients",
	"    unit tests to simulate Redis errors.",
	"LOG <message>",
	"    Write <message> to the server log.",
	"OBJECT <key>",
	"    Show low level info about `key` and associated value.",
	"PROTOCOL <type>",
	"    Reply with a test value of the specified type. <type> can be: string,",
	"    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
	"    true, false.",
	"RELOAD [option ...]",
	"    Save the RDB on disk and reload it back to memory. Valid <option> values:",
	"    * MERGE: conflicting keys will be loaded from RDB.",
	"    * NOFLUSH: the existing database will not be removed before load, but",
	"      conflicting keys will generate an exception and kill the server.",
	"    * NOSAVE: the database will be loaded from an existing RDB file.",
	"SET-ACTIVE-EXPIRE <0|1>",
	"    Setting it to 0 disables expiring keys in background when they are not",
	"    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
	"    default.",
	"QUICKLIST-PACKED-THRESHOLD <size>",
	"    Sets the threshold for elements to be inserted as plain vs packed nodes",
	"    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
	"SET-DISABLE-DENY-SCRIPTS <0|1>",
	"    Accepted; kvs scripts call data commands only.",
	"SLEEP <seconds>",
	"    Stop the server for <seconds>. Decimals allowed.",
	"STRINGMATCH-TEST",
	"    Run a fuzz tester against the stringmatchlen() function.",
	"LISTPACK <key>",
	"    Show low level info about the listpack encoding of <key>.",
	"QUICKLIST <key> [<0|1>]",
	"    Show low level info about the quicklist encoding of <key>.",
	"    The optional argument (0 by default) sets the level of detail",
}

// runDebug answers the DEBUG subcommands kvs has; the others get Redis's
// answer to an unknown one.
func runDebug(c *client, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	n := len(args)
	switch {
	case sub == "help" && n == 2:
		c.out = appendHelp(c.out, debugHelp)
	case sub == "sleep" && n == 3:
		// Redis's strtod: what does not parse is 0. The sleep holds up
		// this connection's event loop, as Redis's holds up the server.
		secs, _ := strconv.ParseFloat(strings.TrimSpace(string(args[2])), 64)
		if us := int64(secs * 1e6); us > 0 {
			time.Sleep(time.Duration(us) * time.Microsecond)
		}
		c.out = appendStatus(c.out, "OK")
	case sub == "set-active-expire" && n == 3:
		v, _ := strconv.Atoi(string(args[2])) // atoi: 0 unless a number
		c.s.activeExpiry.Store(v != 0)
		c.out = appendStatus(c.out, "OK")
	case sub == "set-disable-deny-scripts" && n == 3:
		// Redis lets scripts call the commands flagged noscript while
		// it is set. kvs scripts run inside the store's apply and call
		// data commands only, never the ones the server answers itself
		// (CLIENT, DEBUG, ...): there is nothing for it to allow.
		c.out = appendStatus(c.out, "OK")
	case sub == "change-repl-id" && n == 2:
		// kvs has no replication ids to change (cluster members are
		// Raft members); nothing else depends on them.
		c.s.cfg.Logger.Info("server: DEBUG CHANGE-REPL-ID: nothing to change")
		c.out = appendStatus(c.out, "OK")
	case sub == "quicklist-packed-threshold" && n == 3:
		// kvs stores every list element in its node as it is; the
		// threshold is checked as Redis checks it and changes nothing.
		v, ok := parseMemoryArg(args[2])
		if !ok || v > 1<<32 {
			c.out = appendError(c.out, errDebugThreshold)
			return
		}
		c.out = appendStatus(c.out, "OK")
	case sub == "stringmatch-test" && n == 2:
		stringmatchFuzz()
		c.out = appendStatus(c.out, "Apparently Redis did not crash: test passed")
	case sub == "error" && n == 3:
		c.out = append(c.out, '-')
		c.out = append(c.out, args[2]...)
		c.out = append(c.out, '\r', '\n')
	case sub == "log" && n == 3:
		c.s.cfg.Logger.Warn("DEBUG LOG: " + string(args[2]))
		c.out = appendStatus(c.out, "OK")
	case sub == "protocol" && n == 3:
		c.debugProtocol(strings.ToLower(string(args[2])))
	case sub == "digest" && n == 2:
		c.debugDigest()
	case sub == "digest-value":
		c.out = appendArrayLen(c.out, n-2)
		for _, key := range args[2:] {
			r, _ := c.debugRead(key, fsm.Command{Op: fsm.OpObject, Args: [][]byte{key}, Int: fsm.ObjectDigest})
			d := make([]byte, 20)
			if r.Kind == fsm.ReplyBulk {
				d = r.Bulk
			}
			c.out = appendStatus(c.out, hex.EncodeToString(d))
		}
	case sub == "object" && n == 3:
		c.debugObject(args[2])
	case (sub == "listpack" && n == 3) || (sub == "quicklist" && (n == 3 || n == 4)):
		c.debugEncoding(sub, args[2])
	case sub == "reload":
		c.debugReload(args[2:])
	default:
		c.out = appendError(c.out, errSubcommandSyntax(args[1], "DEBUG"))
	}
}

// parseMemoryArg is Redis's memtoull: digits and an optional unit.
func parseMemoryArg(b []byte) (uint64, bool) {
	v, ok := ParseMemory(string(b))
	return uint64(v), ok
}

// debugRead reads cmd from the store of key's group on this node: a key
// of a group this node holds no replica of is not here (nil).
func (c *client) debugRead(key []byte, cmd fsm.Command) (fsm.Reply, bool) {
	g := c.s.router.groupOf(fsm.KeySlot(key))
	if g == nil {
		g = &c.s.router.home
	}
	if g.remote() {
		return fsm.Reply{Kind: fsm.ReplyNil}, true
	}
	cmd.DB = c.db
	r, ok := g.store.ReadServing(time.Now().UnixMilli(), &cmd, nil)
	if !ok {
		c.out = appendError(c.out, errBusy(c.s.scriptBusy()))
	}
	return r, ok
}

// debugDigest answers DEBUG DIGEST: the digest of the node's data, every
// group it holds a replica of together (the xor of each key's digest is
// the same however the keys are spread).
func (c *client) debugDigest() {
	dbs := []int{0}
	if !c.s.router.sharded() {
		dbs = append(dbs, c.s.router.home.store.OtherDBs()...)
	}
	var d [20]byte
	for _, db := range dbs {
		var keys [20]byte
		var n int64
		for g := range c.s.router.local() {
			cmd := fsm.Command{Op: fsm.OpDebugDigest, DB: uint16(db)}
			r, ok := g.store.ReadServing(time.Now().UnixMilli(), &cmd, nil)
			if !ok {
				c.out = appendError(c.out, errBusy(c.s.scriptBusy()))
				return
			}
			for i := range keys {
				keys[i] ^= r.Array[0].Bulk[i]
			}
			n += r.Array[1].Int
		}
		d = fsm.DatabaseDigest(d, db, keys, n)
	}
	c.out = appendStatus(c.out, hex.EncodeToString(d[:]))
}

// debugObject answers DEBUG OBJECT key in Redis's format. Redis's
// address, refcount and LRU clock are its object's; kvs reports what it
// has: a stable address made of the key's hash, OBJECT REFCOUNT, the
// serialized length as MEMORY USAGE estimates it, and the LRU clock and
// idle time from OBJECT IDLETIME (0 unless an LRU or LFU policy tracks
// accesses).
func (c *client) debugObject(key []byte) {
	read := func(what int64) (fsm.Reply, bool) {
		return c.debugRead(key, fsm.Command{Op: fsm.OpObject, Args: [][]byte{key}, Int: what, Int2: fsm.ObjectEvenExpired})
	}
	enc, ok := read(fsm.ObjectEncoding)
	if !ok {
		return
	}
	if enc.Kind != fsm.ReplyBulk {
		c.out = appendError(c.out, errNoSuchKey)
		return
	}
	ref, _ := read(fsm.ObjectRefCount)
	idle, _ := read(fsm.ObjectIdleTime)
	size, _ := c.debugRead(key, fsm.Command{Op: fsm.OpMemoryUsage, Args: [][]byte{key}})
	secs := int64(0)
	if idle.Kind == fsm.ReplyInt {
		secs = idle.Int
	}
	lru := (time.Now().Unix() - secs) & (1<<24 - 1)
	h := uint64(fsm.KeySlot(key))<<32 | uint64(len(key))
	c.out = appendStatus(c.out, "Value at:0x"+strconv.FormatUint(0x7f0000000000|h<<4, 16)+
		" refcount:"+strconv.FormatInt(ref.Int, 10)+
		" encoding:"+string(enc.Bulk)+
		" serializedlength:"+strconv.FormatInt(size.Int, 10)+
		" lru:"+strconv.FormatInt(lru, 10)+
		" lru_seconds_idle:"+strconv.FormatInt(secs, 10))
}

// debugEncoding answers DEBUG LISTPACK key and DEBUG QUICKLIST key with
// Redis's replies: kvs has no structure to print on stdout, so it says
// whether the key is so encoded.
func (c *client) debugEncoding(sub string, key []byte) {
	enc, ok := c.debugRead(key, fsm.Command{Op: fsm.OpObject, Args: [][]byte{key}, Int: fsm.ObjectEncoding})
	switch {
	case !ok:
	case enc.Kind != fsm.ReplyBulk:
		c.out = appendError(c.out, errNoSuchKey)
	case sub == "listpack" && string(enc.Bulk) != "listpack":
		c.out = appendError(c.out, errNotListpack)
	case sub == "quicklist" && string(enc.Bulk) != "quicklist":
		c.out = appendError(c.out, errNotQuicklist)
	case sub == "listpack":
		c.out = appendStatus(c.out, "Listpack structure printed on stdout")
	default:
		c.out = appendStatus(c.out, "Quicklist structure printed on stdout")
	}
}

// debugReload answers DEBUG RELOAD [MERGE|NOFLUSH|NOSAVE ...]. Redis
// saves its RDB, empties its memory and loads the file back, to verify
// that it can. kvs verifies the same of its own format: it writes a
// snapshot of each of the node's stores, loads it into a scratch store and
// compares the two digests, answering OK, or Redis's error if they
// differ. The live store is not replaced (a write arriving meanwhile would
// be lost), so the encodings Redis picks afresh on load are not.
func (c *client) debugReload(opts [][]byte) {
	merge, noflush := false, false
	for _, o := range opts {
		switch strings.ToLower(string(o)) {
		case "merge":
			merge = true
		case "noflush":
			noflush = true
		case "nosave":
		default:
			c.out = appendError(c.out, errDebugReloadOpts)
			return
		}
	}
	if noflush && !merge && !c.s.nothingToReload() {
		// Loading the dump over the data it came from, without MERGE:
		// Redis fails on a function library already there (and stops on
		// a key already there); kvs answers the error in both cases.
		c.out = appendError(c.out, errReloadFailed)
		return
	}
	for g := range c.s.router.local() {
		if err := reloadCheck(g.store); err != nil {
			c.s.cfg.Logger.Warn("server: DEBUG RELOAD", "group", g.index, "err", err)
			c.out = appendError(c.out, errReloadFailed)
			return
		}
	}
	c.out = appendStatus(c.out, "OK")
}

// nothingToReload reports whether the node's stores hold no key and no
// function library.
func (s *Server) nothingToReload() bool {
	for g := range s.router.local() {
		if g.store.Stats(0).Keys > 0 || len(g.store.OtherDBs()) > 0 {
			return false
		}
		cmd := fsm.Command{Op: fsm.OpFunctionList}
		if r := g.store.Read(time.Now().UnixMilli(), cmd); r.Kind == fsm.ReplyArray && len(r.Array) > 0 {
			return false
		}
	}
	return true
}

// reloadCheck writes a snapshot of st and reads it back into a scratch
// store, and checks that the scratch store holds what the snapshot did
// (DEBUG DIGEST's digest and key count).
func reloadCheck(st *fsm.Store) error {
	sn := st.Snapshot()
	want, wantN := sn.Digest()
	var buf bytes.Buffer
	_, err := sn.WriteTo(&buf)
	sn.Release()
	if err != nil {
		return err
	}
	scratch := fsm.NewStore()
	if _, err := scratch.Restore(&buf); err != nil {
		return err
	}
	r := scratch.Read(time.Now().UnixMilli(), fsm.Command{Op: fsm.OpDebugDigest})
	if !bytes.Equal(r.Array[0].Bulk, want[:]) || r.Array[1].Int != wantN {
		return errors.New("the data loaded differs from the data saved")
	}
	return nil
}

// debugProtocol answers DEBUG PROTOCOL type with Redis's test values.
func (c *client) debugProtocol(name string) {
	b, p := c.out, c.proto
	switch name {
	case "string":
		b = appendBulkString(b, "Hello World")
	case "integer":
		b = appendInt(b, 12345)
	case "double":
		b = resp.AppendDouble(b, 3.141, p)
	case "bignum":
		b = resp.AppendBigNumber(b, "1234567999999999999999999999999999999", p)
	case "null":
		b = appendNull(b, p)
	case "array":
		b = appendArrayLen(b, 3)
		for j := range 3 {
			b = appendInt(b, int64(j))
		}
	case "set":
		b = appendSetLen(b, 3, p)
		for j := range 3 {
			b = appendInt(b, int64(j))
		}
	case "map":
		b = appendMapLen(b, 3, p)
		for j := range 3 {
			b = appendInt(b, int64(j))
			b = resp.AppendBool(b, j == 1, p)
		}
	case "attrib":
		if p >= 3 {
			b = append(b, "|1\r\n"...)
			b = appendBulkString(b, "key-popularity")
			b = appendArrayLen(b, 2)
			b = appendBulkString(b, "key:123")
			b = appendInt(b, 90)
		}
		b = appendBulkString(b, "Some real reply following the attribute")
	case "push":
		if p < 3 {
			b = appendError(b, "ERR RESP2 is not supported by this command")
			break
		}
		b = resp.AppendPushLen(b, 2, p)
		b = appendBulkString(b, "server-cpu-usage")
		b = appendInt(b, 42)
		b = appendBulkString(b, "Some real reply following the push reply")
	case "true", "false":
		b = resp.AppendBool(b, name == "true", p)
	case "verbatim":
		b = appendVerbatim(b, "This is a verbatim\nstring", p)
	default:
		b = appendError(b, errDebugProtocol)
	}
	c.out = b
}

// stringmatchFuzz is DEBUG STRINGMATCH-TEST: kvs's glob matcher on random
// patterns and strings, which must not panic.
func stringmatchFuzz() {
	const chars = "*?[]^-\\abc"
	rnd := func(n int) []byte {
		b := make([]byte, rand.IntN(n+1))
		for i := range b {
			b[i] = chars[rand.IntN(len(chars))]
		}
		return b
	}
	for range 1000 {
		fsm.MatchGlob(string(rnd(30)), string(rnd(30)))
	}
}
