package server

import (
	"fmt"
	"strings"

	"kvs/config"
)

// ApplyConfig applies a config file's Redis parameters, as CONFIG SET
// would (immutable ones included: they are being set at start). The
// directives kvs takes as flags must have been removed by the caller.
func (s *Server) ApplyConfig(ds []config.Directive) error {
	for _, d := range ds {
		if !config.IsParam(d.Name) {
			return fmt.Errorf("%w %s: unknown parameter", config.ErrFile, d)
		}
	}
	for _, d := range ds {
		// One at a time, so that an error names its line.
		if d.Name == "save" {
			continue
		}
		if e := s.setConfig(config.Pairs([]config.Directive{d}), true); e != "" {
			return fmt.Errorf("%w %s: %s", config.ErrFile, d, strings.TrimPrefix(e, "ERR "))
		}
	}
	var saves []config.Directive
	for _, d := range ds {
		if d.Name == "save" {
			saves = append(saves, d)
		}
	}
	if len(saves) > 0 {
		if e := s.setConfig(config.Pairs(saves), true); e != "" {
			return fmt.Errorf("%w %s: %s", config.ErrFile, saves[0], strings.TrimPrefix(e, "ERR "))
		}
	}
	return nil
}
