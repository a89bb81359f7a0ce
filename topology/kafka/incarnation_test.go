package kafka_test

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/topology"
	"github.com/snapflow/snapflow/topology/kafka"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// firstEpoch is the first incarnation of a lease generation (see
// snapshots.EpochsPerLease); the tests number theirs from it.
const firstEpoch = 1 << 20

func encodeValue(v int64) ([]byte, []byte) { return nil, binary.BigEndian.AppendUint64(nil, uint64(v)) }

func span(from, to int64) []int64 {
	vs := make([]int64, 0, to-from)
	for v := from; v < to; v++ {
		vs = append(vs, v)
	}
	return vs
}

// incarnation is one incarnation of sink task 0, driven as the runtime
// drives it.
type incarnation struct {
	t    *testing.T
	ctx  context.Context
	sink topology.TwoPhaseSink[int64]
}

func newIncarnation(t *testing.T, cfg kafka.SinkConfig, epoch uint64) *incarnation {
	t.Helper()
	in := &incarnation{t: t, ctx: topology.WithIncarnation(context.Background(), epoch), sink: kafka.NewSinkTask(cfg, 0, encodeValue)}
	t.Cleanup(func() { in.sink.Close() })
	return in
}

// preCommit begins a transaction after checkpoint after, writes the values
// of [from, to) into it, and pre-commits it.
func (in *incarnation) preCommit(after uint64, from, to int64) []byte {
	in.t.Helper()
	h, err := in.sink.Begin(in.ctx, after)
	if err != nil {
		in.t.Fatal(err)
	}
	if err := in.sink.Write(in.ctx, h, span(from, to)); err != nil {
		in.t.Fatal(err)
	}
	p, err := in.sink.PreCommit(in.ctx, h)
	if err != nil {
		in.t.Fatal(err)
	}
	return p
}

// openTransactions returns the transactional ids of prefix whose
// transactions are open.
func openTransactions(t *testing.T, brokers []string, prefix string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrListTransactionsRequest()
	req.StateFilters = []string{"Ongoing"}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range resp.TransactionStates {
		if strings.HasPrefix(s.TransactionalID, prefix) {
			ids = append(ids, s.TransactionalID)
		}
	}
	return ids
}

// wantValues checks that the committed output holds each value of [from,
// to) of every span once, and nothing else.
func wantValues(t *testing.T, seen map[int64]int, spans ...[2]int64) {
	t.Helper()
	want := 0
	for _, s := range spans {
		for v := s[0]; v < s[1]; v++ {
			if seen[v] != 1 {
				t.Errorf("value %d committed %d times, want once", v, seen[v])
			}
		}
		want += int(s[1] - s[0])
	}
	if len(seen) != want {
		t.Errorf("%d distinct values committed, want %d", len(seen), want)
	}
}

// TestSinkIncarnationsFenceOlderOnly: incarnation 1 of a sink task
// pre-commits checkpoint 1's transaction, and checkpoint 2's, which never
// completes. Incarnation 3 restores checkpoint 1: it commits checkpoint 1's
// transaction and aborts incarnation 1's other one at once (nothing is left
// open for the broker's ten-minute timeout), and pre-commits a transaction
// of its own. Then incarnation 2, whose process was paused before its
// recovery, wakes and recovers checkpoint 1 too: it fails with
// ErrSuperseded and leaves incarnation 3's transaction alone, which
// commits. Incarnation 1 cannot commit what it left. The committed output
// holds checkpoint 1's values and incarnation 3's once, and nothing of the
// aborted transaction.
func TestSinkIncarnationsFenceOlderOnly(t *testing.T) {
	brokers := startKafka(t, "out")
	cfg := kafka.SinkConfig{Brokers: brokers, Topic: "out", TransactionalIDPrefix: "inc", PoolSize: 3, TransactionTimeout: 10 * time.Minute}

	one := newIncarnation(t, cfg, firstEpoch+1)
	if err := one.sink.Recover(one.ctx, 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	p1 := one.preCommit(0, 0, 100)
	p2 := one.preCommit(1, 100, 200) // checkpoint 2 never completes

	three := newIncarnation(t, cfg, firstEpoch+3)
	if err := three.sink.Recover(three.ctx, 1, [][]byte{p1}, p2); err != nil {
		t.Fatal(err)
	}
	if open := openTransactions(t, brokers, "inc-"); len(open) != 0 {
		t.Fatalf("after incarnation 3's recovery, transactions %q are open, want none (incarnation 1's aborted)", open)
	}
	p3 := three.preCommit(1, 200, 300)

	two := newIncarnation(t, cfg, firstEpoch+2)
	if err := two.sink.Recover(two.ctx, 1, [][]byte{p1}, p2); !errors.Is(err, kafka.ErrSuperseded) {
		t.Fatalf("stale incarnation 2's recovery: %v, want ErrSuperseded", err)
	}
	if err := one.sink.Commit(one.ctx, p2); err == nil {
		t.Fatal("incarnation 1 committed checkpoint 2's transaction after incarnation 3 aborted it")
	}
	if err := three.sink.Commit(three.ctx, p3); err != nil {
		t.Fatalf("incarnation 3's commit after stale incarnation 2's recovery: %v", err)
	}
	wantValues(t, committed(t, brokers, "out"), [2]int64{0, 100}, [2]int64{200, 300})
}

// TestSinkIncarnationsOldBroker: brokers before Kafka 3.0 cannot list open
// transactions. A recovery then aborts the pool of the restored
// checkpoint's incarnation, by the ids its handles name: the transaction
// incarnation 1 pre-committed for a checkpoint that never completed is
// aborted, and read_committed consumers are not held back by it.
func TestSinkIncarnationsOldBroker(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "out"), kfake.MaxVersions(kversion.V2_8_0()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	cfg := kafka.SinkConfig{Brokers: brokers, Topic: "out", TransactionalIDPrefix: "old", PoolSize: 3, TransactionTimeout: 10 * time.Minute}

	one := newIncarnation(t, cfg, firstEpoch+1)
	if err := one.sink.Recover(one.ctx, 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	p1 := one.preCommit(0, 0, 100)
	p2 := one.preCommit(1, 100, 200)

	two := newIncarnation(t, cfg, firstEpoch+2)
	if err := two.sink.Recover(two.ctx, 1, [][]byte{p1}, p2); err != nil {
		t.Fatal(err)
	}
	if err := one.sink.Commit(one.ctx, p2); err == nil {
		t.Fatal("incarnation 1 committed checkpoint 2's transaction after incarnation 2's recovery")
	}
	if err := two.sink.Commit(two.ctx, two.preCommit(1, 200, 300)); err != nil {
		t.Fatal(err)
	}
	wantValues(t, committed(t, brokers, "out"), [2]int64{0, 100}, [2]int64{200, 300})
}
