package acl

import (
	"errors"
	"strconv"
)

// The errors of a rule, in Redis's words (ACLSetUserStringError): ACL
// SETUSER sends them to the client after its own prefix, and the ACL file's
// errors quote them.
var (
	ErrUnknown              = errors.New("Unknown command or category name in ACL")
	ErrSyntax               = errors.New("Syntax error")
	ErrKeysAll              = errors.New("Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns")
	ErrChannelsAll          = errors.New("Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels")
	ErrNoSuchPassword       = errors.New("The password you are trying to remove from the user does not exist")
	ErrHash                 = errors.New("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters")
	ErrFirstArgOfSubcommand = errors.New("Allowing first-arg of a subcommand is not supported")
)

// The ACL file's problems (ACLLoadFromFile): ParseFile lists each it
// finds, then fileUnchanged.
const fileUnchanged = "WARNING: ACL errors detected, no change to the previously active ACL rules was performed"

func fileOpen(file, err string) string {
	return "Error loading ACLs, opening file '" + file + "': " + err
}

func fileNotUser(file string, line int) string {
	return file + ":" + strconv.Itoa(line) + " should start with user keyword followed by the username. "
}

func fileDuplicate(name string, line int) string {
	return "WARNING: Duplicate user '" + name + "' found on line " + strconv.Itoa(line) + ". "
}

func fileUnknown(file string, line int, rule, text string) string {
	return file + ":" + strconv.Itoa(line) + ": Error in applying operation '" + rule + "': " + text + ". "
}

func fileRule(file string, line int, text string) string {
	return file + ":" + strconv.Itoa(line) + ": " + text + ". "
}

func fileUnmatched(file string, line int) string {
	return file + ":" + strconv.Itoa(line) + ": Unmatched parenthesis in selector definition."
}
