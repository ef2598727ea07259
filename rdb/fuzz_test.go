package rdb

import (
	"bufio"
	"bytes"
	"errors"
	"testing"

	"kvs/fsm"
)

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

// FuzzRDB: whatever the bytes, the decoder and Load return an *Error or
// load, never panic; what loads writes back and loads again the same.
func FuzzRDB(f *testing.F) {
	for _, a := range assets {
		f.Add(readAsset(f, a.name))
	}
	f.Add(readAsset(f, "corrupt_ziplist"))
	f.Add(writeStore(f, sample(f, 4)))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := fsm.NewStore()
		st, err := Load(bytes.NewReader(b), s, LoadOptions{SkipOtherDBs: true})
		if err != nil {
			var re *Error
			if !errors.As(err, &re) || re.Offset < 0 || re.Offset > int64(len(b)) {
				t.Fatalf("error %v", err)
			}
			return
		}
		back := fsm.NewStore()
		st2, err := Load(bytes.NewReader(writeStore(t, s)), back, LoadOptions{})
		if err != nil {
			t.Fatalf("written back: %v", err)
		}
		if st2.Total() != s.Snapshot().Len() || st2.Functions != st.Functions {
			t.Fatalf("written back: %s, first %s", st2, st)
		}
	})
}
