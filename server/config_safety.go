package server

import (
	"math"
	"strconv"

	"kvs/config"
)

// CONFIG GET and SET of the parameters that keep a server safe on a
// network: protected-mode (protected.go) and client-query-buffer-limit
// (outbuf.go). client-output-buffer-limit is config_pubsub.go's.

// isSafetyParam reports whether name is one of this file's parameters.
func isSafetyParam(name string) bool {
	return name == "protected-mode" || name == "client-query-buffer-limit"
}

// addSafetyParams adds this file's parameters to CONFIG GET's.
func (s *Server) addSafetyParams(p map[string]string) {
	p["protected-mode"] = yesNo(s.protectedMode.Load())
	p["client-query-buffer-limit"] = strconv.FormatInt(s.maxQuery.Load(), 10)
}

// minQueryLimit is client-query-buffer-limit's least value in Redis.
const minQueryLimit = 1 << 20

// checkSafetyParam checks a CONFIG SET value and returns the change to make
// once every pair passed, or Redis's error text.
func (s *Server) checkSafetyParam(name string, val []byte) (apply func(), e string) {
	if name == "client-query-buffer-limit" {
		v, ok := config.ParseMemory(val)
		if !ok {
			return nil, errConfigSetFailed(name, "argument must be a memory value")
		}
		if v < minQueryLimit {
			return nil, errConfigSetFailed(name, "argument must be between "+strconv.Itoa(minQueryLimit)+
				" and "+strconv.FormatInt(math.MaxInt64, 10)+" inclusive")
		}
		return func() { s.maxQuery.Store(v) }, ""
	}
	on, ok := config.ParseYesNo(val)
	if !ok {
		return nil, errConfigSetFailed(name, "argument must be 'yes' or 'no'")
	}
	return func() { s.protectedMode.Store(on) }, ""
}
