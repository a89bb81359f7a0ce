package actors_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/cluster"
	"github.com/snapflow/snapflow/internal/nodeauth"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// testSecret is the cluster secret of the tests' in-process clusters.
const testSecret = "snapflow-tests-cluster-secret-0123456789"

// TestPoisonedJobActorIsNotASuccess: a job actor stopped by a PoisonPill
// while its source is halfway makes Wait return an error wrapping
// ErrActorStopped, never nil.
func TestPoisonedJobActorIsNotASuccess(t *testing.T) {
	gate := testsrc.NewGate(100)
	g := topology.New("poisoned")
	src := topology.FromSource(g, "source", func(int, int) topology.Source[int64] { return &testsrc.Gated{N: 1000, Gate: gate} })
	topology.Sink(src, "sink", func(int64) error { return nil })
	j, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithCheckpointInterval(0), actors.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 100)
	actors.PoisonJobActor(j)
	err = waitJob(t, j)
	var je *actors.JobError
	if !errors.Is(err, actors.ErrActorStopped) || !errors.As(err, &je) {
		t.Fatalf("Wait after the job actor was poisoned: %v, want a *JobError wrapping ErrActorStopped", err)
	}
}

// TestClusterConfigRefused: a cluster without a secret, with a short one,
// listening off loopback without TLS, or on a memory store whatever the
// case of its scheme, is refused at Start and at ServeWorker, naming the
// option.
func TestClusterConfigRefused(t *testing.T) {
	t.Setenv(nodeauth.EnvSecret, "")
	job := clusterJob(10, 2)
	for _, c := range []struct {
		name string
		c    cluster.Coordinator
		want string
	}{
		{"no secret", cluster.Coordinator{Store: t.TempDir()}, "Coordinator.Secret is empty and SNAPFLOW_CLUSTER_SECRET is not set"},
		{"short secret", cluster.Coordinator{Store: t.TempDir(), Secret: "short"}, "the secret has 5 bytes, want at least 16"},
		{"plaintext off loopback", cluster.Coordinator{Store: t.TempDir(), Secret: testSecret, Listen: "0.0.0.0:0"}, "Coordinator.Listen host \"0.0.0.0\" is not loopback, and there is no TLS"},
		{"MEM://", cluster.Coordinator{Store: "MEM://x", Secret: testSecret}, `Coordinator.Store "MEM://x": a memory store lives in one process`},
		{"mem://", cluster.Coordinator{Store: "mem://x", Secret: testSecret}, `Coordinator.Store "mem://x": a memory store lives in one process`},
	} {
		_, err := actors.Start(context.Background(), job(), cluster.WithCoordinator(c.c))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Start: %v, want an error containing %q", c.name, err, c.want)
		}
	}
	for _, c := range []struct {
		name string
		w    cluster.Worker
		want string
	}{
		{"no secret", cluster.Worker{Join: "127.0.0.1:1"}, "Worker.Secret is empty and SNAPFLOW_CLUSTER_SECRET is not set"},
		{"plaintext off loopback", cluster.Worker{Join: "127.0.0.1:1", Secret: testSecret, Listen: "0.0.0.0:0"}, "Worker.Listen host \"0.0.0.0\" is not loopback, and there is no TLS"},
	} {
		c.w.Jobs = []func() *topology.Graph{job}
		err := cluster.ServeWorker(context.Background(), c.w)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: ServeWorker: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}
