package server

import (
	"strconv"

	"kvs/fsm"
)

// Keyspace notifications: the store emits Redis's events from apply
// (fsm/notify.go), on every node for that node's subscribers, and the
// server publishes each as Redis's notifyKeyspaceEvent does, to
// __keyspace@0__:<key> (the event as message) with K and to
// __keyevent@0__:<event> (the key as message) with E. Events are
// collected only while notify-keyspace-events names a class and some
// client on this node is subscribed to a channel or pattern.

// updateNotify tells the store which classes to collect.
func (s *Server) updateNotify() {
	s.psConfigMu.Lock()
	f := s.psConfig.notify
	s.psConfigMu.Unlock()
	if s.pubsub.subscribed.Load() == 0 {
		f = 0
	}
	s.notifyFlags.Store(uint32(f))
	s.router.everyStore(func(st *fsm.Store) { st.SetNotifyClasses(f) })
}

// keyspaceEvents is the store's notify hook. It also delivers the
// messages scripts published (fsm/publish.go), in order with the events,
// to this node's subscribers only: every node delivers them as it applies
// the script, so they never go over the cluster's PUBLISH links.
func (s *Server) keyspaceEvents(events []fsm.Event) {
	f := fsm.NotifyClass(s.notifyFlags.Load())
	var ch []byte
	for _, e := range events {
		switch {
		case e.Class == fsm.EventMessage || e.Class == fsm.EventShardMessage:
			s.publish(e.Class == fsm.EventShardMessage, []byte(e.Name), []byte(e.Key))
			continue
		case f&e.Class == 0:
			continue
		}
		if f&fsm.NotifyKeyspace != 0 {
			ch = append(strconv.AppendInt(append(ch[:0], "__keyspace@"...), int64(e.DB), 10), "__:"...)
			ch = append(ch, e.Key...)
			s.publish(false, ch, []byte(e.Name))
		}
		if f&fsm.NotifyKeyevent != 0 {
			ch = append(strconv.AppendInt(append(ch[:0], "__keyevent@"...), int64(e.DB), 10), "__:"...)
			ch = append(ch, e.Name...)
			s.publish(false, ch, []byte(e.Key))
		}
	}
}
