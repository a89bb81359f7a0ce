// Package window adds windowed aggregation to a keyed stream: tumbling,
// sliding and session windows, on event time or processing time, with an
// incremental aggregate (Aggregate, Reduce, Count) or a function that sees
// a window's records and bounds at once (Process).
//
//	bids := topology.KeyBy(bidStream, func(b Bid) int64 { return b.Auction })
//	counts := window.Count(window.Of(bids, window.Sliding(10*time.Second, 2*time.Second)), "bids-per-auction")
//
// A window's state is keyed state of the operator (one state, "window",
// per key), so it is checkpointed, restored, rescaled and checkpointed
// incrementally like any other, and it is cleared once the window can no
// longer fire. A sliding window keeps one accumulator per pane (a slice
// of the slide's length) and merges a window's panes when it fires, so a
// record costs one update whatever the number of windows it belongs to.
//
// On event time a window fires when the watermark passes its end; records
// need timestamps (see topology.WithWatermarks). A record whose windows
// have all passed their end plus the allowed lateness (default 0) is late:
// it goes to the side output given to LateTo, or is dropped. A record
// within the allowed lateness updates its windows, which fire again.
//
// docs/windows.md has the guide.
package window
