package engine

import (
	"testing"

	"github.com/asynkron/protoactor-go/remote"
	"github.com/snapflow/snapflow/internal/nodeauth"
	"github.com/snapflow/snapflow/messages"
	"google.golang.org/protobuf/proto"
)

// TestForeignWorker: a batch whose messages name only the sending node's
// workers passes, whatever else it holds; one message naming another
// node's worker, or none, is found.
func TestForeignWorker(t *testing.T) {
	own, other := nodeauth.WorkerID("aaaa", 2), nodeauth.WorkerID("bbbb", 1)
	batch := func(ms ...proto.Message) *remote.MessageBatch {
		b := &remote.MessageBatch{}
		for _, m := range ms {
			data, err := proto.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			b.TypeNames = append(b.TypeNames, string(proto.MessageName(m)))
			b.Envelopes = append(b.Envelopes, &remote.MessageEnvelope{TypeId: int32(len(b.TypeNames) - 1), MessageData: data})
		}
		return b
	}
	data := &messages.RecordBatch{Epoch: 1}
	if _, _, ok := foreignWorker(batch(data, &messages.AckCheckpoint{WorkerId: own, TaskId: "sum#0"}, &messages.TaskFailed{WorkerId: own}), "aaaa"); !ok {
		t.Error("a batch of the node's own worker was refused")
	}
	for _, m := range []proto.Message{
		&messages.AckCheckpoint{WorkerId: other, TaskId: "sum#0"},
		&messages.TaskFailed{WorkerId: other},
		&messages.TaskFinished{WorkerId: other},
		&messages.DeclineCheckpoint{WorkerId: other},
		&messages.HeartbeatAck{WorkerId: other},
		&messages.TaskFailed{},
	} {
		typ, worker, ok := foreignWorker(batch(data, m), "aaaa")
		if ok || typ != string(proto.MessageName(m)) {
			t.Errorf("%T naming %q: ok %v, type %q, worker %q; want it found", m, worker, ok, typ, worker)
		}
	}
}
