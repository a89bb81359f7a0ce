// Package incremental decides what a task uploads at each checkpoint when
// checkpoints are incremental: the key groups whose state changed since the
// checkpoint it builds on (its base), a few of the key groups stored longest
// ago, and, for every other key group, a reference to where an earlier
// checkpoint stored it.
//
// A Tracker is pure bookkeeping, with no I/O and no clock: the task feeds it
// the key groups its operator wrote (a bit set per snapshot), the handles of
// its uploads, and the base that each barrier names, and asks it for a Plan.
//
// # Protocol
//
// The checkpoint coordinator names, in every trigger and so in every
// barrier, the newest complete checkpoint (never a savepoint): the base.
// Retention keeps the newest complete checkpoint and every object a
// retained manifest references, and only one checkpoint is in flight at a
// time, so the objects of the base are in the store for as long as the
// checkpoint that references them can complete. A task that does not hold
// its own handle for the base (it was created after it, or restored at
// another parallelism), or when the base is 0, uploads its state in full.
//
// The key groups to upload are those written since the task's snapshot of
// the base: the union of the dirty sets of its snapshots taken after the
// base, including the current one. A key group that is in neither the
// upload nor the base's index was empty at the base and has not been
// written since: it stays empty.
//
// # Bounded references
//
// Each key group lives in exactly one object, so a restore reads one object
// per key group. To bound how many objects a task's state is spread over,
// and how long an old object is kept for the few key groups it still holds,
// each plan also uploads the ceil(n/RewriteEvery) clean key groups whose
// objects are oldest, n being the key groups the base holds: every key
// group is stored again at least once every RewriteEvery checkpoints, spread
// over them rather than as one full checkpoint now and then.
//
// The guide is docs/checkpoints.md (incremental checkpoints) in the repository.
package incremental
