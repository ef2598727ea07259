//go:build !linux

package server

import (
	"errors"
	"net"
	"sync/atomic"
)

// loop is the event loop of loop_linux.go; elsewhere every connection is
// served by a goroutine of its own.
type loop struct {
	doneBefore atomic.Int64
	blocking   atomic.Bool
	orderHeld  []*client
	orderAt    int64
	orderFirst int64
}

// fdReader is loop_linux.go's socket reader.
type fdReader struct{}

func (*client) kernelArrival() int64      { return 0 }
func stampArrivals(*Server, net.Listener) {}

func newLoops(*Server, int) ([]*loop, error) {
	return nil, errors.New("server: no event loop on this system")
}

func (*loop) add(*client) bool         { return false }
func (*loop) run()                     {}
func (*loop) stop(bool)                {}
func (*loop) wakeBlocked(*client)      {}
func (*loop) pushReady(*client)        {}
func (*loop) endSlice(*client) bool    { return false }
func (*loop) checkLimitsSoon()         {}
func (*loop) clientsCronSoon()         {}
func (*loop) kill(*client)             {}
func (*loop) wakeHeld(*client)         {}
func (*loop) signal()                  {}
func (*loop) quietNow() bool           { return true }
func (*loop) run1(*client, [][][]byte) {}
func (*loop) wakeOrdered(*orderWaiter) {}
func (*loop) offLoop(*client, func())  {}

func (o *orderBarrier) accept(ln net.Listener) (net.Conn, error) {
	nc, err := ln.Accept()
	if err == nil {
		o.entering.Add(1)
	}
	return nc, err
}
