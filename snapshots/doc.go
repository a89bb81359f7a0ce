// Package snapshots stores snapflow's checkpoints and savepoints.
//
// A [Store] is a flat key/value object store with atomic puts. [Dir] keeps
// objects in a local directory (the embedded default), [Mem] in memory,
// [MinIO] in a bucket of a MinIO (or other S3) server, and [Open] picks one
// from a URL such as s3://BUCKET/PREFIX?endpoint=HOST:PORT. Every
// implementation passes the conformance suite in package snapshotstest.
//
// # Layout
//
// [Checkpoints] keeps the checkpoints and savepoints of one job under
// these keys:
//
//	<job>/checkpoints/chk-<id>/e<epoch>/<task-id>.state       one per task, unless inline
//	<job>/checkpoints/chk-<id>/_manifest                      written last, only if absent
//	<job>/savepoints/<name>/chk-<id>/e<epoch>/<task-id>.state one per task, unless inline
//	<job>/savepoints/<name>/_manifest                         written last, only if absent
//	<job>/leases/<generation>.claim|.seal|.renewal            the job's lease
//	<job>/origin                                              where the job was started from
//
// (ids, epochs and generations are 20 digits; states of epoch 0, written
// by earlier versions, lie directly under chk-<id>).
//
// Ids start at 1 and are zero-padded so that key order is id order. A
// state's key names the epoch of the task that wrote it, so that two
// holders of the job never write the same key (see below). A
// savepoint's states lie under the id it was taken as, so that a failed
// attempt at the same name never touches them. An inline state (see
// [Checkpoints.SetInlineLimit]) has no object: its bytes are in the manifest. No key is
// a prefix directory of another, so a directory store holds them all.
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
// is still in flight, and recovery ignores it;
// [Checkpoints.DeleteIncomplete] removes the aborted ones.
//
// A manifest write can fail after the object is in place (the directory
// fsync fails after the rename, a PUT's response is lost). PutManifest then
// reads the manifest back, so that its result is the truth: nil when the
// manifest is in place, the write's error when it is absent, and an error
// wrapping [ErrManifestInDoubt] when nobody can tell. What a job reports
// about a checkpoint thus matches what recovery will use.
//
// # Usable checkpoints
//
// A complete checkpoint is usable when its manifest reads and validates and
// every state object it references reads back with the size and CRC-32C
// that the manifest records and names its task. [Checkpoints.LoadLatest]
// returns the newest usable checkpoint. A corrupt or missing object makes
// that checkpoint unusable, with an error logged, and recovery falls back
// to the previous one. When complete checkpoints exist but none is usable,
// LoadLatest fails with an error wrapping [ErrNoUsableCheckpoint] that
// names each one and its cause, rather than let a job start from nothing.
//
// [Checkpoints.Retain] keeps the newest N usable checkpoints, verifying
// what it counts (once per checkpoint and Checkpoints value: objects never
// change once written). Unusable checkpoints newer than the oldest retained
// usable one are kept for inspection without counting. Retain never deletes
// the newest usable checkpoint nor any object that a retained manifest
// references; [Checkpoints.Delete] removes the manifest before the objects,
// so a checkpoint stops being complete before it loses any object.
//
// # Incremental checkpoints
//
// A state handle indexes the key groups of its state (where each one's
// serialised KeyGroupState lies, with its CRC-32C), so that a restore at
// another parallelism reads only the key groups it needs
// ([Checkpoints.ReadKeyGroups], [Checkpoints.StreamKeyGroups]). An
// incremental state ([Checkpoints.PutTaskStateRefs]) stores only the key
// groups that changed, and its index also lists the others where earlier
// checkpoints of the job stored them: a section with the key of that
// object. [Sections] returns a handle's sections with their objects, for
// the next incremental state to reference; references are copied, never
// chained, so a restore reads each key group from exactly one object, and
// a checkpoint's manifest may reference only states of earlier checkpoints
// of its job. Reading an incremental state reads the referenced sections
// too (in parallel, one ranged read per run of adjacent sections), each
// checked against its CRC-32C, so a missing or corrupt referenced object
// makes every checkpoint that references it unusable. A streaming restore
// reads a state's non-keyed parts with [Checkpoints.ReadTaskStateHead],
// which skips the bytes of its key groups, and its key groups with
// [Checkpoints.StreamKeyGroups], in bounded memory.
//
// Small states travel inline ([Checkpoints.SetInlineLimit]): a state whose
// object would be at most the limit is not stored, and its handle carries
// the object's bytes into the manifest, so that a checkpoint of small
// tasks is one write. Every read uses those bytes, checked against the
// handle's size and CRC-32C; an inline state has no object to delete, nor
// to reference.
//
// Retention and deletion are reference-aware: [Checkpoints.Retain] keeps
// every object that a retained manifest references, also when it deletes
// the checkpoint that stored it; what is left of that checkpoint is a
// directory without a manifest, which [Checkpoints.Retain] and
// [Checkpoints.DeleteIncomplete] never delete while a complete manifest
// references it, and delete once nothing does. [Checkpoints.Delete] keeps
// what other checkpoints reference too.
//
// # Savepoints
//
// A savepoint is a checkpoint that the user triggers and names, for
// upgrades, moves and rescaling. Its states and manifest lie below
// [SavepointPrefix] ([Checkpoints.PutSavepointState],
// [Checkpoints.PutSavepointManifest]); it is self-contained (its manifest
// references no object outside its prefix, and no section of another
// object), complete if and only if its
// manifest exists, and never overwritten ([ErrSavepointExists]). Names
// follow [ValidateSavepointName]. The manifest's Savepoint field holds the
// name; its Operators, MaxParallelism and the key-group range of each task
// say how to redistribute the state over another parallelism.
//
// The user named the savepoint, so [Checkpoints.LoadSavepoint] never falls
// back: a missing or corrupt object is an error that names the savepoint
// and the key. [Checkpoints.LoadCheckpoint] does the same for a retained
// checkpoint named by id. Listing, retention and cleanup of checkpoints
// ([Checkpoints.List], [Checkpoints.Retain], [Checkpoints.DeleteIncomplete],
// [Checkpoints.DeleteAll]) never see or touch a savepoint; only
// [Checkpoints.DeleteSavepoint] deletes one.
//
// A job started from a savepoint or a retained checkpoint records that
// origin ([Checkpoints.PutOrigin]), with the first id of its new history.
// Until it completes a checkpoint of its own, recovery restores the origin
// again; afterwards [Checkpoints.LoadLatestSince] the first id finds its
// newest usable checkpoint, never one of the history before the origin.
// Retain keeps an origin checkpoint until the job has a usable checkpoint
// of its own, and DeleteAll deletes the origin.
//
// # One holder per job
//
// One job name on one store has one holder that writes: a job in one
// process, or a cluster's coordinator. [Checkpoints.AcquireLease] makes c
// the holder: it creates the lease's next generation only if absent
// ([Creator]), after the previous holder released it, or its process is
// gone on this host, or it has not renewed it for its TTL; or, with
// LeaseRequest.TakeOver, from a live holder, which is then fenced. Another
// live holder otherwise gets a [*LeaseHeldError] naming it. Each
// generation's epochs are [EpochsPerLease] above the previous one's.
//
// The holder lists the store, then [Checkpoints.SealLease] records the
// newest complete checkpoint it found: a manifest of an earlier holder
// with a higher id, or an origin it records, lands after the new holder
// looked and is void ([ErrVoid]): loads skip it and retention deletes it.
// Every write of a holder is fenced: state keys carry its epoch;
// manifests are created only if absent ([ErrCheckpointTaken]); manifests,
// origins and deletes check the lease first ([ErrLeaseLost]), a manifest
// again once in place, before anything commits at it; and a holder
// deletes no object of a later epoch. The lease lies outside the
// checkpoints' keys: listing, retention and cleanup ignore it, and
// [Checkpoints.DeleteAll] leaves it, so that starting a job over never
// lets a superseded holder take it back. docs/holder.md in the repository
// says why a paused holder that wakes up cannot change what its successor
// wrote, and what remains with a store that cannot create only if absent.
//
// # A guarded store
//
// Checkpoints calls its Store through a guard: a panic in any Store method
// (a bug in a user-written store, on the runtime's upload or retention
// goroutines) becomes an error wrapping [ErrStorePanic] that names the
// store, the method and the panic value, with the stack logged at Error
// level, instead of crashing the process.
package snapshots
