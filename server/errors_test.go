package server

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
)

// TestErrProposalLogWrite: a proposer that cannot write its log gets
// redis-server's MISCONF reply with the C library's text of the OS error.
func TestErrProposalLogWrite(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: wal: write failed: wal: preallocate /d/1.wal: %w", ErrLogWrite,
			&fs.PathError{Op: "write", Path: "/d/1.wal", Err: syscall.ENOSPC}),
			"MISCONF Errors writing to the AOF file: No space left on device"},
		{fmt.Errorf("%w: fsync: %w", ErrLogWrite, syscall.EIO),
			"MISCONF Errors writing to the AOF file: Input/output error"},
		{fmt.Errorf("%w: injected", ErrLogWrite),
			"MISCONF Errors writing to the AOF file: log write failed: injected"},
		{errors.New("other"), "ERR other"},
	} {
		for _, write := range []bool{true, false} {
			if got := errProposal(tc.err, write); got != tc.want {
				t.Errorf("errProposal(%v, %v) = %q, want %q", tc.err, write, got, tc.want)
			}
		}
	}
}
