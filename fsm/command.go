package fsm

// Op names one data command. Writes go through a proposer and reach the store
// through Apply (in log order, on every replica and at every replay); reads are
// answered by Read under the shared lock.
//
// The numeric values are part of the log format: never renumber, only
// append. Whether an op writes, and how it is applied or read, is decided
// by its row in the op table (ops.go), which each type's file fills in; the
// numbers below 128 are the ones entry version 1 could hold. New types take
// their numbers from the ranges listed at the end of this file.
type Op uint16

// Write operations. The comment on each says how its Command fields are used.
// "Deadline" is an absolute Unix time in milliseconds decided by the proposer
// (relative times such as EX 10 are turned into deadlines before proposing).
const (
	OpInvalid Op = iota

	// OpSet: Args[0]=key, Args[1]=value, Int=deadline (0: none).
	// Flags: FlagNX, FlagXX, FlagGet, FlagKeepTTL.
	// Reply: +OK, or nil when NX/XX stopped it; with FlagGet the old value
	// (bulk or nil) instead, and WRONGTYPE if the old value is not a string.
	OpSet
	// OpSetNX (SETNX): Args[0]=key, Args[1]=value. Reply :1 set, :0 not set.
	OpSetNX
	// OpGetSet (GETSET): Args[0]=key, Args[1]=value. Reply old value or nil.
	// Removes any TTL, as SET does.
	OpGetSet
	// OpGetDel: Args[0]=key. Reply value or nil.
	OpGetDel
	// OpGetEx: Args[0]=key. Int=deadline when FlagExpire is set; FlagPersist
	// removes the TTL; neither: plain GET. A deadline not after now deletes
	// the key (as Redis does). Reply value or nil.
	OpGetEx
	// OpMSet: Args = k1, v1, k2, v2, ... Reply +OK. Removes TTLs.
	OpMSet
	// OpMSetNX: Args = k1, v1, ... Reply :1 when all were set, :0 when none.
	OpMSetNX
	// OpAppend: Args[0]=key, Args[1]=suffix. Reply :new length.
	OpAppend
	// OpSetRange: Args[0]=key, Int=offset (>= 0, checked by the server),
	// Args[1]=value. Reply :new length.
	OpSetRange
	// OpIncrBy (INCR, DECR, INCRBY, DECRBY): Args[0]=key, Int=delta.
	// Reply :new value.
	OpIncrBy
	// OpIncrByFloat: Args[0]=key, Float=increment. Reply bulk new value,
	// formatted as Redis formats it. Optional Args[1]: the increment as the
	// client wrote it; when present Apply parses it as Redis does (long
	// double) and ignores Float, which makes results such as 0.1+0.2 = "0.3"
	// match Redis exactly (float64 cannot).
	OpIncrByFloat
	// OpDel (DEL, UNLINK): Args = keys. Reply :number deleted.
	OpDel
	// OpRename: Args[0]=key, Args[1]=newkey. Reply +OK. Keeps the TTL.
	OpRename
	// OpRenameNX: Args[0]=key, Args[1]=newkey. Reply :1 or :0.
	OpRenameNX
	// OpExpireAt (EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT): Args[0]=key,
	// Int=deadline. Flags: FlagNX, FlagXX, FlagGT, FlagLT. A deadline not
	// after now deletes the key. Reply :1 set, :0 not.
	OpExpireAt
	// OpPersist: Args[0]=key. Reply :1 removed a TTL, :0 not.
	OpPersist
	// OpFlushAll (FLUSHDB, FLUSHALL): Reply +OK.
	OpFlushAll
	// OpDelExpired: Args = keys. Deletes each key that is expired at the
	// entry's now (and leaves alone one that was rewritten since). Proposed
	// by the active-expiry loop (only by the leader in a cluster).
	// Reply :number deleted.
	OpDelExpired
	// OpMetaSet: Args[0]=name (not empty), Args[1]=value. Sets one entry of
	// the replicated cluster metadata (see Store.Meta), which lives beside
	// the keyspace: FLUSHALL leaves it alone and no key command sees it. An
	// empty value deletes the name. Reply +OK.
	OpMetaSet
)

// Read operations, answered by Store.Read.
const (
	// OpGet: Args[0]=key. Reply bulk or nil.
	OpGet Op = 64 + iota
	// OpMGet: Args = keys. Reply array of bulk-or-nil (nil for non-strings).
	OpMGet
	// OpStrLen: Args[0]=key. Reply :length.
	OpStrLen
	// OpGetRange: Args[0]=key, Int=start, Int2=end (Redis's negative rules).
	OpGetRange
	// OpExists: Args = keys (repeats count again). Reply :count.
	OpExists
	// OpType: Args[0]=key. Reply +string / +none.
	OpType
	// OpKeys: Args[0]=glob pattern. Reply array of keys.
	OpKeys
	// OpScan: Int=cursor, Int2=count (default 10 set by the server),
	// Args[0]=match pattern ("" or absent: all), Args[1]=type ("" or absent:
	// any). Reply array [bulk next-cursor, array keys]. Cursors kvs returns
	// are below 2^63, so they fit Int; Int must not be negative (the
	// server answers a client cursor >= 2^63 itself: no keys after it).
	OpScan
	// OpRandomKey: Reply bulk key or nil. Random choice is a read, so it
	// need not be deterministic.
	OpRandomKey
	// OpTTL, OpPTTL, OpExpireTime, OpPExpireTime: Args[0]=key.
	// Reply :-2 no key, :-1 no TTL, else the value.
	OpTTL
	OpPTTL
	OpExpireTime
	OpPExpireTime
	// OpDBSize: Reply :number of keys not expired.
	OpDBSize
	// OpMemoryUsage: Args[0]=key. Reply :bytes or nil. With
	// FlagMemoryLogical (a script's MEMORY USAGE) the bytes are an
	// estimate from the value alone, the same on every replica, sampling
	// Int elements of a collection (0: all; see logicalSize).
	OpMemoryUsage
)

// Op number ranges, one per type: a type's ops are numbered from its base
// (reads and writes alike; the op table says which is which).
const (
	opBaseKeys   Op = 200  // keyspace ops added after version 1
	opBaseHash   Op = 300  // fsm/hash.go
	opBaseList   Op = 400  // fsm/list.go
	opBaseSet    Op = 500  // fsm/set.go
	opBaseZSet   Op = 600  // fsm/zset.go
	opBaseBits   Op = 700  // fsm/bits.go (and other string commands)
	opBaseSort   Op = 800  // SORT and other commands across types
	opBaseScript Op = 900  // MULTI/EXEC, scripts
	opBaseAdmin  Op = 1000 // replicated server state (ACL users, ...)
	opBaseHLL    Op = 1100 // fsm/hll.go (HyperLogLog)
	opBaseGeo    Op = 1200 // fsm/geo.go
	opBaseStream Op = 1300 // fsm/stream.go
	opLimit      Op = 1400 // every op is below this
)

// IsWrite reports whether op must go through a proposer: its row in the op
// table says it writes.
func (op Op) IsWrite() bool { return op < opLimit && opTable[op].write }

// Flags modify a command; which ones apply is listed per Op. The bits mean
// different things for different ops: each op's row in the op table says
// which bits it accepts, so the names below are the string and key ops'
// and each type names its own (FlagCH, FlagWithScores, ...) from the same
// bits.
type Flags uint32

// FlagScanMatch, on SCAN (Args[0]), SSCAN and ZSCAN: the pattern even when
// is a MATCH pattern even when empty (MATCH "" matches only the empty key
// or member); without it an empty pattern means no MATCH.
const FlagScanMatch Flags = 1 << 24

const (
	FlagNX Flags = 1 << iota
	FlagXX
	FlagGT
	FlagLT
	FlagGet
	FlagKeepTTL
	FlagPersist
	FlagExpire
)

// Command is one data command, already parsed and validated by the server:
// syntax errors never reach the store. Errors that depend on the data
// (WRONGTYPE, not an integer, overflow, no such key) are decided by Apply and
// Read and returned as error replies.
type Command struct {
	Op Op
	// DB is the numbered database (SELECT) the command runs in; 0 for
	// every command of a store with one database, and for every command
	// kvs wrote before databases. It sits in the padding after Op, so it
	// costs no memory. A command of another database is encoded with an
	// extra field (encoding.go) and needs cluster level 4 (level.go).
	DB     uint16
	Flags  Flags
	Args   [][]byte
	Int    int64
	Int2   int64
	Float  float64
	Float2 float64
}

// ReplyKind says how a Reply is written on the wire.
type ReplyKind uint8

const (
	ReplyNil    ReplyKind = iota // RESP2 $-1 (or *-1 inside nothing), RESP3 _
	ReplyStatus                  // +Str
	ReplyError                   // -Str (Str holds the full text, e.g. "WRONGTYPE Operation ...")
	ReplyInt                     // :Int
	ReplyBulk                    // $len Bulk
	ReplyArray                   // *n Array...
	// RESP3 types, and what RESP2 writes instead:
	ReplyDouble   // RESP3 ,Bulk (Bulk holds the number as Redis formats it); RESP2 a bulk string
	ReplyMap      // RESP3 %n with Array holding key, value, key, value...; RESP2 an array of 2n
	ReplySet      // RESP3 ~n Array...; RESP2 an array
	ReplyNilArray // RESP3 _; RESP2 *-1 (BLPOP's timeout, LMPOP finding nothing)
	// ReplyPairs is an array of 2-element arrays (ZRANGE WITHSCORES,
	// HRANDFIELD WITHVALUES): RESP3 writes it nested, RESP2 flattened
	// into one array of 2n elements, as Redis does.
	ReplyPairs
	// Script replies (Lua's RESP3 conversions):
	ReplyBool      // RESP3 #t/#f (Int 1/0); RESP2 :1/:0
	ReplyBigNumber // RESP3 (Bulk; RESP2 a bulk string
	ReplyVerbatim  // RESP3 =len Str:Bulk (Str the 3-letter format); RESP2 a bulk string
	// ReplyBulks is an array of Int bulk strings held flat in Bulk, each
	// already as a RESP bulk string, "$3\r\nabc\r\n" (AppendBulks
	// builds it, NextBulk reads it). It goes on the wire exactly as a
	// ReplyArray of ReplyBulk does (RESP2 and RESP3 alike: the server
	// writes Bulk as it is) and costs one buffer instead of a Reply per
	// element, for long replies of bulks: LRANGE, LPOP with a count. Any
	// command's reply can use it; Expanded turns it into that ReplyArray.
	ReplyBulks
	// ReplyKeyed is an array of 2-element arrays, each a key and its
	// value (XREAD's streams): RESP3 writes it as a map of key to value,
	// RESP2 as the array of the 2-element arrays, as Redis does.
	ReplyKeyed
)

// Reply is the result of one command, independent of the protocol version.
type Reply struct {
	Kind  ReplyKind
	Int   int64
	Str   string
	Bulk  []byte
	Array []Reply
}
