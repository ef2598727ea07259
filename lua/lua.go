// Package lua runs scripts in Redis's own Lua: Lua 5.1.5 with the cjson,
// cmsgpack, struct and bit libraries, as Redis 7.0.15 bundles them
// (deps/lua), compiled in with cgo, and Redis's sandbox and script API
// around it (glue.c, adapted from Redis's script_lua.c, eval.c and
// function_lua.c). Errors, numbers, libraries and the sandbox are
// Redis's, word for word; README names the files' origin and every change
// kvs makes to them.
//
// A State is one interpreter, built as Redis builds EVAL's (Eval) or
// FUNCTION's (Function). It is used by one goroutine at a time. What a
// script does reaches back through a Host: each redis.call is one call of
// Host.Call, which answers the command's reply as RESP bytes; the count
// hook calls Host.Checkpoint every so many Lua instructions (and at the
// next instruction after a Call that Host.Stopping says stopped the run),
// and that is the one place a run is stopped.
//
// Determinism: kvs runs a script that may write on every replica and at
// every replay, and every run must do the same. So each run starts from
// what a fresh interpreter has (redis.setresp(2), cjson's defaults,
// math.random seeded from the caller's seed), and the objects a run
// creates are numbered from the same start: Lua's tables hash a table,
// function, userdata or thread key by that number, and tostring prints
// it, instead of the object's address. No table is weak (the collector's
// timing differs from node to node), and collectgarbage and gcinfo report
// nothing of the heap.
//
// Nothing crosses from Lua into Go by longjmp: C calls Go only from the C
// functions a script calls, Go answers with a status, and the C side
// raises the Lua error, if any, after Go has returned. A panic in a Host
// method unwinds the script as a Lua error and is panicked again, in Go,
// once the run is over.
package lua

/*
#cgo CFLAGS: -O2 -DLUA_ANSI -DENABLE_CJSON_GLOBAL -DREDIS_STATIC= -DLUA_USE_MKSTEMP
#cgo LDFLAGS: -lm
#include <stdlib.h>
#include "glue.h"
*/
import "C"

import (
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Kind is which of Redis's two interpreters a State is.
type Kind int

const (
	// Eval is EVAL's interpreter: a script is a chunk run with KEYS and
	// ARGV as globals; redis.breakpoint, redis.debug and
	// redis.replicate_commands exist.
	Eval Kind = C.KVS_EVAL
	// Function is FUNCTION's: a library's top level sees only
	// redis.register_function, redis.log and the constants; the functions
	// it registers are called with keys and arguments as parameters.
	Function Kind = C.KVS_FUNCTION
)

// Ref names a compiled chunk in a State.
type Ref int

// Host is what a run calls back into. The arguments it is given alias
// the interpreter's memory and are valid only until the method returns:
// it copies what it keeps.
type Host interface {
	// Call runs redis.call's or redis.pcall's command and appends its
	// reply to reply as RESP in protocol resp (2, or 3 after
	// redis.setresp(3)), an error reply for a command refused.
	Call(args [][]byte, resp int, reply []byte) []byte
	// ACLCheck answers redis.acl_check_cmd: whether the script's user may
	// run args, or the error text ("ERR ...") to raise.
	ACLCheck(args [][]byte) (allowed bool, err string)
	// Checkpoint is called by the count hook after executed more
	// instructions of one Lua thread: it answers how many to run before
	// the next call, or stop, the error (as "CODE message" or a message
	// for code ERR) the run raises from there on.
	Checkpoint(executed int) (next int, stop string)
	// Stopping is asked after each Call: true if the run must stop
	// before its next instruction (the call found it stopped, and
	// refused). Checkpoint is then called at that instruction, to say
	// with what; the instructions since the last Checkpoint go uncounted.
	Stopping() bool
}

// State is one interpreter.
type State struct {
	*core
}

// core is what the C side's handle reaches (cores): all of a State but
// the value the cleanup watches.
type core struct {
	c        *C.kvs_state
	h        int // its index in cores
	host     Host
	panicked any
	// Reused from run to run: the keys and arguments passed in, the
	// arguments of a redis.call, and the reply built for it.
	args  []byte
	lens  []C.size_t
	argv  [][]byte
	reply []byte
}

// New returns a new interpreter of kind, sandboxed as Redis's. Close
// frees it; one that is dropped is freed when the garbage collector
// finds it.
func New(kind Kind) *State {
	c := &core{}
	c.h = cores.add(c)
	c.c = C.kvs_open(C.int(kind), C.uintptr_t(c.h))
	s := &State{c}
	runtime.AddCleanup(s, func(c *core) { c.close() }, c)
	return s
}

// Close frees the interpreter. It is idempotent.
func (s *State) Close() { s.core.close() }

func (c *core) close() {
	if c.c == nil {
		return
	}
	C.kvs_close(c.c)
	c.c = nil
	cores.remove(c.h)
}

// cores are the live interpreters' cores, by the handle their C state
// holds: a callback finds its core with one load and an index, where
// runtime/cgo's handles take a concurrent map's lookup.
var cores coreTable

type coreTable struct {
	mu   sync.Mutex // guards the writers: add, remove, free
	v    atomic.Pointer[[]*core]
	free []int // indexes of removed cores, reused
}

func (t *coreTable) add(c *core) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	var old []*core
	if p := t.v.Load(); p != nil {
		old = *p
	}
	if n := len(t.free); n > 0 {
		h := t.free[n-1]
		t.free = t.free[:n-1]
		t.set(old, h, c)
		return h
	}
	next := append(old[:len(old):len(old)], c)
	t.v.Store(&next)
	return len(next) - 1
}

func (t *coreTable) remove(h int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.set(*t.v.Load(), h, nil)
	t.free = append(t.free, h)
}

// set publishes a copy of cores with cores[h] = c: readers never see a
// slice change under them.
func (t *coreTable) set(cores []*core, h int, c *core) {
	next := append([]*core(nil), cores...)
	next[h] = c
	t.v.Store(&next)
}

func (t *coreTable) get(h C.uintptr_t) *core { return (*t.v.Load())[h] }

// Load compiles code as chunk name ("@user_script"), which runs it in the
// interpreter's globals. It returns the chunk, kept until Unref, or Lua's
// error message.
func (s *State) Load(code, name string) (Ref, string) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var p *C.char
	if len(code) > 0 {
		p = (*C.char)(unsafe.Pointer(unsafe.StringData(code)))
	}
	ref := C.kvs_load(s.c, p, C.size_t(len(code)), cname)
	if ref == 0 {
		return 0, string(s.out())
	}
	return Ref(ref), ""
}

// Memory is the bytes the interpreter's heap holds, in whole KiB, as
// Redis's INFO reports it.
func (s *State) Memory() int64 { return int64(C.kvs_memory(s.c)) }

// Unref forgets a chunk Load returned.
func (s *State) Unref(r Ref) { C.kvs_unref(s.c, C.int(r)) }

// Run runs the script r (an Eval State's) with KEYS keys and ARGV args,
// and returns its reply, or its error, as RESP3; the bytes are valid
// until the next call on s. name is what errors call the script (its
// SHA1), seed seeds math.random, and hook, if not 0, is the number of
// instructions before the first host.Checkpoint.
func (s *State) Run(r Ref, name string, keys, args [][]byte, seed uint64, hook int, host Host) []byte {
	nameP, argsP, lensP := s.prepare(name, keys, args)
	s.host = host
	C.kvs_run(s.c, C.int(r), nameP, argsP, lensP, C.int(len(keys)), C.int(len(args)), C.uint64_t(seed), C.int(hook))
	s.finish()
	return s.out()
}

// Registered is a function a library registered.
type Registered struct {
	Name    string
	Desc    string
	HasDesc bool
	// Flags has bit i set for the i-th of FlagNames.
	Flags int
}

// FlagNames are the flags a function or script may declare, in Redis's
// order.
var FlagNames = []string{"no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys"}

// Library runs the top level of the library r (a Function State's, its
// code compiled as "@user_function") as FUNCTION LOAD does, and returns
// what it registered, or the error Redis puts after "Error registering
// functions: " ("ERR ..."). hook is as Run's; host only answers
// Checkpoint.
func (s *State) Library(r Ref, hook int, host Host) ([]Registered, string) {
	s.host = host
	rc := C.kvs_library(s.c, C.int(r), C.int(hook))
	s.finish()
	if rc != C.KVS_RUN_OK {
		return nil, string(s.out())
	}
	return decodeRegistered(s.out()), ""
}

// FCall runs the library r's top level again, then its function fname
// with keys and args, as Run runs a script. It returns the reply, or
// loadErr if the top level failed this time (the text Library returns).
func (s *State) FCall(r Ref, fname string, keys, args [][]byte, seed uint64, hook int, host Host) (reply []byte, loadErr string) {
	nameP, argsP, lensP := s.prepare(fname, keys, args)
	s.host = host
	rc := C.kvs_fcall(s.c, C.int(r), nameP, argsP, lensP, C.int(len(keys)), C.int(len(args)), C.uint64_t(seed), C.int(hook))
	s.finish()
	if rc != C.KVS_RUN_OK {
		return nil, string(s.out())
	}
	return s.out(), ""
}

// prepare lays out name (NUL-terminated), the keys and the arguments one
// after the other in s.args, and their lengths in s.lens: Go memory
// without pointers, which C may read for the length of the call.
func (s *State) prepare(name string, keys, args [][]byte) (nameP, argsP *C.char, lensP *C.size_t) {
	b := append(append(s.args[:0], name...), 0)
	lens := s.lens[:0]
	for _, set := range [2][][]byte{keys, args} {
		for _, a := range set {
			b = append(b, a...)
			lens = append(lens, C.size_t(len(a)))
		}
	}
	s.args, s.lens = b, lens
	nameP = (*C.char)(unsafe.Pointer(&b[0]))
	if len(b) > len(name)+1 {
		argsP = (*C.char)(unsafe.Pointer(&b[len(name)+1]))
	}
	if len(lens) > 0 {
		lensP = &lens[0]
	}
	return nameP, argsP, lensP
}

// finish ends a call into C: the host is dropped, and a panic of one of
// its methods, which the script was unwound for, goes on in Go.
func (s *State) finish() {
	s.host = nil
	if p := s.panicked; p != nil {
		s.panicked = nil
		panic(p)
	}
}

// out is the C side's answer: a reply, an error text.
func (s *State) out() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(s.c.out.p)), int(s.c.out.len))
}

// decodeRegistered reads glue.c's listFuncs.
func decodeRegistered(b []byte) []Registered {
	var out []Registered
	word := func() int {
		v := binary.LittleEndian.Uint32(b)
		b = b[4:]
		return int(v)
	}
	for len(b) > 0 {
		var f Registered
		n := word()
		f.Name, b = string(b[:n]), b[n:]
		f.Flags = word()
		f.HasDesc = word() != 0
		n = word()
		f.Desc, b = string(b[:n]), b[n:]
		out = append(out, f)
	}
	return out
}

// setIn hands b to the C side as the answer of a callback.
func (c *core) setIn(b []byte) {
	in := &c.c.in
	in.len = 0
	if C.size_t(len(b)) > in.cap {
		C.kvs_reserve(in, C.size_t(len(b)))
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(in.p)), len(b)), b)
	in.len = C.size_t(len(b))
}

// callArgs views the C arguments as Go slices, without copying.
func (c *core) callArgs(argv *C.kvs_arg, argc C.int) [][]byte {
	args := c.argv[:0]
	for _, a := range unsafe.Slice(argv, int(argc)) {
		args = append(args, unsafe.Slice((*byte)(unsafe.Pointer(a.p)), int(a.len)))
	}
	c.argv = args
	return args
}

//export kvsGoCall
func kvsGoCall(h C.uintptr_t, op C.int, argv *C.kvs_arg, argc C.int) (rc C.int) {
	c := cores.get(h)
	defer func() {
		if p := recover(); p != nil {
			c.panicked, rc = p, C.KVS_PANIC
		}
	}()
	args := c.callArgs(argv, argc)
	switch op {
	case C.KVS_OP_CALL:
		c.reply = c.host.Call(args, int(c.c.resp), c.reply[:0])
		if c.host.Stopping() {
			rc = C.KVS_CHECKPOINT
		}
	case C.KVS_OP_ACL:
		ok, e := c.host.ACLCheck(args)
		switch {
		case e != "":
			c.reply = append(append(append(c.reply[:0], '-'), e...), '\r', '\n')
		case ok:
			c.reply = append(c.reply[:0], ":1\r\n"...)
		default:
			c.reply = append(c.reply[:0], ":0\r\n"...)
		}
	case C.KVS_OP_SHA1:
		sum := sha1.Sum(args[0])
		c.reply = hex.AppendEncode(c.reply[:0], sum[:])
	}
	c.setIn(c.reply)
	return rc
}

// kvsGoCheckpoint is what the count hook calls: the host's Checkpoint.
//
//export kvsGoCheckpoint
func kvsGoCheckpoint(h C.uintptr_t, executed C.int, next *C.int) (rc C.int) {
	c := cores.get(h)
	defer func() {
		if p := recover(); p != nil {
			c.panicked, rc = p, C.KVS_PANIC
		}
	}()
	n, stop := c.host.Checkpoint(int(executed))
	if stop != "" {
		c.setIn([]byte(stop))
		return C.KVS_STOP
	}
	*next = C.int(n)
	return C.KVS_OK
}
