package server

import (
	"kvs/config"
	"kvs/fsm"
)

// CONFIG GET and SET of the pub/sub parameters: client-output-buffer-limit
// (its normal class is enforced by outbuf.go, its pubsub class by
// pubsub.go; the replica class is kept and echoed, kvs having no replica
// clients) and notify-keyspace-events.

// pubsubConfig is the server's pub/sub configuration, guarded by mu.
type pubsubConfig struct {
	limits config.BufferLimits
	notify fsm.NotifyClass
}

func defaultPubsubConfig() pubsubConfig {
	return pubsubConfig{limits: config.BufferLimits{
		defaultNormalLimit.config(),
		{Hard: 256 << 20, Soft: 64 << 20, SoftSeconds: 60},
		defaultPubsubLimit.config(),
	}}
}

// config is the limit as config's value of client-output-buffer-limit
// holds it.
func (l outputLimit) config() config.BufferLimit {
	return config.BufferLimit{Hard: l.hard, Soft: l.soft, SoftSeconds: l.softSeconds}
}

// isPubsubParam reports whether name is a settable pub/sub parameter.
func isPubsubParam(name string) bool {
	return name == "client-output-buffer-limit" || name == "notify-keyspace-events"
}

// addPubsubParams adds the pub/sub parameters to CONFIG GET's.
func (s *Server) addPubsubParams(p map[string]string) {
	s.psConfigMu.Lock()
	defer s.psConfigMu.Unlock()
	p["client-output-buffer-limit"] = s.psConfig.limits.String()
	p["notify-keyspace-events"] = config.NotifyString(s.psConfig.notify)
}

// checkPubsubParam checks a CONFIG SET value and returns the change to make
// once every pair passed, or Redis's error text.
func (s *Server) checkPubsubParam(name string, val []byte) (apply func(), e string) {
	s.psConfigMu.Lock()
	cur := s.psConfig
	s.psConfigMu.Unlock()
	switch name {
	case "client-output-buffer-limit":
		l, err := config.ParseBufferLimits(cur.limits, val)
		if err != nil {
			return nil, errConfigSetFailed(name, err.Error())
		}
		return func() { s.setBufferLimits(l) }, ""
	default:
		f, err := config.ParseNotify(val)
		if err != nil {
			return nil, errConfigSetFailed(name, err.Error())
		}
		return func() { s.setNotify(f) }, ""
	}
}

func (s *Server) setBufferLimits(l config.BufferLimits) {
	s.psConfigMu.Lock()
	s.psConfig.limits = l
	s.psConfigMu.Unlock()
	p := outputLimit{hard: l[2].Hard, soft: l[2].Soft, softSeconds: l[2].SoftSeconds}
	n := outputLimit{hard: l[0].Hard, soft: l[0].Soft, softSeconds: l[0].SoftSeconds}
	if p.hard == 0 && p.soft == 0 {
		s.pubsubLimit.Store(nil)
	} else {
		s.pubsubLimit.Store(&p)
	}
	if n.hard == 0 && n.soft == 0 {
		s.normalLimit.Store(nil)
	} else {
		s.normalLimit.Store(&n)
	}
}

func (s *Server) setNotify(f fsm.NotifyClass) {
	s.psConfigMu.Lock()
	s.psConfig.notify = f
	s.psConfigMu.Unlock()
	s.updateNotify()
}
