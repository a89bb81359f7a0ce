// Package diskstate keeps a task's keyed state on local disk, in an
// embedded LSM tree (cockroachdb/pebble), for state larger than memory.
//
// Each task incarnation opens a database of its own, in a fresh directory
// under the configured parent, and removes it when it closes: the
// durable copy of the state is the checkpoint in the snapshot store, never
// this directory. The write-ahead log is off for the same reason.
//
// Keys are laid out by key group first, so that a task's state is a set of
// key-group ranges (as in Flink's RocksDB backend):
//
//	value state: key group (2 bytes, big-endian) | state id (2 bytes) | key
//	map state:   key group | state id | uvarint(len(key)) | key | user key
//
// where key, user key and value are the bytes of the state's codecs, the
// same bytes a checkpoint stores, so that a snapshot copies them without
// decoding.
//
// A DB is used by one goroutine (the task's), except for the snapshots it
// hands out, which are read by the checkpoint's upload goroutine while the
// task goes on writing. Close waits for a snapshot being read, and a
// snapshot read after Close fails.
//
// A database whose files fail it (a directory removed, a disk full, a
// corrupt table) fails for good: every call returns the first error,
// wrapping ErrFailed, and OnFailure tells the task, which fails and is
// restored from its checkpoint into a new database (see failure.go).
package diskstate
