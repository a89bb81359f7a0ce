// Package pieces decides how many records of a batch a task processes
// before it looks at its mailbox again, so that a checkpoint barrier that
// overtakes queued batches (unaligned checkpoints, or an alignment
// timeout) does not also wait for the whole batch in progress when records
// are slow.
//
// An Estimator learns the cost of a record from the batches and pieces
// the task has processed, and Len returns the records that fit in its
// target time. A task whose records are fast processes every batch whole:
// pieces only cost something where records take long.
package pieces
