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
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
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

// securedKafka is a kfake cluster with SASL PLAIN and ACLs: a superuser
// "admin", and a user "app" that may read "in", write "out" and use the
// transactional ids that start with "allowed", and nothing else.
type securedKafka struct {
	brokers []string
	admin   []kgo.Opt // client options of the superuser
	app     []kgo.Opt // client options of "app"
}

func startSecuredKafka(t *testing.T) securedKafka {
	t.Helper()
	allow := func(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: rt, Name: name, Pattern: pt, Operation: op, Allow: true}
	}
	lit, pre := kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "in", "out"),
		kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("PLAIN", "admin", "admin-secret"),
		kfake.User("PLAIN", "app", "app-secret",
			allow(kmsg.ACLResourceTypeTopic, "in", lit, kmsg.ACLOperationRead),   // implies Describe
			allow(kmsg.ACLResourceTypeTopic, "out", lit, kmsg.ACLOperationWrite), // implies Describe
			allow(kmsg.ACLResourceTypeTransactionalId, "allowed", pre, kmsg.ACLOperationWrite),
			allow(kmsg.ACLResourceTypeTransactionalId, "allowed", pre, kmsg.ACLOperationDescribe)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return securedKafka{
		brokers: c.ListenAddrs(),
		admin:   []kgo.Opt{kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())},
		app:     []kgo.Opt{kgo.SASL(plain.Auth{User: "app", Pass: "app-secret"}.AsMechanism())},
	}
}

// TestUnauthorizedTransactionalIDRefusedAtStart: a sink whose
// TransactionalIDPrefix the user has no ACL for is refused by Start with
// an error that names the operator, says the transactional id cannot be
// used and shows Kafka's error; the same job with a prefix the ACLs allow
// is accepted and moves records from "in" to "out", so the refusal comes
// from the ACL and not from the setup.
func TestUnauthorizedTransactionalIDRefusedAtStart(t *testing.T) {
	k := startSecuredKafka(t)
	const n = 100
	job := func(prefix string) *topology.Graph {
		g := topology.New("acl-" + prefix)
		src := kafka.Source(g, "reader", kafka.SourceConfig{Brokers: k.brokers, Topic: "in", ReadCommitted: true, ClientOptions: k.app, CheckTimeout: 10 * time.Second})
		vals := topology.Map(src, "decode", func(r kafka.Record) int64 { return int64(binary.BigEndian.Uint64(r.Value)) })
		kafka.Sink(vals, "writer", kafka.SinkConfig{Brokers: k.brokers, Topic: "out", TransactionalIDPrefix: prefix, ClientOptions: k.app, CheckTimeout: 10 * time.Second},
			func(v int64) ([]byte, []byte) { return nil, binary.BigEndian.AppendUint64(nil, uint64(v)) })
		return g
	}

	j, err := actors.Start(context.Background(), job("denied"), actors.WithStore(snapshots.NewMem()))
	if err == nil {
		j.Stop()
		t.Fatal(`Start accepted a sink whose TransactionalIDPrefix "denied" the user may not use`)
	}
	t.Logf("Start: %v", err)
	if !errors.Is(err, topology.ErrPreflight) {
		t.Errorf("%v does not wrap ErrPreflight", err)
	}
	if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Errorf("%v does not wrap kerr.TransactionalIDAuthorizationFailed", err)
	}
	for _, w := range []string{`operator "writer"`, "transactional id", `"denied`, "cannot be used", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Start: %v\ndoes not say %s", err, w)
		}
	}
	if strings.Contains(err.Error(), `operator "reader"`) {
		t.Errorf("Start: %v\nblames the source, which the ACLs allow", err)
	}

	// The positive control: same cluster, same user, an allowed prefix.
	produceAs(t, k.brokers, k.admin, "in", n)
	j, err = actors.Start(context.Background(), job("allowed"), actors.WithStore(snapshots.NewMem()),
		actors.WithCheckpointInterval(20*time.Millisecond))
	if err != nil {
		t.Fatalf(`Start refused the prefix "allowed", which the ACLs allow: %v`, err)
	}
	readCommittedAs(t, k.brokers, k.admin, "out", n)
	if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
		t.Fatalf("Stop: %v", err)
	}
}

// produceAs writes the values 0..n-1 to topic with the client options opts.
func produceAs(t *testing.T, brokers []string, opts []kgo.Opt, topic string, n int64) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, 0, n)
	for v := range n {
		recs = append(recs, &kgo.Record{Value: binary.BigEndian.AppendUint64(nil, uint64(v))})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// readCommittedAs reads topic read_committed with the client options opts
// until every value of 0..n-1 has appeared (or the deadline passes).
func readCommittedAs(t *testing.T, brokers []string, opts []kgo.Opt, topic string, n int64) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seen := map[int64]bool{}
	for int64(len(seen)) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("only %d of %d values committed in time", len(seen), n)
		}
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("read %s: %v", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[int64(binary.BigEndian.Uint64(r.Value))] = true })
	}
}
