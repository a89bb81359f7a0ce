// Package timers is the timer queue behind the timers of keyed process
// functions: a set of (key, time) pairs, at most one per pair, that hands
// them out in time order once they are due.
//
// A Queue serves one time domain (event time or processing time); a keyed
// operator keeps one per domain. Each timer also carries the key group of
// its key, so that the runtime can snapshot the timers of some key groups
// only (incremental checkpoints) and a rescaled task can take the key
// groups it owns.
//
// Timers are ordered by time, then by key: the order in which they fire
// depends on nothing but the set of pending timers, so a job restored from
// a checkpoint fires them in the order a run without the failure would.
//
// The queue is a 4-ary heap of the timers with an index from (key, time)
// to the timer's place: registering, deleting and firing a timer each cost O(log n), and n
// pending timers take memory in proportion to n (about 90 bytes each for
// an int64 key); a queue that has grown reuses its slots. It is not safe
// for concurrent use; the task actor owns it.
package timers
