// Package nexmark is the Nexmark benchmark on snapflow: the online-auction
// event model (persons, auctions and bids in the proportions 2%, 6% and
// 92%), a deterministic split source that generates it with event time,
// the standard queries q0, q1, q2, q3, q4, q5, q7, q8 and q11 written with
// the public API (topology, topology/window) as a user would write them,
// and for each query a plain single-goroutine Go implementation that is
// both the reference its output is checked against and the hand-written
// loop the benchmark compares the runtime with.
//
// The model follows the public Nexmark specification (the nexmark/nexmark
// repository and Beam's Nexmark suite): event n is a person when n%50 is
// 0, an auction when it is 1 to 3, and a bid otherwise; ids are dense and
// derived from n, so a bid refers to an auction and a person that exist.
// Every field of an event is a function of the seed and n alone, so a
// split replays exactly after a failure. The generator's text fields are
// drawn from small fixed tables, and it has no padding "extra" field:
// its events are smaller than the reference generator's.
//
// docs/performance.md has the benchmark's table.
package nexmark
