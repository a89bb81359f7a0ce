package main

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fillChunk is how many orders fill produces at a time.
const fillChunk = 10_000

// fill writes orders 0..records-1 to topic.
func fill(ctx context.Context, brokers []string, topic string, records, customers int64) error {
	return fillRange(ctx, brokers, topic, 0, records, customers)
}

// fillRange writes orders from..to-1 to topic, in id order, keyed by
// customer (so that each customer's orders share a partition, in id
// order), and waits until the brokers have acknowledged every one.
func fillRange(ctx context.Context, brokers []string, topic string, from, to, customers int64) error {
	cl, err := newClient(brokers, kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, 0, min(to-from, fillChunk))
	for id := from; id < to; {
		recs = recs[:0]
		for ; id < to && len(recs) < fillChunk; id++ {
			key, value := encodeOrder(orderOf(id, customers))
			recs = append(recs, &kgo.Record{Key: key, Value: value})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("fill topic %q (orders below %d): %w", topic, id, err)
		}
	}
	return nil
}

// feed writes the orders to topic in chunks, each once the output holds
// the effects of every order but the last chunk's: the job then works
// through the input over many checkpoints, however fast the machine, with
// records in flight at each failure and at the restart. It returns nil
// once every order is written, or why it could not.
func feed(ctx context.Context, w *watcher, brokers []string, topic string, records, customers int64, chunks int) error {
	for k := range int64(chunks) {
		from, to := records*k/int64(chunks), records*(k+1)/int64(chunks)
		if k > 0 {
			if err := w.wait(ctx, records*(k-1)/int64(chunks), nil); err != nil {
				return fmt.Errorf("feed topic %q: %w", topic, err)
			}
		}
		if err := fillRange(ctx, brokers, topic, from, to, customers); err != nil {
			return err
		}
	}
	return nil
}
