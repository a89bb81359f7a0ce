// Package engine is snapflow's runtime behind the public packages actors,
// actors/cluster and actors/actorstest, which expose it through aliases and
// thin wrappers: the job actor (checkpoint coordination, recovery,
// savepoints, the lease), the task actors (batches, credits, barrier
// alignment, snapshots), and cluster mode's coordinator and worker hosts
// over protoactor-go's remote. With the rest of actors/ it is the only code
// that imports protoactor-go; the decisions it takes are pure types of
// actors/align, actors/coordinator, actors/membership, actors/restart and
// actors/linkwatch.
//
// The guide to what it does is docs/concepts.md, docs/checkpoints.md,
// docs/recovery.md and docs/cluster.md in the repository.
package engine
