package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPhases: against brokers of the test process, -phase fill creates the
// missing topics and fills the input, -phase run runs the job to a
// complete output, and -phase verify finds it exactly once. A second fill
// refuses topics that hold records, and verify fails (exit 1, naming the
// order) once an effect is duplicated in the output.
func TestPhases(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := strings.Join(c.ListenAddrs(), ",")
	common := []string{"-brokers", brokers, "-in", "o", "-out", "t", "-records", "3000", "-customers", "5"}
	phase := func(name string, want int, extra ...string) *proc {
		t.Helper()
		p := startProc(t, name, append(append([]string{"-phase", name}, common...), extra...)...)
		if code := p.Exit(); code != want {
			t.Fatalf("-phase %s: exit code %d, want %d", name, code, want)
		}
		return p
	}
	phase("fill", 0).MustFind(regexp.MustCompile(`^topics: "o" created \(4 partitions\), "t" created \(4 partitions\)$`))
	phase("run", 0, "-store", t.TempDir(), "-seed", "4").MustFind(regexp.MustCompile(`^stopped with savepoint "final-1"`))
	phase("verify", 0).MustFind(regexp.MustCompile(`^exactly-once: OK$`))

	again := phase("fill", 1)
	if s := strings.Join(again.Lines(true), "\n"); !strings.Contains(s, `topic "o": topic already holds records`) {
		t.Errorf("a second fill says %q, want that topic \"o\" holds records", s)
	}

	// A duplicate of order 7's effect, committed like any other record.
	cl, err := newClient(c.ListenAddrs(), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, v := encodeEffect(expected(8, 5)[7])
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: v}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	bad := phase("verify", 1)
	bad.MustFind(regexp.MustCompile(`^exactly-once: FAILED$`))
	bad.MustFind(regexp.MustCompile(`^  orders with more than one effect: 1, e.g. orders 7$`))
}
