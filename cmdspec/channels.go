package cmdspec

// ChannelKind says which arguments of a command name pub/sub channels
// (Redis's getChannelsFromCommand; unsubscribing names none, since it is
// never refused).
type ChannelKind uint8

const (
	ChannelsNone    ChannelKind = iota
	ChannelsPublish             // the first argument
	ChannelsAll                 // every argument
	ChannelsPattern             // every argument, a pattern
)

// ChannelsOf returns the channel kind of the command name.
func ChannelsOf(name string) ChannelKind {
	switch name {
	case "publish", "spublish":
		return ChannelsPublish
	case "subscribe", "ssubscribe":
		return ChannelsAll
	case "psubscribe":
		return ChannelsPattern
	}
	return ChannelsNone
}
