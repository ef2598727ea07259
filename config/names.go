package config

import "strings"

// NameError is CONFIG SET's refusal of a parameter's name, before any
// value is looked at. Name is the argument as given.
type NameError struct {
	Name string
	// Reason is Redis's reason ("can't set immutable config", "duplicate
	// parameter", ...); "" when the name is no parameter at all, which
	// Redis answers with an error of its own.
	Reason string
}

func (e *NameError) Error() string {
	if e.Reason == "" {
		return "unknown parameter '" + e.Name + "'"
	}
	return e.Name + ": " + e.Reason
}

// CheckNames checks the names of CONFIG SET's pairs before any value, as
// Redis 7.0 does: the first unknown, immutable or repeated name is the
// error, even after a pair whose value is wrong. known are the parameters
// CONFIG GET knows; settable says which of those that are not Redis's
// (kvs's own) CONFIG SET changes, the others being read-only. At startup
// (a config file) immutable and protected parameters are taken too.
func CheckNames(pairs [][]byte, known map[string]string, settable func(name string) bool, startup bool) *NameError {
	seen := map[string]bool{}
	for j := 0; j < len(pairs); j += 2 {
		// The errors of this phase name the argument as given.
		given := string(pairs[j])
		name := strings.ToLower(given)
		_, isLimit := limitParams[name]
		_, isKnown := known[name]
		p := byName[name]
		switch {
		case p != nil:
			// Every parameter kvs acts on is one of Redis's and takes
			// its flags from there; a change its own code refuses (a
			// tls-port, a flag's value) is refused when it is checked.
			if p.flags&paramImmutable != 0 && !startup {
				return &NameError{given, "can't set immutable config"}
			}
			if p.flags&paramProtected != 0 && !startup {
				return &NameError{given, "can't set protected config"}
			}
		case isLimit:
			// set-max-listpack-*: Redis 7.2's, which 7.0's table lacks.
		case settable(name):
			// kvs's own, which CONFIG SET changes.
		case isKnown && !startup:
			return &NameError{given, "can't set immutable config"}
		case isKnown:
		default:
			return &NameError{Name: given}
		}
		// Redis 7.0 takes a name and its alias as two parameters.
		if seen[name] {
			return &NameError{given, "duplicate parameter"}
		}
		seen[name] = true
	}
	return nil
}
