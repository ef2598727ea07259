//go:build !linux

package server

import "errors"

// dupFD is never called where there are no event loops.
func dupFD(fd int) (int, error) { return -1, errors.New("no event loops here") }
