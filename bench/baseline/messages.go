package baseline

import "github.com/asynkron/protoactor-go/actor"

// batchMsg is a batch of items on a channel. ch is the sender's index among
// the receiver's inputs: a worker's one input is 0, the sink's inputs are the
// workers.
type batchMsg[T any] struct {
	ch    int
	items []T
}

// creditMsg returns credits to a sender, one per batch it carries back for
// reuse. ch is the index of the sender's output the credits are for.
type creditMsg[T any] struct {
	ch      int
	batches []*batchMsg[T]
}

// endMsg ends a channel: no batch follows it. A worker's end carries its
// final sums to the sink.
type endMsg struct {
	ch   int
	sums map[uint64]uint64
}

// wiring tells every actor of the pipeline where its peers are. The parent
// sends it to each child before the source starts.
type wiring struct {
	source  *actor.PID
	workers []*actor.PID
	sink    *actor.PID
}

type (
	pollMsg   struct{} // the source may generate more
	lingerMsg struct{} // flush partly filled batches
	stopMsg   struct{} // the run's context ended: the source stops and drains
)

var (
	thePoll   = &pollMsg{}
	theLinger = &lingerMsg{}
	theStop   = &stopMsg{}
)
