// Package snapshots stores snapflow's checkpoints.
//
// A [Store] is a flat key/value object store with atomic puts. [Dir] keeps
// objects in a local directory (the embedded default), [Mem] in memory,
// [MinIO] in a bucket of a MinIO (or other S3) server, and [Open] picks one
// from a URL such as s3://BUCKET/PREFIX?endpoint=HOST:PORT. Every
// implementation passes the conformance suite in package snapshotstest.
//
// # Layout
//
// [Checkpoints] keeps the checkpoints of one job under these keys:
//
//	<job>/checkpoints/chk-<id, 20 digits>/<task-id>.state   one per task
//	<job>/checkpoints/chk-<id, 20 digits>/_manifest         written last
//
// Ids start at 1 and are zero-padded so that key order is id order.
//
// Every object is a messages.StoredObject envelope that names the kind of
// its payload and carries the payload's CRC-32C ([EncodeObject],
// [DecodeObject]). The manifest records, for each task, a
// messages.StateHandle with the key, size and CRC-32C of the stored state
// object, so a state is verified twice on the way back: against the handle
// and against its envelope.
//
// # The commit point
//
// A checkpoint is complete if and only if its manifest exists. The tasks
// write their states first ([Checkpoints.PutTaskState]); once every task
// has acknowledged, the coordinator writes the manifest
// ([Checkpoints.PutManifest]), and because Put is atomic, the checkpoint
// becomes complete at once. A checkpoint without a manifest was aborted or
// is still in flight, and recovery ignores it.
//
// [Checkpoints.LoadLatest] returns the newest complete checkpoint whose
// objects all verify. A corrupt or missing object makes that checkpoint
// unusable, with an error logged, and recovery falls back to the previous
// one. [Checkpoints.Retain] deletes old and aborted checkpoints, but never
// the newest complete one nor any object that a retained manifest
// references; [Checkpoints.Delete] removes the manifest before the objects,
// so a checkpoint stops being complete before it loses any object.
package snapshots
