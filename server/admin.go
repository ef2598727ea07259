package server

import (
	"strconv"
	"strings"
	"time"

	"kvs/fsm"
)

// Connection and server commands, answered by the server itself.

func runPing(c *client, args [][]byte) {
	if c.subscribedMode() && len(args) <= 2 {
		// RESP2's subscribed mode answers as a push: pong and the argument.
		c.out = appendArrayLen(c.out, 2)
		c.out = appendBulkString(c.out, "pong")
		if len(args) == 2 {
			c.out = appendBulk(c.out, args[1])
		} else {
			c.out = appendBulkString(c.out, "")
		}
		return
	}
	switch len(args) {
	case 1:
		c.out = appendStatus(c.out, "PONG")
	case 2:
		c.out = appendBulk(c.out, args[1])
	default:
		c.out = appendError(c.out, errWrongArgs("ping"))
	}
}

func runEcho(c *client, args [][]byte) {
	c.out = appendBulk(c.out, args[1])
}

func runQuit(c *client, args [][]byte) {
	c.out = appendStatus(c.out, "OK")
	c.quit = true
}

// runSelect is SELECT db: the database the connection's commands name
// from now on. A cluster of several groups has database 0 alone, as
// Redis Cluster has.
func runSelect(c *client, args [][]byte) {
	n, e := dbIndex(args[1])
	switch {
	case e != "":
		c.out = appendError(c.out, e)
	case n != 0 && c.s.router.sharded():
		c.out = appendError(c.out, "ERR SELECT is not allowed in cluster mode")
	case !c.s.validDB(n):
		c.out = appendError(c.out, errDBIndex)
	default:
		c.selectDB(uint16(n))
		c.out = appendStatus(c.out, "OK")
	}
}

// parseDBIndex parses a database number as Redis's getIntFromObject
// does: an integer that fits 32 bits.
func parseDBIndex(b []byte) (int64, bool) {
	n, ok := parseInt(b)
	return n, ok && n == int64(int32(n))
}

// dbIndex is parseDBIndex with Redis's error (getIntFromObjectOrReply's
// two texts).
func dbIndex(b []byte) (int64, string) {
	n, ok := parseInt(b)
	switch {
	case !ok:
		return 0, errNotInteger
	case n != int64(int32(n)):
		return 0, errIntRange
	}
	return n, ""
}

// validDB reports whether n names one of the server's databases.
func (s *Server) validDB(n int64) bool { return n >= 0 && n < int64(s.databases()) }

// databases is the number of databases (the databases parameter).
func (s *Server) databases() int {
	if s.cfg.Databases <= 0 {
		return DefaultDatabases
	}
	return min(s.cfg.Databases, fsm.MaxDB+1)
}

// DefaultDatabases is Redis's default of the databases parameter.
const DefaultDatabases = 16

// selectDB makes n the connection's database.
func (c *client) selectDB(n uint16) {
	c.db = n
	c.dbPub.Store(uint32(n))
}

// runHello answers HELLO [protover [AUTH user pass] [SETNAME name]] and
// switches the connection's protocol.
func runHello(c *client, args [][]byte) {
	proto := c.proto
	if len(args) >= 2 {
		v, ok := parseInt(args[1])
		if !ok {
			c.out = appendError(c.out, errProtoVersion)
			return
		}
		if v < 2 || v > 3 {
			c.out = appendError(c.out, errNoProto)
			return
		}
		proto = int(v)
	}
	var name []byte
	setName := false
	for j := 2; j < len(args); j++ {
		more := len(args) - j - 1
		switch {
		case is(args[j], "auth") && more >= 2:
			if !c.authenticate(args[j+1], args[j+2], string(args[0])) {
				c.out = appendError(c.out, errWrongPass)
				return
			}
			j += 2
		case is(args[j], "setname") && more >= 1:
			name, setName = args[j+1], true
			j++
		default:
			c.out = appendError(c.out, errHelloOption(args[j]))
			return
		}
	}
	if setName {
		if !validClientAttr(name) {
			c.out = appendError(c.out, errClientName)
			return
		}
		c.info.Lock()
		c.info.name = string(name)
		c.info.Unlock()
	}
	if c.authRequired() {
		c.out = appendError(c.out, errHelloNoAuth)
		return
	}
	c.setProto(proto)
	if proto == 3 && c.fd >= 0 {
		// A RESP3 connection may be sent invalidations (tracking.go),
		// its own or another client's it is the redirection of. On a
		// loop that costs nothing more; a connection with a goroutine of
		// its own gets one when it tracks or subscribes.
		c.ensurePush()
	}
	b := appendMapLen(c.out, 7, proto)
	b = appendBulkString(b, "server")
	b = appendBulkString(b, "redis")
	b = appendBulkString(b, "version")
	b = appendBulkString(b, c.s.cfg.RedisVersion)
	b = appendBulkString(b, "proto")
	b = appendInt(b, int64(proto))
	b = appendBulkString(b, "id")
	b = appendInt(b, c.id)
	mode, role := "standalone", "master"
	if c.s.router.clustered() {
		mode = "cluster"
		if !c.s.router.leadsSlots() {
			role = "replica"
		}
	}
	b = appendBulkString(b, "mode")
	b = appendBulkString(b, mode)
	b = appendBulkString(b, "role")
	b = appendBulkString(b, role)
	b = appendBulkString(b, "modules")
	c.out = appendArrayLen(b, 0)
}

// validClientAttr is Redis's check on client names and library names and
// versions: printable ASCII without spaces.
func validClientAttr(v []byte) bool {
	for _, ch := range v {
		if ch < '!' || ch > '~' {
			return false
		}
	}
	return true
}

func runTime(c *client, args [][]byte) {
	now := time.Now()
	b := appendArrayLen(c.out, 2)
	b = appendBulkInt(b, now.Unix())
	c.out = appendBulkInt(b, int64(now.Nanosecond()/1000))
}

func runClient(c *client, args [][]byte) {
	sub := args[1]
	if runClientOps(c, sub, args) {
		return
	}
	switch {
	case is(sub, "id"):
		c.out = appendInt(c.out, c.id)
	case is(sub, "setname"):
		if !validClientAttr(args[2]) {
			c.out = appendError(c.out, errClientName)
			return
		}
		c.info.Lock()
		c.info.name = string(args[2])
		c.info.Unlock()
		c.out = appendStatus(c.out, "OK")
	case is(sub, "getname"):
		c.info.Lock()
		name := c.info.name
		c.info.Unlock()
		if name == "" {
			c.out = appendNull(c.out, c.proto)
		} else {
			c.out = appendBulkString(c.out, name)
		}
	case is(sub, "setinfo"):
		c.clientSetInfo(args[2], args[3])
	case is(sub, "info"):
		c.out = appendVerbatim(c.out, c.describe(time.Now(), true)+"\n", c.proto)
	case is(sub, "list"):
		c.clientList(args[2:])
	case is(sub, "help"):
		c.out = appendHelp(c.out, clientHelp)
	case is(sub, "unblock") && len(args) <= 4:
		runClientUnblock(c, args)
	default:
		// UNBLOCK with more arguments than it takes.
		c.out = appendError(c.out, errSubcommandSyntax(sub, "CLIENT"))
	}
}

var clientHelp = []string{
	"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"CACHING (YES|NO)",
	"    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
	"GETREDIR",
	"    Return the client ID we are redirecting to when tracking is enabled.",
	"GETNAME",
	"    Return the name of the current connection.",
	"ID",
	"    Return the ID of the current connection.",
	"INFO",
	"    Return information about the current client connection.",
	"KILL <ip:port>",
	"    Kill connection made from <ip:port>.",
	"KILL <option> <value> [<option> <value> [...]]",
	"    Kill connections. Options are:",
	"    * ADDR (<ip:port>|<unixsocket>:0)",
	"      Kill connections made from the specified address",
	"    * LADDR (<ip:port>|<unixsocket>:0)",
	"      Kill connections made to specified local address",
	"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
	"      Kill connections by type.",
	"    * USER <username>",
	"      Kill connections authenticated by <username>.",
	"    * SKIPME (YES|NO)",
	"      Skip killing current connection (default: yes).",
	"LIST [TYPE <normal|master|replica|pubsub>] [ID <client-id> [<client-id> ...]]",
	"    Return information about client connections.",
	"UNPAUSE",
	"    Stop the current client pause, resuming traffic.",
	"PAUSE <timeout> [WRITE|ALL]",
	"    Suspend all, or just write, clients for <timeout> milliseconds.",
	"REPLY (ON|OFF|SKIP)",
	"    Control the replies sent to the current connection.",
	"SETINFO <option> <value>",
	"    Set client meta attr. Options are:",
	"    * LIB-NAME: the client lib name.",
	"    * LIB-VER: the client lib version.",
	"SETNAME <name>",
	"    Assign the name <name> to the current connection.",
	"UNBLOCK <clientid> [TIMEOUT|ERROR]",
	"    Unblock the specified blocked client.",
	"TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
	"         [OPTIN] [OPTOUT] [NOLOOP]",
	"    Control server assisted client side caching.",
	"TRACKINGINFO",
	"    Report tracking status for the current connection.",
	"NO-EVICT (ON|OFF)",
	"    Protect current client connection from eviction.",
	"HELP",
	"    Print this help.",
}

func appendHelp(b []byte, lines []string) []byte {
	b = appendArrayLen(b, len(lines))
	for _, l := range lines {
		b = appendStatus(b, l)
	}
	return b
}

func (c *client) clientSetInfo(attr, val []byte) {
	var upper string
	switch {
	case is(attr, "lib-name"):
		upper = "LIB-NAME"
	case is(attr, "lib-ver"):
		upper = "LIB-VER"
	default:
		c.out = appendError(c.out, errClientSetInfoOption(attr))
		return
	}
	if !validClientAttr(val) {
		c.out = appendError(c.out, errClientSetInfoValue(upper))
		return
	}
	c.info.Lock()
	if upper == "LIB-NAME" {
		c.info.libName = string(val)
	} else {
		c.info.libVer = string(val)
	}
	c.info.Unlock()
	c.out = appendStatus(c.out, "OK")
}

// clientList answers CLIENT LIST [TYPE type] [ID id ...]. A kvs client is
// of type pubsub while subscribed, normal otherwise (clientType).
func (c *client) clientList(opts [][]byte) {
	var ids map[int64]bool
	typ := ""
	for j := 0; j < len(opts); {
		switch {
		case is(opts[j], "type") && j+1 < len(opts):
			t, ok := clientTypeByName(opts[j+1])
			if !ok {
				c.out = appendError(c.out, errUnknownClientType(opts[j+1]))
				return
			}
			typ = t
			j += 2
		case is(opts[j], "id") && j+1 < len(opts):
			ids = make(map[int64]bool)
			for j++; j < len(opts); j++ {
				id, ok := parseInt(opts[j])
				if !ok || id <= 0 {
					c.out = appendError(c.out, "ERR Invalid client ID")
					return
				}
				ids[id] = true
			}
		default:
			c.out = appendError(c.out, errSyntax)
			return
		}
	}
	var sb strings.Builder
	now := time.Now()
	for _, o := range c.s.clientsByID() {
		if (ids == nil || ids[o.id]) && (typ == "" || o.clientType() == typ) {
			sb.WriteString(o.describe(now, o == c))
			sb.WriteByte('\n')
		}
	}
	c.out = appendVerbatim(c.out, sb.String(), c.proto)
}

// describe is the client's CLIENT LIST line: every field Redis 7.2 prints,
// in its order. self: c describes itself (CLIENT INFO, its own line of
// CLIENT LIST, ACL LOG's client-info), on its own goroutine or loop. The
// output buffer fields (obl, oll, omem) and multi-mem read 0;
// docs/compatibility.md.
func (c *client) describe(now time.Time, self bool) string {
	c.info.Lock()
	name, libName, libVer := c.info.name, c.info.libName, c.info.libVer
	c.info.Unlock()
	cmd := "NULL"
	if lc := c.lastCmd.Load(); lc != nil {
		cmd = *lc
	}
	idle := now.Sub(time.Unix(0, c.lastActive.Load()))
	var b strings.Builder
	b.WriteString("id=" + strconv.FormatInt(c.id, 10))
	b.WriteString(" addr=" + c.addr)
	b.WriteString(" laddr=" + c.laddr)
	b.WriteString(" fd=" + strconv.Itoa(int(c.sockFD.Load())))
	b.WriteString(" name=" + name)
	b.WriteString(" age=" + strconv.FormatInt(int64(now.Sub(c.created)/time.Second), 10))
	b.WriteString(" idle=" + strconv.FormatInt(int64(idle/time.Second), 10))
	b.WriteString(" flags=" + c.clientFlags() + " db=" + strconv.Itoa(int(c.dbPub.Load())))
	b.WriteString(" sub=" + strconv.Itoa(int(c.subCounts[subChannel].Load())))
	b.WriteString(" psub=" + strconv.Itoa(int(c.subCounts[subPattern].Load())))
	b.WriteString(" ssub=" + strconv.Itoa(int(c.subCounts[subShard].Load())))
	b.WriteString(" multi=" + strconv.Itoa(int(c.multiCount.Load())))
	c.appendBufferFields(&b, self)
	b.WriteString(" events=r")
	b.WriteString(" cmd=" + cmd)
	_, redir := c.trackingFlags()
	b.WriteString(" user=" + *c.userName.Load() + " redir=" + strconv.FormatInt(redir, 10))
	b.WriteString(" resp=" + strconv.Itoa(int(c.protoSeen.Load())))
	b.WriteString(" lib-name=" + libName)
	b.WriteString(" lib-ver=" + libVer)
	return b.String()
}

// runMemory answers MEMORY USAGE key [SAMPLES n] from the store, MEMORY
// PURGE (memory.go) and MEMORY HELP; kvs has no allocator statistics to
// report for the rest.
func runMemory(c *client, args [][]byte) {
	switch sub := args[1]; {
	case is(sub, "usage"):
		if _, e := parseMemoryUsage(args); e != "" {
			c.out = appendError(c.out, e)
			return
		}
		c.readNow(fsm.Command{Op: fsm.OpMemoryUsage, Args: args[2:3]})
	case is(sub, "purge"):
		runMemoryPurge(c)
	default:
		c.out = appendHelp(c.out, memoryHelp)
	}
}

// parseMemoryUsage checks the options of MEMORY USAGE key [SAMPLES count]
// as Redis's memoryCommand does, and returns the count (Redis's default 5;
// 0 means every element). Its arity was checked before it runs, by admit
// or parseScriptCall.
func parseMemoryUsage(args [][]byte) (samples int64, e string) {
	samples = 5
	for j := 3; j < len(args); j += 2 {
		if !is(args[j], "samples") || j+1 >= len(args) {
			return 0, errSyntax
		}
		n, ok := parseInt(args[j+1])
		switch {
		case !ok:
			return 0, errNotInteger
		case n < 0:
			return 0, errSyntax
		}
		samples = n
	}
	return samples, ""
}

var memoryHelp = []string{
	"MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"PURGE",
	"    Attempt to purge dirty pages for reclamation by the allocator.",
	"USAGE <key> [SAMPLES <count>]",
	"    Return memory in bytes used by <key> and its value. Nested values are",
	"    sampled up to <count> times (default: 5, 0 means sample all).",
	"HELP",
	"    Prints this help.",
}
