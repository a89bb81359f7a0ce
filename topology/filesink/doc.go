// Package filesink is an exactly-once file sink: a topology.TwoPhaseSink
// that writes each transaction to a part file under a hidden temporary
// name, and makes it visible by renaming it on commit.
//
// Each sink task writes its own part files, "part-<subtask>-<seq>", in one
// directory; a reader lists the names that do not start with a dot. The
// records of a transaction go to ".part-<subtask>-<seq>.e<epoch>.inprogress",
// named by the incarnation of the task that writes it (see
// topology.Incarnation), which is fsynced and closed at the checkpoint's
// barrier (pre-commit) and given its final name when the checkpoint
// completes (commit: a hard link that never replaces a file, then the
// in-progress name removed, the directory fsynced after). A task that
// restores a checkpoint commits the part files the checkpoint
// pre-committed (if they were not committed yet) and deletes the other
// in-progress files of its own that older incarnations wrote: the records
// in them are replayed into new transactions.
//
// Incarnations fence each other: an incarnation that finds an in-progress
// file of a newer one (it ran in a process that was paused while the job
// moved on) fails with ErrSuperseded and touches nothing, and none deletes
// or replaces what a newer one wrote. So every record is in exactly one
// visible part file once the job has finished, whatever failed on the way,
// given replayable sources and deterministic operators.
//
// Use it with topology.TwoPhaseCommitSink:
//
//	topology.TwoPhaseCommitSink(totals, "out", filesink.New(dir, filesink.Lines(format)))
//
// The guide is docs/sources-and-sinks.md in the repository.
package filesink
