package main

import (
	"fmt"

	"github.com/snapflow/snapflow/topology"
	"github.com/snapflow/snapflow/topology/kafka"
)

// jobName is the job's name in the store.
const jobName = "kafka-totals"

// parallelism of every operator.
const parallelism = 2

// jobConfig is what the job is built from.
type jobConfig struct {
	brokers  []string
	in, out  string
	txPrefix string
}

// txPrefix is the sink's transactional id prefix: stable across restarts
// of the job, and distinct for every output topic, so that runs writing to
// other topics of the same cluster never fence each other.
func txPrefix(out string) string { return "snapflow-" + jobName + "-" + out }

// build returns the job: the orders of topic in, read read_committed, keyed
// by customer into per-customer running totals, one effect per order
// written to topic out in Kafka transactions.
func build(c jobConfig) *topology.Graph {
	g := topology.New(jobName)
	in := kafka.Source(g, "orders", kafka.SourceConfig{Brokers: c.brokers, Topic: c.in, ReadCommitted: true},
		topology.Parallelism(parallelism))
	orders := topology.FlatMap(in, "decode", func(r kafka.Record, out *topology.Collector[order]) error {
		o, err := decodeOrder(r.Value)
		if err != nil {
			return fmt.Errorf("topic %q partition %d offset %d: %w", c.in, r.Partition, r.Offset, err)
		}
		out.Emit(o)
		return nil
	}, topology.Parallelism(parallelism))
	totals := topology.Process(topology.KeyBy(orders, func(o order) int64 { return o.Customer }), "totals",
		func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, order, effect] {
			count := topology.Value[int64](ks, "count")
			total := topology.Value[int64](ks, "total")
			return func(_ *topology.Context[int64], o order, out *topology.Collector[effect]) error {
				n, _ := count.Get()
				t, _ := total.Get()
				n, t = n+1, t+o.Amount
				count.Set(n)
				total.Set(t)
				out.Emit(effect{ID: o.ID, Customer: o.Customer, Count: n, Total: t})
				return nil
			}
		}, topology.Parallelism(parallelism))
	kafka.Sink(totals, "out", kafka.SinkConfig{Brokers: c.brokers, Topic: c.out, TransactionalIDPrefix: c.txPrefix},
		encodeEffect, topology.Parallelism(parallelism))
	return g
}
