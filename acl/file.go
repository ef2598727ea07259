package acl

import (
	"errors"
	"os"
	"strings"
)

// The ACL file (--aclfile), in Redis's format: one "user <name> <rule>..."
// line per user, blank lines ignored.

// ParseFile parses an ACL file's text into user names and rule lines
// (name1, line1, name2, line2, ...; the default user's DefaultUserLine
// when the file has none), or returns every error found, in Redis's words
// (ACLLoadFromFile lists them all). file names the file in the errors.
func ParseFile(ac *Commands, file, text string) ([]string, error) {
	var errs strings.Builder
	var pairs []string
	seen := map[string]bool{}
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		line = strings.Trim(line, " \t\r\n")
		if line == "" {
			continue
		}
		argv := strings.Fields(line)
		if argv[0] != "user" || len(argv) < 2 {
			errs.WriteString(fileNotUser(file, n))
			continue
		}
		name := argv[1]
		if seen[name] {
			errs.WriteString(fileDuplicate(name, n))
			continue
		}
		seen[name] = true
		u := NewUser(ac, name)
		reported := false
		rules, open := MergeSelectors(argv[2:])
		if open >= 0 {
			errs.WriteString(fileUnmatched(file, n))
		}
		for _, rule := range rules {
			err := u.applyRule(ac, rule)
			switch {
			case err == nil:
			case err == ErrUnknown:
				errs.WriteString(fileUnknown(file, n, rule, err.Error()))
			case !reported:
				errs.WriteString(fileRule(file, n, err.Error()))
				reported = true
			}
		}
		if errs.Len() == 0 {
			pairs = append(pairs, name, u.finish(ac).Describe(ac))
		}
	}
	if errs.Len() > 0 {
		return nil, errors.New(errs.String() + fileUnchanged)
	}
	if !seen["default"] {
		pairs = append(pairs, "default", DefaultUserLine)
	}
	return pairs, nil
}

// ReadFile reads and parses the ACL file at path (ParseFile); its errors
// are Redis's words too.
func ReadFile(ac *Commands, path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.New(fileOpen(path, osErrText(err)))
	}
	return ParseFile(ac, path, string(b))
}

// osErrText is an error of the file system as Redis quotes strerror: the
// reason alone, capitalised.
func osErrText(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		err = pe.Err
	}
	s := err.Error()
	if s != "" {
		s = strings.ToUpper(s[:1]) + s[1:]
	}
	return s
}

// FileText is t as an ACL file holds it (ACL SAVE): its users' ACL LIST
// lines.
func (t *Table) FileText(ac *Commands) []byte {
	var b strings.Builder
	for _, line := range t.List(ac) {
		b.WriteString(line + "\n")
	}
	return []byte(b.String())
}
