// Package windows holds the window decisions of the runtime as pure types:
// which windows a record's timestamp belongs to (tumbling, sliding and
// session windows), how a sliding window is made of panes (the slices a
// sliding window's state is kept in, so that its cost does not grow with
// the number of windows a record belongs to), and how session windows
// merge as records arrive out of order.
//
// Times are int64 nanoseconds since the Unix epoch, as in package
// watermark. A window is [Start, End): a record at End belongs to the
// next one, and the window can fire once the watermark reaches End-1
// (MaxTimestamp).
package windows
