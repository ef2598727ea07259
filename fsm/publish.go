package fsm

// PUBLISH and SPUBLISH called by a script or function. A script that may
// write runs inside apply on every replica and at every replay, so what it
// publishes is delivered the way keyspace notifications are: each node
// that applies the entry hands the message to the notify hook
// (SetNotifyHook) for its own subscribers, in order with the entry's
// keyspace events, and a replayed entry (SetReplayedThrough) delivers
// nothing. A top-level PUBLISH is not in the log: the server delivers it
// itself.
//
// The reply is 0 on every replica and at every replay. Redis answers the
// number of clients that received the message, which depends on who is
// subscribed to which node when, not on the log; a script may store what
// PUBLISH answered, and the replicas must agree on it.

// OpPublish (PUBLISH, SPUBLISH with FlagPublishShard), only inside a
// script or function: Args[0]=channel, Args[1]=message. Reply :0.
const OpPublish Op = opBaseScript + 30

// FlagPublishShard, on OpPublish: SPUBLISH, a shard channel's message.
const FlagPublishShard Flags = 1 << 0

// The Event classes of published messages, beside Redis's notification
// classes: Name is the channel and Key the message.
const (
	EventMessage      NotifyClass = 1 << 30 // PUBLISH
	EventShardMessage NotifyClass = 1 << 31 // SPUBLISH
)

func init() {
	registerOp(OpPublish, opSpec{name: "PUBLISH", write: true, args: 2, flags: FlagPublishShard,
		apply: applyPublish, keys: keysNone})
}

func applyPublish(s *Store, now int64, c *Command) Reply {
	if s.notify.hook != nil {
		class := EventMessage
		if c.Flags&FlagPublishShard != 0 {
			class = EventShardMessage
		}
		s.notify.events = append(s.notify.events, Event{Class: class, Name: string(c.Args[0]), Key: string(c.Args[1])})
	}
	return Reply{Kind: ReplyInt}
}
