package fsm

// SplitArgs splits line into words as Redis's sdssplitargs does, which
// Redis reads script shebangs and library metadata with: words separated
// by white space; "double quotes" with \n \r \t \b \a \xHH and \<any>
// escapes; 'single quotes' with \' only; a quote may start inside a word,
// and a closing quote must be followed by white space or the end. The
// line ends at a NUL byte, as the C string Redis splits does. It reports
// false for unbalanced quotes.
func SplitArgs(line string) ([]string, bool) {
	for i := 0; i < len(line); i++ {
		if line[i] == 0 {
			line = line[:i]
			break
		}
	}
	var args []string
	p := 0
	at := func(i int) byte { // the C string's byte at i: NUL past the end
		if i < len(line) {
			return line[i]
		}
		return 0
	}
	for {
		for p < len(line) && isCSpace(line[p]) {
			p++
		}
		if p == len(line) {
			return args, true
		}
		var cur []byte
		inq, insq := false, false
		for done := false; !done; {
			c := at(p)
			switch {
			case inq:
				switch {
				case c == '\\' && at(p+1) == 'x' && isHexDigit(at(p+2)) && isHexDigit(at(p+3)):
					cur = append(cur, hexValue(at(p+2))<<4|hexValue(at(p+3)))
					p += 3
				case c == '\\' && at(p+1) != 0:
					p++
					e := at(p)
					switch e {
					case 'n':
						e = '\n'
					case 'r':
						e = '\r'
					case 't':
						e = '\t'
					case 'b':
						e = '\b'
					case 'a':
						e = '\a'
					}
					cur = append(cur, e)
				case c == '"':
					if n := at(p + 1); n != 0 && !isCSpace(n) {
						return nil, false
					}
					done = true
				case c == 0:
					return nil, false
				default:
					cur = append(cur, c)
				}
			case insq:
				switch {
				case c == '\\' && at(p+1) == '\'':
					p++
					cur = append(cur, '\'')
				case c == '\'':
					if n := at(p + 1); n != 0 && !isCSpace(n) {
						return nil, false
					}
					done = true
				case c == 0:
					return nil, false
				default:
					cur = append(cur, c)
				}
			default:
				switch c {
				case ' ', '\n', '\r', '\t', 0:
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					cur = append(cur, c)
				}
			}
			if p < len(line) {
				p++
			}
		}
		args = append(args, string(cur))
	}
}

func hexValue(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}
