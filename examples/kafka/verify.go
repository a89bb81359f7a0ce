package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// sentinelKey marks the records readOutput writes after the committed
// output, outside any transaction.
const sentinelKey = "sentinel"

// readOutput reads every committed record of topic with a read_committed
// consumer. Once the job has stopped, it writes a sentinel with a fresh
// nonce to every partition, outside any transaction, and reads until it
// has seen each: every committed record lies before them, so nothing is
// waited for by the clock. (A transaction still open holds the sentinels
// back until it ends; ctx bounds that wait.)
func readOutput(ctx context.Context, brokers []string, topic string) ([][]byte, error) {
	admin, err := newClient(brokers)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	partitions, err := partitionCount(ctx, admin, topic)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	mark := []byte(hex.EncodeToString(nonce))
	prod, err := newClient(brokers, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	defer prod.Close()
	for p := range partitions {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Key: []byte(sentinelKey), Value: mark}).FirstErr(); err != nil {
			return nil, fmt.Errorf("write a sentinel to topic %q partition %d: %w", topic, p, err)
		}
	}
	cons, err := newClient(brokers, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	var values [][]byte
	sentinels := map[int32]bool{}
	for len(sentinels) < int(partitions) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("read topic %q: %d records and the sentinels of %d of %d partitions read (a transaction left open holds read_committed consumers back until it ends or times out): %w",
				topic, len(values), len(sentinels), partitions, context.Cause(ctx))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) == sentinelKey {
				if string(r.Value) == string(mark) {
					sentinels[r.Partition] = true
				}
				return
			}
			values = append(values, r.Value)
		})
	}
	return values, nil
}

// errNotExact is wrapped by the error of a verification that found
// anything but one correct effect per order.
var errNotExact = errors.New("the output is not exactly once")

// report is what a verification found.
type report struct {
	records, customers int64
	read               int64 // effects read
	once               int64 // orders with exactly one effect
	missing, dup       []int64
	malformed          []string
	outOfRange         []int64
	wrong              []string // effects whose count or running total differ
	finalWrong         []string // customers whose final total differs
	finalChecked       int64
}

// maxListed bounds the examples each line of a failed report lists.
const maxListed = 5

// check compares the output values with what the job must emit: each
// order's effect exactly once, with the customer's count and running total
// after it, and each customer's final total equal to the closed form (the
// sum of its orders' amounts).
func check(values [][]byte, records, customers int64) *report {
	r := &report{records: records, customers: customers, read: int64(len(values))}
	want := expected(records, customers)
	times := make([]int32, records)
	final := make([]effect, customers) // the effect with the highest count
	for _, v := range values {
		e, err := decodeEffect(v)
		switch {
		case err != nil:
			r.malformed = append(r.malformed, err.Error())
			continue
		case e.ID >= records:
			r.outOfRange = append(r.outOfRange, e.ID)
			continue
		}
		times[e.ID]++
		if e != want[e.ID] {
			r.wrong = append(r.wrong, fmt.Sprintf("order %d: customer %d, count %d, total %d; want customer %d, count %d, total %d",
				e.ID, e.Customer, e.Count, e.Total, want[e.ID].Customer, want[e.ID].Count, want[e.ID].Total))
		}
		if e.Customer < customers && e.Count > final[e.Customer].Count {
			final[e.Customer] = e
		}
	}
	for id, n := range times {
		switch {
		case n == 0:
			r.missing = append(r.missing, int64(id))
		case n == 1:
			r.once++
		default:
			r.dup = append(r.dup, int64(id))
		}
	}
	// The closed form, independent of the running totals above.
	sum := make([]int64, customers)
	for id := range records {
		sum[customerOf(id, customers)] += amountOf(id)
	}
	for c := range customers {
		r.finalChecked++
		if final[c].Total != sum[c] {
			r.finalWrong = append(r.finalWrong, fmt.Sprintf("customer %d: final total %d, want %d", c, final[c].Total, sum[c]))
		}
	}
	return r
}

// ok reports whether the output is exactly once and correct.
func (r *report) ok() bool {
	return r.once == r.records && r.read == r.records && len(r.missing)+len(r.dup)+len(r.malformed)+len(r.outOfRange)+len(r.wrong)+len(r.finalWrong) == 0
}

// summary is the report's first line.
func (r *report) summary() string {
	return fmt.Sprintf("read %d effects: %d of %d orders exactly once, %d missing, %d duplicated, %d wrong running totals; final totals of %d customers: %d differ from the closed form",
		r.read, r.once, r.records, len(r.missing), len(r.dup), len(r.wrong), r.finalChecked, len(r.finalWrong))
}

// details lists what differs, a few examples of each kind.
func (r *report) details() []string {
	var out []string
	ids := func(what string, xs []int64) {
		if len(xs) > 0 {
			out = append(out, fmt.Sprintf("%s: %d, e.g. orders %s", what, len(xs), joinIDs(xs)))
		}
	}
	lines := func(what string, xs []string) {
		if len(xs) > 0 {
			out = append(out, fmt.Sprintf("%s: %d, e.g. %s", what, len(xs), strings.Join(xs[:min(len(xs), maxListed)], "; ")))
		}
	}
	ids("orders without an effect", r.missing)
	ids("orders with more than one effect", r.dup)
	ids("effects of orders that do not exist", r.outOfRange)
	lines("malformed records", r.malformed)
	lines("effects with a wrong count or running total", r.wrong)
	lines("customers whose final total differs from the closed form", r.finalWrong)
	return out
}

func joinIDs(xs []int64) string {
	s := make([]string, 0, maxListed)
	for _, x := range xs[:min(len(xs), maxListed)] {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, ", ")
}
