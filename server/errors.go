package server

import (
	"errors"
	"strconv"
	"strings"
	"syscall"

	"kvs/acl"
	"kvs/fsm"
	"kvs/resp"
)

// Every error text a client can receive from the server package is built in
// this file, in Redis 7's exact wording, so that a reply can be compared byte
// for byte with redis-server's. The texts carry no leading '-' and no CRLF;
// the writer adds them. Request framing errors come from package resp,
// which parses requests; the errProto names below are its texts.

const (
	errSyntax          = "ERR syntax error"
	errNotInteger      = "ERR value is not an integer or out of range"
	errNotFloat        = "ERR value is not a valid float"
	errDBIndex         = "ERR DB index is out of range"
	errOffset          = "ERR offset is out of range"
	errInvalidCursor   = "ERR invalid cursor"
	errDecrOverflow    = "ERR decrement would overflow"
	errMaxClients      = "ERR max number of clients reached"
	errExpireNXCompat  = "ERR NX and XX, GT or LT options at the same time are not compatible"
	errExpireGTLT      = "ERR GT and LT options at the same time are not compatible"
	errNoProto         = "NOPROTO unsupported protocol version"
	errProtoVersion    = "ERR Protocol version is not an integer or out of range"
	errWrongPass       = "WRONGPASS invalid username-password pair or user is disabled."
	errAuthNoPassword  = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	errClientName      = "ERR Client names cannot contain spaces, newlines or special characters."
	errInternal        = "ERR internal error"
	errLoading         = "LOADING kvs is loading the dataset in memory"
	errProtoBulk       = resp.MsgInvalidBulkLength
	errProtoMultiBulk  = resp.MsgInvalidMultiBulkLength
	errProtoInline     = resp.MsgInlineTooBig
	errProtoQuotes     = resp.MsgUnbalancedQuotes
	errProtoMbulkCount = resp.MsgMultiBulkCountTooBig
	errProtoBulkCount  = resp.MsgBulkCountTooBig
)

// COMMAND GETKEYS's and GETKEYSANDFLAGS's errors (server.c).
const (
	errGetKeysInvalidCommand = "ERR Invalid command specified"
	errGetKeysNoKeys         = "ERR The command has no key arguments"
	errGetKeysArity          = "ERR Invalid number of arguments specified for command"
	errGetKeysInvalidArgs    = "ERR Invalid arguments specified for command"
)

// Errors of passwords and users (Redis 7.0's acl.c, networking.c, multi.c).
const (
	errNoAuth         = "NOAUTH Authentication required."
	errHelloNoAuth    = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"
	errNoPermKey      = "NOPERM this user has no permissions to access one of the keys used as arguments"
	errNoPermChannel  = "NOPERM this user has no permissions to access one of the channels used as arguments"
	errNoACLFile      = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration."
	errACLSave        = "ERR There was an error trying to save the ACLs. Please check the server logs for more information"
	errUserSpaces     = "ERR Usernames can't contain spaces or null characters"
	errDeleteDefault  = "ERR The 'default' user cannot be removed"
	errGenpassBits    = "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096"
	errExecACLChanged = "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: "
)

// ACL LOAD's error (ACLLoadFromFile): every problem of the file, in
// package acl's words.
func errACLLoad(problems string) string { return "ERR " + problems }

// errUnmatchedSelector is ACL SETUSER's error for a selector left open.
func errUnmatchedSelector(start string) string {
	return "ERR Unmatched parenthesis in acl selector starting at '" + start + "'."
}

// errNoPermCmd is the refusal of a command the user may not run; name is
// its full name ("config|set").
func errNoPermCmd(name string) string {
	return "NOPERM this user has no permissions to run the '" + name + "' command"
}

// errSetUserRule is ACL SETUSER's error for one bad rule (text: one of
// package acl's Err*).
func errSetUserRule(rule, text string) string {
	return "ERR Error in ACL SETUSER modifier '" + rule + "': " + text
}

// errUnknownCategory, errUserNotFound and errCommandNotFound are ACL
// CAT's and DRYRUN's.
func errUnknownCategory(cat []byte) string {
	if len(cat) > 128 {
		cat = cat[:128]
	}
	return "ERR Unknown category '" + string(cat) + "'"
}

func errUserNotFound(name []byte) string { return "ERR User '" + string(name) + "' not found" }

func errCommandNotFound(name []byte) string {
	return "ERR Command '" + string(name) + "' not found"
}

// dryRunDenial is ACL DRYRUN's answer for a refusal: a bulk string, not an
// error. what is the command's full name, or the key or channel.
func dryRunDenial(res acl.Result, what string) string {
	switch res {
	case acl.DeniedCmd:
		return "This user has no permissions to run the '" + what + "' command"
	case acl.DeniedKey:
		return "This user has no permissions to access the '" + what + "' key"
	}
	return "This user has no permissions to access the '" + what + "' channel"
}

// errUnknownCommand is Redis's reply to a command name it does not know: the
// name and the first arguments, each quoted and followed by a space.
func errUnknownCommand(name []byte, args [][]byte) string {
	var b strings.Builder
	b.WriteString("ERR unknown command '")
	writeCapped(&b, name)
	b.WriteString("', with args beginning with: ")
	for _, a := range args {
		if b.Len() >= 1024 {
			break
		}
		b.WriteByte('\'')
		writeCapped(&b, a)
		b.WriteString("' ")
	}
	return b.String()
}

// writeCapped writes at most 128 bytes of s, as Redis does when it quotes
// client input in an error, with characters that would break the error line
// replaced by spaces.
func writeCapped(b *strings.Builder, s []byte) {
	if len(s) > 128 {
		s = s[:128]
	}
	for _, c := range s {
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b.WriteByte(c)
	}
}

// errSubscribedMode refuses a command in RESP2's subscribed mode; name is
// Redis's full name of the command ("get", "config|get").
func errSubscribedMode(name string) string {
	return "ERR Can't execute '" + name + "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
}

// errWrongArgs is Redis's arity error; name is the lowercase command name,
// or "command|subcommand".
func errWrongArgs(name string) string {
	return "ERR wrong number of arguments for '" + name + "' command"
}

// errInvalidExpire is the error for an expiry that is not positive or
// overflows once turned into an absolute deadline.
func errInvalidExpire(name string) string {
	return "ERR invalid expire time in '" + name + "' command"
}

func errUnsupportedOption(opt []byte) string {
	var b strings.Builder
	b.WriteString("ERR Unsupported option ")
	writeCapped(&b, opt)
	return b.String()
}

func errUnknownSubcommand(sub []byte, cmd string) string {
	var b strings.Builder
	b.WriteString("ERR unknown subcommand '")
	writeCapped(&b, sub)
	b.WriteString("'. Try ")
	b.WriteString(strings.ToUpper(cmd))
	b.WriteString(" HELP.")
	return b.String()
}

func errHelloOption(opt []byte) string {
	var b strings.Builder
	b.WriteString("ERR Syntax error in HELLO option '")
	writeCapped(&b, opt)
	b.WriteString("'")
	return b.String()
}

func errConfigSetUnknown(param []byte) string {
	var b strings.Builder
	b.WriteString("ERR Unknown option or number of arguments for CONFIG SET - '")
	writeCapped(&b, param)
	b.WriteString("'")
	return b.String()
}

func errConfigSetFailed(param string, reason string) string {
	return "ERR CONFIG SET failed (possibly related to argument '" + param + "') - " + reason
}

func errClientSetInfoOption(opt []byte) string {
	var b strings.Builder
	b.WriteString("ERR Unrecognized option '")
	writeCapped(&b, opt)
	b.WriteString("'")
	return b.String()
}

func errClientSetInfoValue(attr string) string {
	return "ERR " + attr + " cannot contain spaces, newlines or special characters."
}

// Cluster mode. The prefixes matter: go-redis (and other clients) retry a
// command on CLUSTERDOWN, TRYAGAIN, MOVED, LOADING, READONLY, MASTERDOWN
// and ASK, so those are used only when the command certainly did not take
// effect; a write whose fate is unknown gets UNCERTAIN, which no client
// retries by itself.
const (
	errClusterDisabled = "ERR This instance has cluster support disabled"
	errNoLeader        = "CLUSTERDOWN no leader"
	errNotLeader       = "TRYAGAIN not the leader, the write was not applied"
	errNotLeaderRead   = "TRYAGAIN not the leader"
	errUncertainPrefix = "UNCERTAIN the write may or may not have been applied: "
	errUnreachable     = "TRYAGAIN the leader could not be reached, the write was not applied: "
	errUnreachableRead = "TRYAGAIN the leader could not be reached: "
)

const errNotMaster = "ERR The specified node is not a master"

func errUnknownNode(id string) string {
	var b strings.Builder
	b.WriteString("ERR Unknown node ")
	writeCapped(&b, []byte(id))
	return b.String()
}

// errClusterUnsupported answers the CLUSTER subcommands that manage slots
// and nodes by hand: in kvs, membership goes through KVS.JOIN and
// KVS.REMOVE and the Raft leader serves every slot.
func errClusterUnsupported(sub string) string {
	return "ERR CLUSTER " + strings.ToUpper(sub) + " is not supported: kvs is one shard owning every slot, served by its Raft leader"
}

// errMoved redirects a cluster-aware client to the leader, as a Redis
// Cluster replica redirects writes to its master.
func errMoved(slot int, addr string) string {
	return "MOVED " + strconv.Itoa(slot) + " " + addr
}

// errProposal is what every command of a batch receives when it could not
// be executed (write: the batch holds writes; otherwise reads that needed
// the leader). The cluster errors get the texts above; anything else gets
// Redis's generic "-ERR <text>" form.
func errProposal(err error, write bool) string {
	var re *remoteError
	var refused *loginRefused
	if text, ok := errBusyText(err); ok {
		return text
	}
	switch {
	case errors.As(err, &re):
		return re.text // the leader's own client text
	case errors.As(err, &refused):
		if !write {
			return "TRYAGAIN " + refused.text
		}
		return "TRYAGAIN the write was not applied: " + refused.text
	case errors.Is(err, ErrUnknownOutcome):
		if !write {
			// A read has no effect to be unsure about.
			return errUnreachableRead + oneLine(err)
		}
		return errUncertainPrefix + oneLine(err)
	case errors.Is(err, ErrLeaderUnreachable):
		if !write {
			return errUnreachableRead + oneLine(err)
		}
		return errUnreachable + oneLine(err)
	case errors.Is(err, ErrNoLeader):
		return errNoLeader
	case errors.Is(err, ErrNotLeader):
		if !write {
			return errNotLeaderRead
		}
		return errNotLeader
	case errors.Is(err, ErrLogWrite):
		return errMisconfAOF + strerror(err)
	}
	return "ERR " + oneLine(err)
}

// errNoReplicas is Redis's refusal of a write while fewer replicas than
// min-replicas-to-write are in contact (replicas.go).
const errNoReplicas = "NOREPLICAS Not enough good replicas to write."

// errMisconfAOF is how redis-server 7 refuses writes after a failed write
// or fsync of its append-only file (writeCommandsGetDiskErrorMessage in
// server.c), followed by strerror of the failure.
const errMisconfAOF = "MISCONF Errors writing to the AOF file: "

// strerror is the C library's text for the OS error err wraps ("No space
// left on device"), as Redis prints it: Go's texts are glibc's with the
// first letter lowered. An error with no OS error in it gives its own text.
func strerror(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return oneLine(err)
	}
	s := errno.Error()
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		s = string(s[0]-'a'+'A') + s[1:]
	}
	return s
}

// oneLine is err's text fit for an error reply: a multi-line error would
// desynchronise the client's parser.
func oneLine(err error) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(err.Error())
}

// errForwardRequest answers a KVS.FORWARD request that does not decode.
func errForwardRequest(err error) string {
	return "ERR invalid forwarded request: " + oneLine(err)
}

// Sentinel errors returned by the Server's methods (not sent to clients).
var (
	// ErrServerClosed is returned by Serve after Shutdown or Close.
	ErrServerClosed = errors.New("server: closed")
	// ErrAlreadyServing is returned by Serve when called twice.
	ErrAlreadyServing = errors.New("server: already serving")
)

// Errors of the operator's commands (SLOWLOG, CLIENT KILL, CLIENT PAUSE,
// CLIENT REPLY, LATENCY).
const (
	errSlowlogCount     = "ERR count should be greater than or equal to -1"
	errNoSuchClient     = "ERR No such client"
	errClientIDPositive = "ERR client-id should be greater than 0"
	errPauseTimeout     = "ERR timeout is not an integer or out of range"
	errPauseNegative    = "ERR timeout is negative"
	errPauseMode        = "ERR CLIENT PAUSE mode must be WRITE or ALL"
)

// errSubcommandSyntax is Redis's addReplySubcommandSyntaxError: a known
// subcommand with arguments it does not take.
func errSubcommandSyntax(sub []byte, cmd string) string {
	var b strings.Builder
	b.WriteString("ERR unknown subcommand or wrong number of arguments for '")
	writeCapped(&b, sub)
	b.WriteString("'. Try ")
	b.WriteString(cmd)
	b.WriteString(" HELP.")
	return b.String()
}

// errNoSuchUser is CLIENT KILL USER's reply for a user that does not exist.
func errNoSuchUser(name []byte) string { return "ERR No such user '" + string(name) + "'" }

// errUnknownClientType is CLIENT LIST TYPE's and CLIENT KILL TYPE's reply
// for a type Redis does not know.
func errUnknownClientType(t []byte) string { return "ERR Unknown client type '" + string(t) + "'" }

// Errors of scripts that run long (Redis 7.0's shared.slowevalerr,
// shared.slowscripterr and scriptKill in script.c), and kvs's own for a
// script it cannot kill because the log runs it on every replica.
const (
	errBusyScript        = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
	errBusyFunction      = "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
	errNotBusy           = "NOTBUSY No scripts in execution right now."
	errUnkillableDirty   = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command."
	errUnkillableReplica = "UNKILLABLE The busy script was sent by a master instance in the context of replication and cannot be killed."
	errUnkillableLogged  = "UNKILLABLE The busy script may write, and the log it came from runs it in full on every replica and at every replay: killing it on this node would make its data differ. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command."
)

// errBusy is the error a command gets while a script of kind b is busy.
func errBusy(b fsm.Busy) string {
	if b == fsm.BusyFunction {
		return errBusyFunction
	}
	return errBusyScript
}
