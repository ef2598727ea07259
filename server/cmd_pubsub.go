package server

import (
	"sort"

	"kvs/fsm"
)

// The pub/sub commands (pubsub.go holds the registry and delivery;
// pubsub_cluster.go the delivery to the other nodes of a cluster).

func init() {
	const ps = flagPubsub | flagNoScript | flagLoading | flagStale
	const pub = flagLoading | flagStale | flagFast
	registerCommands(
		command{name: "subscribe", arity: -2, flags: ps, group: "pubsub", run: runSubscribe(subChannel)},
		command{name: "psubscribe", arity: -2, flags: ps, group: "pubsub", run: runSubscribe(subPattern)},
		command{name: "ssubscribe", arity: -2, flags: ps, group: "pubsub", run: runSubscribe(subShard),
			firstKey: 1, lastKey: -1, keyStep: 1},
		command{name: "unsubscribe", arity: -1, flags: ps, group: "pubsub", run: runUnsubscribe(subChannel)},
		command{name: "punsubscribe", arity: -1, flags: ps, group: "pubsub", run: runUnsubscribe(subPattern)},
		command{name: "sunsubscribe", arity: -1, flags: ps, group: "pubsub", run: runUnsubscribe(subShard),
			firstKey: 1, lastKey: -1, keyStep: 1},
		command{name: "publish", arity: 3, flags: flagPubsub | pub | flagMayReplicate, group: "pubsub", run: runPublish(false),
			ordered: true},
		command{name: "spublish", arity: 3, flags: flagPubsub | pub | flagMayReplicate, group: "pubsub", run: runPublish(true),
			firstKey: 1, lastKey: 1, keyStep: 1, ordered: true},
		command{name: "pubsub", arity: -2, flags: pub, group: "pubsub",
			subs: "channels help numpat numsub shardchannels shardnumsub", run: runPubsub},
		command{name: "reset", arity: 1, flags: conn | flagNoAuth | flagAllowBusy, group: "connection", run: runReset},
		// Another node's message for this node's subscribers (cluster mode).
		// It reaches subscribers while a script is busy, as Redis
		// Cluster's bus does.
		command{name: "kvs.publish", arity: 4, flags: pub | flagAllowBusy, group: "pubsub", run: runPeerPublish},
	)
}

// subscribedAllowed are the commands RESP2's subscribed mode allows.
var subscribedAllowed = map[string]bool{
	"subscribe": true, "psubscribe": true, "ssubscribe": true,
	"unsubscribe": true, "punsubscribe": true, "sunsubscribe": true,
	"ping": true, "quit": true, "reset": true,
}

// subscribedRefusal is the error for cmd (spec: its subcommand, for a
// container) in RESP2's subscribed mode, or "" when cmd may run.
func (c *client) subscribedRefusal(cmd, spec *command) string {
	if !c.subscribedMode() || subscribedAllowed[cmd.name] {
		return ""
	}
	return errSubscribedMode(spec.name)
}

// appendSubReply appends one (un)subscribe confirmation: kind, the channel
// (nil: a null, for UNSUBSCRIBE with nothing subscribed) and the count.
func appendSubReply(b []byte, kind string, name []byte, null bool, count, proto int) []byte {
	b = appendPushHeader(b, 3, proto)
	b = appendBulkString(b, kind)
	if null {
		b = appendNull(b, proto)
	} else {
		b = appendBulk(b, name)
	}
	return appendInt(b, int64(count))
}

// changeSubscriptions runs f with the registry's write lock held, with c's
// output and the messages queued for it in one order before and after, so
// the replies f writes sit exactly between the messages published before
// and after them. The store is told whether to collect keyspace events
// before the replies can go out: a connection on its own goroutine has a
// writer that sends them at once, and a write another client sent after
// reading a SUBSCRIBE's reply was applied with no events collected (a
// lost notification, about once in a few hundred runs under load).
// updateNotify takes only locks never held around the registry's.
func (c *client) changeSubscriptions(f func(r *pubsubRegistry, ps *pushState)) {
	ps := c.ensurePush()
	r := &c.s.pubsub
	r.mu.Lock()
	c.mergeOutput()
	ps.proto = c.proto
	f(r, ps)
	c.s.updateNotify()
	c.mergeOutput()
	r.mu.Unlock()
	if c.replyMode != 0 {
		c.pushedEnd = len(c.out)
	}
}

func runSubscribe(k subKind) func(c *client, args [][]byte) {
	kind := subNames[k][0]
	return func(c *client, args [][]byte) {
		c.changeSubscriptions(func(r *pubsubRegistry, ps *pushState) {
			for _, name := range args[1:] {
				r.addLocked(k, string(name), c)
				c.out = appendSubReply(c.out, kind, name, false, ps.count(k), c.proto)
			}
		})
	}
}

func runUnsubscribe(k subKind) func(c *client, args [][]byte) {
	kind := subNames[k][1]
	return func(c *client, args [][]byte) {
		if c.ps == nil {
			// Never subscribed: nothing to leave, no pushState needed.
			if len(args) == 1 {
				c.out = appendSubReply(c.out, kind, nil, true, 0, c.proto)
			}
			for _, name := range args[1:] {
				c.out = appendSubReply(c.out, kind, name, false, 0, c.proto)
			}
			if c.replyMode != 0 {
				c.pushedEnd = len(c.out)
			}
			return
		}
		c.changeSubscriptions(func(r *pubsubRegistry, ps *pushState) {
			names := args[1:]
			if len(names) == 0 {
				for _, s := range ps.subs[k].sorted() {
					names = append(names, []byte(s))
				}
			}
			if len(names) == 0 {
				c.out = appendSubReply(c.out, kind, nil, true, ps.count(k), c.proto)
			}
			for _, name := range names {
				if ps.subs[k].remove(string(name)) {
					r.removeLocked(k, string(name), c)
				}
				c.out = appendSubReply(c.out, kind, name, false, ps.count(k), c.proto)
			}
		})
	}
}

func runPublish(shard bool) func(c *client, args [][]byte) {
	return func(c *client, args [][]byte) {
		if c.ps != nil {
			c.mergeOutput() // the replies before go first
		}
		n := c.s.publish(shard, args[1], args[2])
		if c.ps != nil {
			c.mergeOutput() // a message to c itself comes before the reply
			if c.replyMode != 0 {
				c.pushedEnd = len(c.out)
			}
		}
		c.s.broadcast(shard, args[1], args[2])
		c.out = appendInt(c.out, int64(n))
	}
}

// runPeerPublish delivers another node's message: KVS.PUBLISH 0|1 channel
// message (1: a shard message). It has no reply; the sender never reads.
func runPeerPublish(c *client, args [][]byte) {
	c.s.publish(string(args[1]) == "1", args[2], args[3])
}

var pubsubHelp = []string{
	"PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"CHANNELS [<pattern>]",
	"    Return the currently active channels matching a <pattern> (default: '*').",
	"NUMPAT",
	"    Return number of subscriptions to patterns.",
	"NUMSUB [<channel> ...]",
	"    Return the number of subscribers for the specified channels, excluding",
	"    pattern subscriptions(default: no channels).",
	"SHARDCHANNELS [<pattern>]",
	"    Return the currently active shard level channels matching a <pattern> (default: '*').",
	"SHARDNUMSUB [<shardchannel> ...]",
	"    Return the number of subscribers for the specified shard level channel(s)",
	"HELP",
	"    Prints this help.",
}

// runPubsub answers PUBSUB CHANNELS, NUMSUB, NUMPAT, SHARDCHANNELS,
// SHARDNUMSUB and HELP about this node's subscriptions.
func runPubsub(c *client, args [][]byte) {
	sub := args[1]
	r := &c.s.pubsub
	switch {
	case is(sub, "channels") && len(args) <= 3, is(sub, "shardchannels") && len(args) <= 3:
		k := subChannel
		if is(sub, "shardchannels") {
			k = subShard
		}
		r.mu.RLock()
		var names []string
		for ch := range *r.table(k) {
			if len(args) == 2 || fsm.MatchGlob(string(args[2]), ch) {
				names = append(names, ch)
			}
		}
		r.mu.RUnlock()
		sort.Strings(names)
		c.out = appendArrayLen(c.out, len(names))
		for _, n := range names {
			c.out = appendBulkString(c.out, n)
		}
	case is(sub, "numsub"), is(sub, "shardnumsub"):
		k := subChannel
		if is(sub, "shardnumsub") {
			k = subShard
		}
		c.out = appendArrayLen(c.out, 2*(len(args)-2))
		r.mu.RLock()
		for _, ch := range args[2:] {
			c.out = appendBulk(c.out, ch)
			c.out = appendInt(c.out, int64(len((*r.table(k))[string(ch)])))
		}
		r.mu.RUnlock()
	case is(sub, "numpat"):
		r.mu.RLock()
		n := len(r.patterns)
		r.mu.RUnlock()
		c.out = appendInt(c.out, int64(n))
	case is(sub, "help"):
		c.out = appendHelp(c.out, pubsubHelp)
	default:
		// CHANNELS or SHARDCHANNELS with more than a pattern.
		c.out = appendError(c.out, errSubcommandSyntax(sub, "PUBSUB"))
	}
}

// runReset is RESET: the connection's state as a new one's (RESP2, no
// subscriptions, no transaction or watched keys, no name, READWRITE,
// replies on), without unsubscribe replies.
func runReset(c *client, args [][]byte) {
	if c.trk.on {
		t := &c.s.trk
		t.mu.Lock()
		c.disableTrackingLocked()
		t.mu.Unlock()
	}
	c.trk.caching = false
	c.endTransaction()
	if c.ps != nil && c.ps.total() > 0 {
		c.changeSubscriptions(func(r *pubsubRegistry, ps *pushState) {
			for k := range ps.subs {
				for s := range ps.subs[k].m {
					r.removeLocked(subKind(k), s, c)
				}
				ps.subs[k] = orderedSet{}
			}
		})
	}
	c.setProto(2)
	c.selectDB(0)
	c.replyMode = 0
	c.readonly = false
	c.info.Lock()
	c.info.name = ""
	c.info.Unlock()
	c.resetAuth()
	c.out = appendStatus(c.out, "RESET")
}

func init() {
	for name, d := range map[string][2]string{
		"subscribe":    {"Listens for messages published to channels.", "2.0.0"},
		"psubscribe":   {"Listens for messages published to channels that match one or more patterns.", "2.0.0"},
		"ssubscribe":   {"Listens for messages published to shard channels.", "7.0.0"},
		"unsubscribe":  {"Stops listening to messages posted to channels.", "2.0.0"},
		"punsubscribe": {"Stops listening to messages published to channels that match one or more patterns.", "2.0.0"},
		"sunsubscribe": {"Stops listening to messages posted to shard channels.", "7.0.0"},
		"publish":      {"Posts a message to a channel.", "2.0.0"},
		"spublish":     {"Post a message to a shard channel", "7.0.0"},
		"pubsub":       {"A container for Pub/Sub commands.", "2.8.0"},
		"reset":        {"Resets the connection.", "6.2.0"},
		"kvs.publish":  {"Delivers another cluster node's message to this node's subscribers (internal).", "-"},
	} {
		commandDocs[name] = d
	}
}
