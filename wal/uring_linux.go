package wal

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Why fdatasync goes through io_uring
//
// A goroutine that calls fdatasync(2) blocks its OS thread in the kernel for
// the whole flush, a few hundred microseconds. Go's scheduler then has to
// notice (sysmon polls every 20µs while such calls keep happening), hand the
// goroutine's P to another thread, and, when the call returns, park the
// returning thread and queue the flush goroutine behind whatever runs on
// the P meanwhile. Under group commit that is one long system call per
// batch, back to back, so sysmon never backs off and every batch pays the
// hand-offs: on a one-core server it was the largest single cost after the
// sockets themselves.
//
// Submitted to an io_uring instead, the fdatasync runs on a kernel worker,
// and its completion is signalled on an eventfd that Go's netpoller waits
// on like a socket. The waiting goroutine parks as it does on a channel; no
// thread blocks, sysmon has nothing to take back, and the flush goroutine
// is woken through the same path as a connection with new input. The data
// is made durable by the same fdatasync either way.
//
// Where io_uring is unavailable (old kernel, disabled by
// kernel.io_uring_disabled or a seccomp filter) or fails, Sync calls
// fdatasync directly, as before.

// io_uring ABI (linux/io_uring.h).
const (
	uringOffSQRing = 0
	uringOffCQRing = 0x8000000
	uringOffSQEs   = 0x10000000

	uringFeatSingleMmap = 1 << 0
	uringFeatNoDrop     = 1 << 1

	uringOpFsync       = 3
	uringFsyncDatasync = 1

	uringRegisterEventfd = 4

	uringEntries = 64
	sqeSize      = 64
	cqeSize      = 16
)

// uringParams is struct io_uring_params.
type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  struct {
		head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
		userAddr                                                        uint64
	}
	cqOff struct {
		head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
		userAddr                                                        uint64
	}
}

// uringSQE is struct io_uring_sqe, as far as an fsync uses it.
type uringSQE struct {
	opcode, flags uint8
	ioprio        uint16
	fd            int32
	off, addr     uint64
	len           uint32
	fsyncFlags    uint32
	userData      uint64
	_             [3]uint64
}

// uringCQE is struct io_uring_cqe.
type uringCQE struct {
	userData uint64
	res      int32
	flags    uint32
}

// syncRing is an io_uring used only for fdatasync. One serves the whole
// process: submissions take mu; a single goroutine reads the eventfd and
// hands each completion to the Sync waiting for it.
type syncRing struct {
	fd      int
	maps    [][]byte
	sqTail  *uint32
	sqHead  *uint32
	sqMask  uint32
	sqArray unsafe.Pointer // uint32 per entry
	sqes    unsafe.Pointer // uringSQE per entry
	cqHead  *uint32
	cqTail  *uint32
	cqMask  uint32
	cqes    unsafe.Pointer // uringCQE per entry
	event   *os.File       // the eventfd, non-blocking, in the netpoller

	// slots bounds the fsyncs in flight, so completions never outnumber
	// the completion queue.
	slots chan struct{}

	mu      sync.Mutex
	next    uint64
	waiters map[uint64]chan int32
	broken  bool // a submission failed; every Sync calls fdatasync itself

	completed atomic.Uint64 // fsyncs completed through the ring
}

var (
	theRing     atomic.Pointer[syncRing]
	theRingOnce sync.Once
)

// ringForSync returns the process's sync ring, setting it up on first use,
// or nil where io_uring cannot be used.
func ringForSync() *syncRing {
	theRingOnce.Do(func() {
		r, err := newSyncRing()
		if err == nil {
			theRing.Store(r)
		}
	})
	return theRing.Load()
}

func newSyncRing() (r *syncRing, err error) {
	var p uringParams
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uringEntries, uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, errno
	}
	r = &syncRing{fd: int(fd), waiters: make(map[uint64]chan int32)}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	// Without NODROP a completion could be lost when the queue is full;
	// the slots already prevent that, but a kernel this old is not worth
	// the doubt.
	if p.features&uringFeatNoDrop == 0 {
		return nil, errors.New("io_uring without IORING_FEAT_NODROP")
	}
	sqLen := int(p.sqOff.array + p.sqEntries*4)
	cqLen := int(p.cqOff.cqes + p.cqEntries*cqeSize)
	if p.features&uringFeatSingleMmap != 0 {
		sqLen = max(sqLen, cqLen)
		cqLen = sqLen
	}
	sq, err := r.mmap(uringOffSQRing, sqLen)
	if err != nil {
		return nil, err
	}
	cq := sq
	if p.features&uringFeatSingleMmap == 0 {
		if cq, err = r.mmap(uringOffCQRing, cqLen); err != nil {
			return nil, err
		}
	}
	sqes, err := r.mmap(uringOffSQEs, int(p.sqEntries)*sqeSize)
	if err != nil {
		return nil, err
	}
	r.sqHead = (*uint32)(unsafe.Pointer(&sq[p.sqOff.head]))
	r.sqTail = (*uint32)(unsafe.Pointer(&sq[p.sqOff.tail]))
	r.sqMask = *(*uint32)(unsafe.Pointer(&sq[p.sqOff.ringMask]))
	r.sqArray = unsafe.Pointer(&sq[p.sqOff.array])
	r.sqes = unsafe.Pointer(&sqes[0])
	r.cqHead = (*uint32)(unsafe.Pointer(&cq[p.cqOff.head]))
	r.cqTail = (*uint32)(unsafe.Pointer(&cq[p.cqOff.tail]))
	r.cqMask = *(*uint32)(unsafe.Pointer(&cq[p.cqOff.ringMask]))
	r.cqes = unsafe.Pointer(&cq[p.cqOff.cqes])
	r.slots = make(chan struct{}, min(p.sqEntries, p.cqEntries))

	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	r.event = os.NewFile(uintptr(efd), "io_uring-eventfd")
	e := int32(efd)
	if _, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), uringRegisterEventfd,
		uintptr(unsafe.Pointer(&e)), 1, 0, 0); errno != 0 {
		return nil, errno
	}
	go r.complete()
	return r, nil
}

func (r *syncRing) mmap(off int64, n int) ([]byte, error) {
	b, err := unix.Mmap(r.fd, off, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, err
	}
	r.maps = append(r.maps, b)
	return b, nil
}

// close releases a ring whose setup failed.
func (r *syncRing) close() {
	if r.event != nil {
		r.event.Close()
	}
	for _, b := range r.maps {
		unix.Munmap(b)
	}
	unix.Close(r.fd)
}

// fdatasync makes fd's data durable through the ring. ok is false when the
// ring could not take the request; the caller then calls fdatasync itself.
func (r *syncRing) fdatasync(fd uintptr) (err error, ok bool) {
	select {
	case r.slots <- struct{}{}:
	default:
		return nil, false // more fsyncs in flight than the queue holds
	}
	defer func() { <-r.slots }()
	done := make(chan int32, 1)
	r.mu.Lock()
	if r.broken {
		r.mu.Unlock()
		return nil, false
	}
	r.next++
	id := r.next
	tail := atomic.LoadUint32(r.sqTail)
	idx := tail & r.sqMask
	sqe := (*uringSQE)(unsafe.Add(r.sqes, uintptr(idx)*sqeSize))
	*sqe = uringSQE{opcode: uringOpFsync, fd: int32(fd), fsyncFlags: uringFsyncDatasync, userData: id}
	*(*uint32)(unsafe.Add(r.sqArray, uintptr(idx)*4)) = idx
	atomic.StoreUint32(r.sqTail, tail+1)
	r.waiters[id] = done
	for {
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 1, 0, 0, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 || n != 1 {
			// The entry was not taken. Take it back, and stop using the
			// ring: nothing else will ever submit it.
			if atomic.LoadUint32(r.sqHead) == tail {
				atomic.StoreUint32(r.sqTail, tail)
			}
			delete(r.waiters, id)
			r.broken = true
			r.mu.Unlock()
			return nil, false
		}
		break
	}
	r.mu.Unlock()
	switch res := <-done; {
	case res == -int32(syscall.EINTR) || res == -int32(syscall.EAGAIN):
		return nil, false // interrupted, not failed: the caller fsyncs itself
	case res < 0:
		return syscall.Errno(-res), true
	}
	return nil, true
}

// complete runs for the life of the process: it waits on the eventfd,
// through the netpoller, and hands every completion to its waiter.
func (r *syncRing) complete() {
	var buf [8]byte
	for {
		if _, err := r.event.Read(buf[:]); err != nil && !errors.Is(err, syscall.EINTR) {
			// The eventfd cannot fail while the process runs; if it did,
			// waiters would hang, so fail loudly instead.
			panic("wal: io_uring eventfd: " + err.Error())
		}
		r.mu.Lock()
		r.reapLocked()
		r.mu.Unlock()
	}
}

// poll hands out the completions already posted, if any, without waiting.
// The netpoller learns of a completion only when the scheduler next looks,
// after every goroutine ready to run has had its turn; on a busy server
// that is a long while, during which the log waits to start its next
// write and fsync. Appenders call poll, so the flush goroutine is woken
// as soon as one of them runs, and runs next.
func (r *syncRing) poll() {
	if atomic.LoadUint32(r.cqHead) == atomic.LoadUint32(r.cqTail) {
		return
	}
	if r.mu.TryLock() {
		r.reapLocked()
		r.mu.Unlock()
	}
}

// reapLocked hands every posted completion to its waiter.
func (r *syncRing) reapLocked() {
	for {
		head := atomic.LoadUint32(r.cqHead)
		if head == atomic.LoadUint32(r.cqTail) {
			return
		}
		cqe := (*uringCQE)(unsafe.Add(r.cqes, uintptr(head&r.cqMask)*cqeSize))
		id, res := cqe.userData, cqe.res
		atomic.StoreUint32(r.cqHead, head+1)
		r.completed.Add(1)
		if ch, ok := r.waiters[id]; ok {
			delete(r.waiters, id)
			ch <- res
		}
	}
}

// pollSyncs hands out finished fsyncs of the ring, if there is one.
func pollSyncs() {
	if r := theRing.Load(); r != nil {
		r.poll()
	}
}

// fsyncMethod names how Sync makes an OS file durable in this process.
func fsyncMethod() string {
	r := ringForSync()
	if r == nil {
		return "fdatasync"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.broken {
		return "fdatasync"
	}
	return "io_uring"
}
