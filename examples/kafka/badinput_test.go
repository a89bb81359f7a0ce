package main

import (
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestBadInput: an unreachable broker, a missing input topic and a missing
// output topic make the run fail at the job's Start (exit 1), before any
// record flows, with an error that names the operator and what is wrong;
// a run phase without brokers is a usage error (exit 2).
func TestBadInput(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "orders", "totals"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := strings.Join(c.ListenAddrs(), ",")
	dead := closedPort(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"unreachable broker", []string{"-brokers", dead}, 1,
			[]string{`start job "kafka-totals"`, `operator "orders"`, `operator "out"`, "the brokers " + dead + " did not answer"}},
		{"missing input topic", []string{"-brokers", brokers, "-in", "nosuch"}, 1,
			[]string{`start job "kafka-totals"`, `operator "orders"`, `topic "nosuch"`, "UNKNOWN_TOPIC_OR_PARTITION"}},
		{"missing output topic", []string{"-brokers", brokers, "-out", "gone"}, 1,
			[]string{`start job "kafka-totals"`, `operator "out"`, `topic "gone"`}},
		{"run without brokers", nil, 2, []string{"usage: -phase run needs -brokers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			began := time.Now()
			args := append([]string{"-phase", "run", "-store", t.TempDir(), "-records", "100", "-faults", "0"}, tc.args...)
			p := startProc(t, tc.name, args...)
			code := p.Exit()
			stderr := strings.Join(p.Lines(true), "\n")
			t.Logf("exit %d after %v: %s", code, time.Since(began).Round(time.Millisecond), stderr)
			if code != tc.code {
				t.Errorf("exit code %d, want %d", code, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not say %s", w)
				}
			}
			if m := p.Find(regexp.MustCompile(`running \(start`)); m != nil {
				t.Errorf("the job ran: %q", m[0])
			}
		})
	}
}
