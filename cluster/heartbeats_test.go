package cluster

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestEndHeartbeats: ending heartbeats waits for the one being handled,
// and none reaches raft after it (Close closes the stores only then).
func TestEndHeartbeats(t *testing.T) {
	tr := newPushTransport(nil, nil, nil, discardLogger())
	entered, release := make(chan struct{}), make(chan struct{})
	var calls, finished atomic.Int32
	beat := tr.guardBeats(func(raft.RPC) {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		finished.Add(1)
	})
	go beat(raft.RPC{})
	<-entered

	ended := make(chan int32)
	go func() {
		tr.endHeartbeats()
		ended <- finished.Load()
	}()
	// Give a broken endHeartbeats the chance to return early; a working
	// one returns only after the release, whatever the pause.
	time.Sleep(20 * time.Millisecond)
	close(release)
	if n := <-ended; n != 1 {
		t.Fatalf("endHeartbeats returned with the heartbeat in flight unfinished (%d finished)", n)
	}
	beat(raft.RPC{})
	if n := calls.Load(); n != 1 {
		t.Fatalf("a heartbeat reached raft after endHeartbeats (%d calls)", n)
	}
}
