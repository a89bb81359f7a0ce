package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"
)

// kfakeBrokers is the size of the in-process cluster: with more than one,
// transaction coordinators and partition leaders differ, as in a real
// cluster.
const kfakeBrokers = 3

// startKfake starts an in-process cluster and points o at it.
func startKfake(o *options) (func(), error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(kfakeBrokers))
	if err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	o.brokers, o.inProcess = c.ListenAddrs(), true
	return c.Close, nil
}

// prepare creates the topics the cluster lacks, refuses topics that
// already hold records (the verification could not tell them from the
// job's), and fills the input unless the job's run feeds it.
func prepare(ctx context.Context, o options, p *printer) error {
	admin, err := newClient(o.brokers)
	if err != nil {
		return err
	}
	defer admin.Close()
	var said []string
	for _, topic := range []string{o.in, o.out} {
		n, created, err := ensureTopic(ctx, admin, topic, int32(o.partitions))
		if err != nil {
			return fmt.Errorf("brokers %s: %w", strings.Join(o.brokers, ","), err)
		}
		how := "created"
		if !created {
			how = "exists, empty"
			held, err := recordsIn(ctx, admin, topic, n)
			if err != nil {
				return err
			}
			if held > 0 {
				return fmt.Errorf("topic %q: %w (%d offsets): name new topics with -in and -out, or run the job on what the input holds with -phase run", topic, errTopicNotEmpty, held)
			}
		}
		said = append(said, fmt.Sprintf("%q %s (%d partitions)", topic, how, n))
	}
	p.say("topics: %s", strings.Join(said, ", "))
	if o.phase == phaseAll && o.chunks > 1 {
		return nil
	}
	if err := fill(ctx, o.brokers, o.in, o.records, o.customers); err != nil {
		return err
	}
	p.say("filled %q with %d orders of %d customers", o.in, o.records, o.customers)
	return nil
}

// verify reads the output with a read_committed consumer and compares it
// with what the job must emit.
func verify(ctx context.Context, o options, p *printer) error {
	values, err := readOutput(ctx, o.brokers, o.out)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	r := check(values, o.records, o.customers)
	p.say("verified with a read_committed consumer of %q: %s", o.out, r.summary())
	if !r.ok() {
		for _, l := range r.details() {
			p.say("  %s", l)
		}
		p.say("exactly-once: FAILED")
		return errNotExact
	}
	p.say("exactly-once: OK")
	return nil
}
