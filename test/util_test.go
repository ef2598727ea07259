package test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func itoa(i int) string { return strconv.Itoa(i) }

// leaderChangeErrors are the error replies a cluster gives while it elects
// a leader or changes leaders: CLUSTERDOWN and TRYAGAIN say the command was
// not applied, UNCERTAIN that a write may have been, LOADING that a
// restarted node has not caught up yet.
var leaderChangeErrors = []string{"CLUSTERDOWN ", "TRYAGAIN ", "UNCERTAIN ", "LOADING "}

func isLeaderChange(err error) bool {
	if err == nil {
		return false
	}
	for _, p := range leaderChangeErrors {
		if strings.HasPrefix(err.Error(), p) {
			return true
		}
	}
	return false
}

// retryLeaderChange runs do until it returns anything but a leader-change
// error, or clusterWait passes, and returns do's last error. A leader may
// lose its lease whenever a busy machine delays a heartbeat round, so any
// cluster test, not only a failover test, may meet these errors; do must
// then be safe to repeat: a read, a SET of a fixed value, or a write on a
// key of its own per attempt. An UNCERTAIN write repeated is certain, and
// its first attempt cannot apply after the repeat: it is ahead of it in
// the log, or never commits.
func retryLeaderChange(t testing.TB, do func() error) error {
	t.Helper()
	deadline := time.Now().Add(clusterWait)
	for {
		err := do()
		if !isLeaderChange(err) || time.Now().After(deadline) {
			return err
		}
		t.Logf("%v; retrying", err)
		time.Sleep(50 * time.Millisecond) // poll interval while the cluster elects
	}
}

// replyErr is v as an error, for retryLeaderChange, or nil if v is no
// error reply.
func replyErr(v Value) error {
	if v.IsError() {
		return errors.New(v.Str)
	}
	return nil
}

// DoRetry is Do for a command safe to repeat (see retryLeaderChange),
// sent again while the reply is a leader-change error. It returns the last
// reply, which the caller checks.
func (c *rawConn) DoRetry(args ...string) Value {
	c.t.Helper()
	var v Value
	retryLeaderChange(c.t, func() error {
		v = c.Do(args...)
		return replyErr(v)
	})
	return v
}
