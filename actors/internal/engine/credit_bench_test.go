package engine

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/snapflow/snapflow/messages"
)

// BenchmarkCreditAccounting measures a sender's per-batch bookkeeping: send
// a batch on credit, queue one without credit, and release the queue when
// credit returns (the receiver is a no-op actor).
func BenchmarkCreditAccounting(b *testing.B) {
	system := actor.NewActorSystem()
	sink, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(actor.Context) {}), "sink")
	if err != nil {
		b.Fatal(err)
	}
	defer system.Root.StopFuture(sink).Wait()
	t := &task{sh: &shared{cfg: &config{credits: 8}}, root: system.Root, outs: []outChannel{{pid: sink}}, epoch: 1, ctr: new(taskCounters)}
	batch := any([]int64{1, 2, 3})
	credit := &messages.Credit{Epoch: 1, Channel: 0}
	b.ReportAllocs()
	for b.Loop() {
		t.Send(0, batch, nil) // no credit: queued
		credit.Granted++      // one more batch
		t.onCredit(credit)
	}
	if t.backlogged != 0 || len(t.outs[0].queue) != 0 {
		b.Fatalf("backlog left: %d", t.backlogged)
	}
}
