package fsm

// matchGlob reports whether str matches pattern with the rules of Redis's
// stringmatchlen (util.c), which KEYS and SCAN MATCH use: '*', '?',
// '[...]' with '^' negation, ranges (either order) and '\' escapes, and a
// '\' outside brackets escaping the next byte. Redis's quirks are kept: an
// unterminated '[' class ends at the end of the pattern, and a trailing '\'
// matches a literal '\'. Case-sensitive.
func matchGlob(pattern, str string) bool {
	skipLongerMatches := false
	return matchGlobImpl(pattern, str, &skipLongerMatches, 0)
}

// MatchGlob is matchGlob for the server: PUBSUB CHANNELS and pattern
// subscriptions match channels as Redis matches keys.
func MatchGlob(pattern, str string) bool { return matchGlob(pattern, str) }

// matchGlobImpl is stringmatchlen_impl. skipLongerMatches short-cuts the
// exponential case: once a '*' suffix failed against a string's tail, it
// fails against every shorter tail too. nesting bounds the recursion depth
// as Redis does.
func matchGlobImpl(p, s string, skipLongerMatches *bool, nesting int) bool {
	if nesting > 1000 {
		return false
	}
	for len(p) > 0 && len(s) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for len(s) > 0 {
				if matchGlobImpl(p[1:], s, skipLongerMatches, nesting+1) {
					return true
				}
				if *skipLongerMatches {
					return false
				}
				s = s[1:]
			}
			*skipLongerMatches = true
			return false
		case '?':
			s = s[1:]
		case '[':
			p = p[1:]
			not := len(p) > 0 && p[0] == '^'
			if not {
				p = p[1:]
			}
			match := false
			for {
				if len(p) == 0 {
					// Unterminated class: Redis stops at the end
					// and steps back so the outer p++ lands there.
					break
				}
				if p[0] == '\\' && len(p) >= 2 {
					p = p[1:]
					if p[0] == s[0] {
						match = true
					}
				} else if p[0] == ']' {
					break
				} else if len(p) >= 3 && p[1] == '-' {
					start, end := p[0], p[2]
					if start > end {
						start, end = end, start
					}
					if s[0] >= start && s[0] <= end {
						match = true
					}
					p = p[2:]
				} else if p[0] == s[0] {
					match = true
				}
				p = p[1:]
			}
			if not {
				match = !match
			}
			if !match {
				return false
			}
			s = s[1:]
			if len(p) == 0 {
				// Redis's p-- / p++ dance leaves the pattern at its
				// end when the class was unterminated.
				continue
			}
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			if p[0] != s[0] {
				return false
			}
			s = s[1:]
		default:
			if p[0] != s[0] {
				return false
			}
			s = s[1:]
		}
		p = p[1:]
		if len(s) == 0 {
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
			break
		}
	}
	return len(p) == 0 && len(s) == 0
}

// globIsLiteral reports whether pattern matches exactly one string, itself,
// so KEYS can look the key up instead of scanning.
func globIsLiteral(pattern string) bool {
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '*', '?', '[', '\\':
			return false
		}
	}
	return true
}
