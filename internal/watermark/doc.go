// Package watermark holds the event-time decisions of the runtime, as pure
// types that the task actors drive: how a source derives its watermark
// from the timestamps it has read (Generator, with bounded out-of-order
// records and idleness), and how a task combines the watermarks of its
// inputs, or a source task those of its splits (Combiner).
//
// Times are int64 nanoseconds since the Unix epoch. Min means no
// watermark yet; Max is the end of event time, the watermark of an input
// that has ended.
//
// The rules, which are Flink's:
//   - An input's watermark never goes back: a lower one is ignored.
//   - A task's watermark is the minimum over its inputs that are not idle,
//     an ended input counting as Max. It never goes back either: an input
//     that becomes active again behind it holds nothing back, and its
//     records behind the watermark are late.
//   - When every input is idle the task is idle, and its watermark moves
//     up to the highest of its inputs' watermarks: nothing is coming that
//     could be held back.
//   - When every input has ended, the watermark is Max.
package watermark
