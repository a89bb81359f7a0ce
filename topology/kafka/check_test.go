package kafka_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
	"github.com/snapflow/snapflow/topology/kafka"
)

// closedPort returns an address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestBadInputRefusedAtStart: an unreachable broker and a missing topic,
// of the source or of the sink, are refused by Start with an error that
// names the operator and says what is wrong.
func TestBadInputRefusedAtStart(t *testing.T) {
	brokers := startKafka(t, "in", "out")
	dead := []string{closedPort(t)}
	job := func(srcBrokers []string, in string, sinkBrokers []string, out string) *topology.Graph {
		g := topology.New("bad")
		src := kafka.Source(g, "reader", kafka.SourceConfig{Brokers: srcBrokers, Topic: in, CheckTimeout: time.Second})
		vals := topology.Map(src, "decode", func(r kafka.Record) int64 { return int64(binary.BigEndian.Uint64(r.Value)) })
		kafka.Sink(vals, "writer", kafka.SinkConfig{Brokers: sinkBrokers, Topic: out, TransactionalIDPrefix: "bad", CheckTimeout: time.Second},
			func(v int64) ([]byte, []byte) { return nil, binary.BigEndian.AppendUint64(nil, uint64(v)) })
		return g
	}
	for _, c := range []struct {
		name string
		g    *topology.Graph
		want []string
	}{
		{"source broker unreachable", job(dead, "in", brokers, "out"), []string{`operator "reader"`, "the brokers " + dead[0] + " did not answer within 1s"}},
		{"source topic missing", job(brokers, "nope", brokers, "out"), []string{`operator "reader"`, `topic "nope"`, "UNKNOWN_TOPIC_OR_PARTITION"}},
		{"sink broker unreachable", job(brokers, "in", dead, "out"), []string{`operator "writer"`, "the brokers " + dead[0] + " did not answer"}},
		{"sink topic missing", job(brokers, "in", brokers, "gone"), []string{`operator "writer"`, `topic "gone"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, err := actors.Start(context.Background(), c.g, actors.WithStore(snapshots.NewMem()))
			if err == nil {
				j.Stop()
				t.Fatal("Start accepted the job")
			}
			if !errors.Is(err, topology.ErrPreflight) {
				t.Errorf("%v does not wrap ErrPreflight", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Start: %v\ndoes not say %s", err, w)
				}
			}
		})
	}
}
