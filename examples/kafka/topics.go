package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errTopicMissing is wrapped by the error about a topic the cluster does
// not have.
var errTopicMissing = errors.New("no such topic")

// errTopicNotEmpty is wrapped by the refusal to fill or verify into a topic
// that already holds records.
var errTopicNotEmpty = errors.New("topic already holds records")

// newClient returns a client of brokers with extra options.
func newClient(brokers []string, extra ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client of %v: %w", brokers, err)
	}
	return cl, nil
}

// partitionCount returns the number of partitions of topic, or an error
// wrapping errTopicMissing.
func partitionCount(ctx context.Context, cl *kgo.Client, topic string) (int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("metadata of topic %q: %w", topic, err)
	}
	for _, rt := range resp.Topics {
		if rt.Topic == nil || *rt.Topic != topic {
			continue
		}
		if errors.Is(kerr.ErrorForCode(rt.ErrorCode), kerr.UnknownTopicOrPartition) {
			return 0, fmt.Errorf("topic %q: %w", topic, errTopicMissing)
		}
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			return 0, fmt.Errorf("topic %q: %w", topic, err)
		}
		return int32(len(rt.Partitions)), nil
	}
	return 0, fmt.Errorf("topic %q: %w", topic, errTopicMissing)
}

// ensureTopic creates topic with partitions partitions when the cluster
// does not have it, and returns its partition count and whether it created
// it.
func ensureTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int32) (int32, bool, error) {
	n, err := partitionCount(ctx, cl, topic)
	if err == nil || !errors.Is(err, errTopicMissing) {
		return n, false, err
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, partitions, -1 // the broker's default
	req.Topics = append(req.Topics, t)
	req.TimeoutMillis = 30_000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, false, fmt.Errorf("create topic %q: %w", topic, err)
	}
	for _, rt := range resp.Topics {
		if rt.Topic != topic {
			continue
		}
		switch err := kerr.ErrorForCode(rt.ErrorCode); {
		case errors.Is(err, kerr.TopicAlreadyExists): // created meanwhile
			n, err := partitionCount(ctx, cl, topic)
			return n, false, err
		case err != nil:
			msg := ""
			if rt.ErrorMessage != nil {
				msg = ": " + *rt.ErrorMessage
			}
			return 0, false, fmt.Errorf("create topic %q: %w%s", topic, err, msg)
		}
		return partitions, true, nil
	}
	return 0, false, fmt.Errorf("create topic %q: not in the broker's answer", topic)
}

// recordsIn returns how many offsets topic's partitions span (end minus
// start offsets, summed): 0 for a topic that holds nothing.
func recordsIn(ctx context.Context, cl *kgo.Client, topic string, partitions int32) (int64, error) {
	ends, err := listOffsets(ctx, cl, topic, partitions, -1)
	if err != nil {
		return 0, err
	}
	starts, err := listOffsets(ctx, cl, topic, partitions, -2)
	if err != nil {
		return 0, err
	}
	var n int64
	for p := range partitions {
		n += ends[p] - starts[p]
	}
	return n, nil
}

// listOffsets returns the latest (at -1) or earliest (at -2) offset of
// every partition of topic.
func listOffsets(ctx context.Context, cl *kgo.Client, topic string, partitions int32, at int64) ([]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, at
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	out := make([]int64, partitions)
	found := 0
	for _, shard := range cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			return nil, fmt.Errorf("offsets of topic %q: %w", topic, shard.Err)
		}
		for _, rt := range shard.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return nil, fmt.Errorf("offsets of topic %q partition %d: %w", topic, rp.Partition, err)
				}
				if rp.Partition >= 0 && rp.Partition < partitions {
					out[rp.Partition] = rp.Offset
					found++
				}
			}
		}
	}
	if found != int(partitions) {
		return nil, fmt.Errorf("offsets of topic %q: %d of %d partitions answered", topic, found, partitions)
	}
	return out, nil
}
