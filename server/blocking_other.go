//go:build !linux

package server

// waitBlocked waits until w is woken or its deadline passes; see
// blocking_linux.go. Without poll's POLLRDHUP a hang-up is noticed only
// when the answer is written.
func (c *client) waitBlocked(w *waiter) bool { return c.waitBlockedPlain(w) }
