// Package wal is kvs's group-committed append log: a directory of segment
// files holding framed, checksummed records, snapshots that let old segments
// be deleted, and recovery that replays what is durable.
//
// # Contract
//
// Records are opaque bytes. Each Append writes exactly one record and gives it
// the next index; indexes start at 1 and are consecutive for the life of the
// log, across restarts and compactions. The log hands every durable record to
// Options.Apply exactly once per process, in index order: on replay during
// Open (records after the newest snapshot) and on the live path. Apply's
// result is returned by the Append that wrote the record.
//
// When a record is applied depends on the fsync policy:
//
//   - FsyncAlways (the zero value): Append returns only after the record is
//     fsynced, and the record is applied only then, by the flush goroutine.
//     Nothing a reader can see is taken back by a crash.
//   - FsyncEverySec: Append returns once the record is written to its
//     segment (one write call for everything that accumulated, as under
//     FsyncAlways) and applied, by the flush goroutine; the OS holds it, so
//     a crash of the process loses nothing, one of the machine can. The
//     flush goroutine fsyncs about once a second.
//   - FsyncNo: as FsyncEverySec, but fsync happens only when a segment is
//     closed, on Sync and on Close.
//
// With FsyncEverySec and FsyncNo, an Append waits when 16 MiB of records
// already wait for the flush goroutine, so a slow disk slows appenders
// instead of growing memory.
//
// Lock order: Apply runs on the flush goroutine, in index order, with none
// of the log's mutexes held; it must not call back into the Log. Snapshot
// is called without any lock of the log held. The log never holds two of
// its own mutexes at once.
//
// # Group commit
//
// Appenders frame their record into one pending buffer under a small mutex.
// One flush goroutine loops: it takes everything that accumulated, writes it
// with one write call and starts one fsync for it. Records arriving while an
// fsync runs go into a later write. There are no timers on this path: the
// fsync itself is what batches. Under FsyncEverySec and FsyncNo, where
// appenders wait only for the write, the flush goroutine yields the
// processor once when an appender wakes it, so the connections that are
// ready to append go into that write too.
//
// Fsyncs may be pipelined: with Options.SyncDepth above 1 (it is 1 by
// default), up to that many run at once, each on a syncer goroutine, so the
// next batch is written and its fsync started while the previous one's is
// still running. Writes stay
// serial and in index order; only the flush goroutine writes. A batch is
// released (its records applied in order, its appenders answered) only when
// its own fsync has returned and every earlier batch has been released, so
// apply order is log order whatever order the fsyncs return in. With
// SyncDepth 1 one fsync runs at a time, and when it returns the flush
// goroutine first writes what arrived meanwhile and starts that fsync, then
// applies and answers the batch that just became durable.
//
// On Linux the fsync is an fdatasync submitted to an io_uring, whose
// completion wakes the syncer through the netpoller (see uring_linux.go);
// appenders also look for finished fsyncs when they append, so a busy
// server starts its next fsync without waiting for the scheduler to poll.
//
// After a failed write or fsync that batch, every batch after it (even one
// whose own fsync succeeded, since on Linux a later fsync can succeed after
// the data of an earlier failed one was dropped) and every later Append get
// the failure until the log is repaired (see "Write failures"), so nothing
// written after a failed fsync is acknowledged on its strength.
//
// With FsyncAlways the active segment is preallocated: the flush goroutine
// keeps a region of zeros, really written and fdatasynced, after the last
// record, and writes each batch over those zeros at its offset. The file
// size then does not change per batch, so the batch's fdatasync writes data
// only, not the inode as well, which on the disk kvs was measured on took
// it from about 300 to 170 µs. When a batch would pass the zeros, the
// segment is first extended by a 1 MiB chunk (zeros written, not
// fallocated: unwritten extents would need metadata at every fdatasync
// again) and fdatasynced, before any record is written into it. A segment
// is trimmed to its last record and fsynced before it is closed (and the
// active one on Close), so only the newest segment can carry zeros.
//
// Closing a segment (when it is full, or for compaction), Sync and Close
// first wait for every running fsync and release its batch, so no fsync is
// ever running on a segment that is closed, and Sync and Close return only
// once everything before them is durable.
//
// # Write failures
//
// A failed write, fsync, preallocation, trim or segment creation (a full
// disk, an I/O error) puts the log in its failed state: Err returns the
// failure, which wraps ErrWriteFailed and names the file and the OS's
// error, and every Append, AppendFunc and Sync fails with it at once.
// Records already waiting get it too and are never applied. The flush
// goroutine then tries to repair the log, first after 50 ms and then at
// doubling intervals of up to a second, and clears the failure only once a
// repair succeeded; Close tries once more. A repair keeps exactly the
// records that were applied:
//
//   - Under FsyncAlways, and after a failed write under the other policies,
//     the active segment is cut back to the end of the last batch applied:
//     the page holding that end is written again (its write-back may have
//     been torn with the failed one), the file is truncated there and
//     fsynced. A segment that a failed rotation created is removed. The
//     indexes of the records cut away are given out again, so indexes stay
//     consecutive.
//   - After a failed fsync under FsyncEverySec and FsyncNo, records that
//     were applied and acknowledged may be missing from the disk, and no
//     later fsync of those bytes can be trusted. The repair writes the
//     applied state as a snapshot (Options.Snapshot, as compaction does),
//     continues in a new segment after it and deletes the segments it
//     covers. Without Options.Snapshot such a log stays failed.
//
// A repair also checks that the log has room to go on (under FsyncAlways
// by preallocating a whole chunk past the kept records, otherwise by
// writing as many zeros and cutting them off), so that a disk that is
// still full keeps the log failed rather than failing the next append.
//
// So under FsyncAlways a record that got an error is never applied in
// this process, and after a repair never on a restart either; only a crash
// between the failure and the repair can leave a record whose own fsync
// reported failure on disk, to be replayed at the next start, as a crash
// just before the acknowledgement would. Under FsyncEverySec and FsyncNo,
// acknowledged records that a failed fsync dropped are durable again once
// the repair succeeded, and lost if the machine fails before.
//
// # Record format
//
// A segment is a sequence of records, all integers little-endian:
//
//	+---------+---------+-----------+------------------+
//	| crc u32 | len u32 | index u64 | payload len bytes |
//	+---------+---------+-----------+------------------+
//	 0         4         8           16
//
// crc is CRC-32C (Castagnoli) over payload, then len and index as they appear
// in the header (bytes 4..16). Putting the payload first lets an appender
// checksum it before it takes the append mutex, where the index is assigned.
// The index in every record lets recovery tell a stale or misplaced record
// from the one it expects. A record's payload is at most MaxRecordSize bytes.
//
// The newest segment may end with zero bytes after its last record:
// preallocated space (see "Group commit"). Every other segment ends exactly
// at its last record.
//
// Segment files are named by the index of their first record, in 20 decimal
// digits: 00000000000000000001.wal. A segment is closed once it passes
// Options.SegmentSize: its zero tail is truncated away, it is fsynced, and
// only then is the next segment created and the directory fsynced, so that
// a crash at any point leaves the zeros, if any, in the newest segment.
//
// # Snapshot format
//
// A snapshot file, snapshot-<index, 20 digits>.snap, holds the state after
// applying every record up to and including index:
//
//	+------------+-------------+--------------+-----------+
//	| magic [8]  | version u32 | reserved u32 | index u64 |   header, 24 bytes
//	+------------+-------------+--------------+-----------+
//	| body: whatever Options.Snapshot's write func wrote   |
//	+-------------+------------+-------------------------+
//	| length u64  | crc u32    |                             trailer, 12 bytes
//	+-------------+------------+
//
// magic is "kvs-snap", version is 1, length is the body's size and crc is
// CRC-32C over header and body. The checksum sits in a trailer so the body
// can be streamed. A snapshot is written to a .tmp file, fsynced, renamed into
// place and the directory fsynced, so a snapshot file either is complete or
// does not exist.
//
// # Compaction
//
// Once Options.CompactBytes of log were written since the last snapshot (or
// on Compact), the log calls Options.Snapshot, which captures the applied
// state cheaply and returns the index it covers and a function that writes
// it. In the background, the log fsyncs everything appended so far, closes
// the active segment so that the covered records sit in closed segments,
// writes the snapshot file and reads it back whole (header, length and
// CRC). Only then does it delete what the previous snapshot covers: every
// older snapshot, and every segment whose records that one covers. The
// previous snapshot and the log after it stay, so that a newest snapshot
// found damaged later can be replaced by them without loss. A snapshot
// that fails to read back is renamed to .broken and nothing is deleted.
// Appends continue meanwhile.
//
// Seed writes such a snapshot into an empty directory, for a log that is
// to start from a restored backup: Open then restores it and appends after
// its index.
//
// # Recovery
//
// Open loads the newest snapshot (Options.Restore) and replays every record
// after it. A snapshot that fails its checks, or that Restore rejects, is
// logged at error level with file, offset and damage, and the one before it
// is tried; the log after that one must then reach at least the damaged
// snapshot's index, or Open fails with ErrCorrupt naming the records no
// readable file holds. Judgement on bad records, as etcd's wal does it:
//
//   - Nothing but zero bytes after the last valid record of the newest
//     segment is preallocated space (or space a crash left unwritten): it
//     is truncated away, logged only at debug level, and the next append
//     preallocates again.
//   - A bad record in the newest segment is a torn write from a crash, and is
//     truncated away (logged with the number of bytes cut), when no valid
//     record follows it, or when an all-zero 512-byte sector lies between it
//     and the next valid record (a page the crash never wrote).
//   - Anything else is corruption: a bad record in an older segment, a bad
//     record followed by valid ones (unless a zero sector lies between, as
//     above), a record with an unexpected index, a gap
//     between segments. Open fails with an error wrapping ErrCorrupt that
//     names the file and byte offset.
//   - Before failing, Open logs what a repair would cut. With
//     Options.Repair, Open instead cuts the log at the first corrupt record,
//     first logging at error level exactly what it cuts: each file and byte
//     range, the index range and count of the records lost (those the
//     snapshot does not cover), and the keys they touch as
//     Options.RecordKeys names them (for records that still pass their
//     CRC). Then the bytes from the damage to the end of that segment are
//     copied to <segment>.broken, the segment is truncated, every later
//     segment and every damaged snapshot is renamed to <name>.broken, and
//     the log continues from the last good record. Nothing is deleted.
//   - A repair that would leave nothing (no usable snapshot, no record
//     kept) fails with ErrRepairEmpty, cutting nothing, unless
//     Options.RepairAllowEmpty is set.
//
// Empty segment files, an empty directory and a missing directory (created)
// are all valid logs.
//
// # Files
//
// All file access goes through FS. OSFS is the real file system; MemFS is a
// strict in-memory file system for tests that forgets everything not fsynced
// (file data, and directory entries not followed by a directory sync) when
// power is cut.
package wal
