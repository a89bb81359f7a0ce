// Package filesink is an exactly-once file sink: a topology.TwoPhaseSink
// that writes each transaction to a part file under a hidden temporary
// name, and makes it visible by renaming it on commit.
//
// Each sink task writes its own part files, "part-<subtask>-<seq>", in one
// directory; a reader lists the names that do not start with a dot. The
// records of a transaction go to ".part-<subtask>-<seq>.inprogress", which
// is fsynced and closed at the checkpoint's barrier (pre-commit) and
// renamed to its final name when the checkpoint completes (commit), the
// directory fsynced after. A task that restores a checkpoint renames the
// part files the checkpoint pre-committed (if they were not renamed yet)
// and deletes every other in-progress file of its own: the records in them
// are replayed into new transactions. So every record is in exactly one
// visible part file once the job has finished, whatever failed on the way,
// given replayable sources and deterministic operators.
//
// Use it with topology.TwoPhaseCommitSink:
//
//	topology.TwoPhaseCommitSink(totals, "out", filesink.New(dir, filesink.Lines(format)))
package filesink
