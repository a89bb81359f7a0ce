//go:build unix

package actors_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/cluster"
	"github.com/snapflow/snapflow/internal/nodeauth"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The forged-message test runs a cluster as processes (a coordinator and
// two workers, this test binary in the helper mode of
// TestForgedHelperProcess) and attacks it from bare protoactor-go nodes in
// two more processes of it, one without the cluster's secret and one with
// another secret (issue 21).
const (
	fgRoleEnv      = "SNAPFLOW_FORGED_ROLE"       // coordinator or worker: set only in a child
	fgStoreEnv     = "SNAPFLOW_FORGED_STORE"      // the coordinator's store directory
	fgJoinEnv      = "SNAPFLOW_FORGED_JOIN"       // the coordinator's address, for a worker or an attacker
	fgWorkersEnv   = "SNAPFLOW_FORGED_WORKERS"    // the workers' addresses, for an attacker
	fgTokenEnv     = "SNAPFLOW_FORGED_TOKEN"      // an attacker's credential: none, other (another secret's), cluster or impersonate (the cluster's), replay
	fgCapturedEnv  = "SNAPFLOW_FORGED_CAPTURED"   // for replay: the metadata a listener captured, as JSON
	fgWorkerIDsEnv = "SNAPFLOW_FORGED_WORKER_IDS" // for impersonate: the ids of the cluster's workers

	fgJob  = "forged"
	fgN    = 20_000 // records 1..fgN
	fgKeys = 16
	fgHeld = 2_000 // where the workers' sources wait for "release"
)

// forgedJob is a gated source of 1..fgN, keyed by v%fgKeys into a keyed
// sum of three tasks, into a sink.
func forgedJob(gate *testsrc.Gate) func() *topology.Graph {
	return func() *topology.Graph {
		g := topology.New(fgJob)
		src := topology.FromSource(g, "src", func(int, int) topology.Source[int64] { return &testsrc.Gated{N: fgN, Gate: gate} })
		sums := keyedSum(topology.KeyBy(src, func(v int64) int64 { return v % fgKeys }), "sum", 3, nil)
		topology.Sink(sums, "sink", func(kv) error { return nil })
		return g
	}
}

// TestForgedHelperProcess is a node of the forged-message test; without
// fgRoleEnv it does nothing. For the attacker role, see attack. Both roles log to stdout. The coordinator
// prints "listening ADDR", "completed C" for each checkpoint, and at the
// end "result exact", "result wrong: ..." or "result error: ERR". A worker
// prints "listening ADDR", holds its source at fgHeld until "release" on
// stdin, and prints "result ok" or "result error: ERR".
func TestForgedHelperProcess(t *testing.T) {
	role := os.Getenv(fgRoleEnv)
	if role == "" {
		return
	}
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelWarn}))
	gate := testsrc.NewGate(fgHeld)
	switch role {
	case "attacker":
		attack()
	case "coordinator":
		dir := os.Getenv(fgStoreEnv)
		j, err := actors.Start(context.Background(), forgedJob(gate)(), cluster.WithCoordinator(cluster.Coordinator{Workers: 2, Store: dir}),
			actors.WithCheckpointInterval(50*time.Millisecond), actors.WithLogger(log),
			actors.WithListener(func(e actors.Event) {
				if e.Kind == actors.EventCheckpointCompleted {
					fmt.Printf("completed %d\n", e.Checkpoint)
				}
			}))
		if err != nil {
			fmt.Printf("result error: %s\n", oneLine(err))
			os.Exit(1)
		}
		fmt.Printf("listening %s\n", j.Address())
		if err := j.Wait(); err != nil {
			fmt.Printf("result error: %s\n", oneLine(err))
			os.Exit(1)
		}
		store, err := snapshots.NewDir(dir)
		if err != nil {
			fmt.Printf("result error: %v\n", err)
			os.Exit(1)
		}
		got, want := finalTotals(t, store, fgJob, "sum"), wantKeyed(fgN, fgKeys)
		var wrong []string
		for k, v := range want {
			if got[k] != v {
				wrong = append(wrong, fmt.Sprintf("key %d: %d, want %d", k, got[k], v))
			}
		}
		if len(wrong) > 0 || len(got) != len(want) {
			fmt.Printf("result wrong: %d keys, want %d; %s\n", len(got), len(want), strings.Join(wrong, "; "))
			os.Exit(1)
		}
		fmt.Println("result exact")
	case "worker":
		// At Info: "worker listening" names the worker's id, which the
		// impersonation test hands its insider.
		log = slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelInfo}))
		go func() {
			sc := bufio.NewScanner(os.Stdin)
			for sc.Scan() {
				if sc.Text() == "release" {
					gate.SetLimit(fgN)
				}
			}
		}()
		err := cluster.ServeWorker(context.Background(), cluster.Worker{Join: os.Getenv(fgJoinEnv), Slots: 6,
			Jobs: []func() *topology.Graph{forgedJob(gate)}, Logger: log,
			Listening: func(addr string) { fmt.Printf("listening %s\n", addr) }})
		if err != nil {
			fmt.Printf("result error: %s\n", oneLine(err))
			os.Exit(1)
		}
		fmt.Println("result ok")
	}
	os.Exit(0)
}

// attack is the attacker role of TestForgedHelperProcess: a bare
// protoactor-go node, without the cluster's secret (token "none") or with
// another secret ("other"), that forges messages to the coordinator at
// fgJoinEnv and the workers at fgWorkersEnv, prints "forged", and on
// "count" prints "replies N": what reached its actor named like a
// worker's host.
func attack() {
	var dial []grpc.DialOption
	var server []grpc.ServerOption
	node := func(secret string) {
		id, err := nodeauth.NewIdentity(rand.Reader)
		if err != nil {
			fmt.Printf("setup-error: %v\n", err)
			os.Exit(2)
		}
		creds := nodeauth.Credentials(nodeauth.Config{Local: nodeauth.Local{Secret: secret, Identity: id, Address: "127.0.0.1:0", Jobs: []string{fgJob}}})
		dial, server = append(dial, grpc.WithTransportCredentials(creds)), append(server, grpc.Creds(creds))
	}
	switch os.Getenv(fgTokenEnv) {
	case "other":
		node(nodeauth.NewSecret())
	case "cluster", "impersonate", "unbound": // an insider: a node with the cluster's secret
		node(os.Getenv(nodeauth.EnvSecret))
	case "replay": // what a listener captured from a node's connection
		dial = append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(capturedMetadata(os.Getenv(fgCapturedEnv))))
	default:
		dial = append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0, remote.WithDialOptions(dial...), remote.WithServerOptions(server...)))
	r.Start()
	var replies atomic.Int64
	if _, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*messages.Registered); ok {
			replies.Add(1)
		}
	}), "snapflow-worker"); err != nil {
		fmt.Printf("setup-error: %v\n", err)
		os.Exit(2)
	}
	switch os.Getenv(fgTokenEnv) {
	case "cluster":
		forgeAcks(system, os.Getenv(fgJoinEnv))
	case "impersonate":
		impersonate(system, os.Getenv(fgJoinEnv), strings.Split(os.Getenv(fgWorkerIDsEnv), ","))
	case "unbound":
		reportForOthers(system, os.Getenv(fgJoinEnv), strings.Split(os.Getenv(fgWorkerIDsEnv), ","))
	default:
		forge(system, os.Getenv(fgJoinEnv), strings.Split(os.Getenv(fgWorkersEnv), ","))
	}
	fmt.Println("forged")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() == "count" {
			fmt.Printf("replies %d\n", replies.Load())
		}
	}
	r.Shutdown(false)
	system.Shutdown()
}

// forge sends what a peer without the secret would, to take the job over
// or end it: a registration (answered, on a node that does not
// authenticate, with the job's fingerprint, the coordinator's id and the
// store's URL), acknowledgements and failures of made-up epochs, and
// PoisonPills to the coordinator and to every worker.
func forge(system *actor.ActorSystem, coordinator string, workers []string) {
	root := system.Root
	coord := actor.NewPID(coordinator, "snapflow-coordinator")
	root.Send(coord, &messages.RegisterWorker{WorkerId: "w-forged", Address: system.Address(), Slots: 64,
		Jobs: []*messages.JobFingerprint{{Job: fgJob}}, Attempt: 1})
	for e := uint64(1); e <= 3; e++ {
		epoch := e<<20 | 1
		for c := uint64(1); c <= 5; c++ {
			root.Send(coord, &messages.AckCheckpoint{Epoch: epoch, CheckpointId: c, TaskId: "sum#0"})
		}
		root.Send(coord, &messages.TaskFailed{WorkerId: "w-forged", Epoch: epoch, TaskId: "sum#0", Reason: "forged"})
	}
	root.Poison(coord)
	for _, w := range workers {
		root.Poison(actor.NewPID(w, "snapflow-worker"))
	}
}

// forgeAcks sends what a confused or compromised node of the cluster could,
// over and over until the process ends: acknowledgements, without state,
// of the first 500 checkpoint ids, for a task that another worker runs, in
// the job's first epoch. Were one taken while its checkpoint is pending,
// the checkpoint's manifest would miss the task's state.
func forgeAcks(system *actor.ActorSystem, coordinator string) {
	coord := actor.NewPID(coordinator, "snapflow-coordinator")
	pass := func() {
		for c := uint64(1); c <= 500; c++ {
			system.Root.Send(coord, &messages.AckCheckpoint{Epoch: 1, CheckpointId: c, TaskId: "sum#0", WorkerId: "w-forged"})
		}
	}
	pass()
	go func() {
		pace := time.NewTicker(time.Millisecond) // a pass per tick, not to spin
		for range pace.C {
			pass()
		}
	}()
}

// TestForgedMessagesRefused: while a cluster's job runs, two bare nodes,
// one without the cluster's secret and one with another secret, send the
// coordinator a registration, forged acknowledgements and failures, and a
// PoisonPill, and a PoisonPill to each worker. Every node refuses their
// connections (each logs why), neither attacker hears anything back, and
// the job finishes exactly once, its workers with it.
func TestForgedMessagesRefused(t *testing.T) {
	secret := nodeauth.NewSecret()
	env := []string{nodeauth.EnvSecret + "=" + secret}
	coord := startHelper(t, "coordinator", "TestForgedHelperProcess", append(env, fgRoleEnv+"=coordinator", fgStoreEnv+"="+t.TempDir()))
	_, line := coord.await(t, 0, "the coordinator's address", func(l string) bool { return strings.HasPrefix(l, "listening ") })
	addr := strings.TrimPrefix(line, "listening ")
	var workers []*swProc
	var addrs []string
	for i := range 2 {
		w := startHelper(t, "worker "+strconv.Itoa(i+1), "TestForgedHelperProcess", append(env, fgRoleEnv+"=worker", fgJoinEnv+"="+addr))
		_, line := w.await(t, 0, "the worker's address", func(l string) bool { return strings.HasPrefix(l, "listening ") })
		workers, addrs = append(workers, w), append(addrs, strings.TrimPrefix(line, "listening "))
	}
	coord.await(t, 0, "a completed checkpoint", func(l string) bool { return strings.HasPrefix(l, "completed ") })

	var attackers []*swProc
	for _, token := range []string{"none", "other"} {
		a := startHelper(t, "attacker with token "+token, "TestForgedHelperProcess",
			[]string{fgRoleEnv + "=attacker", fgTokenEnv + "=" + token, fgJoinEnv + "=" + addr, fgWorkersEnv + "=" + strings.Join(addrs, ",")})
		a.await(t, 0, "its messages sent", func(l string) bool { return l == "forged" })
		attackers = append(attackers, a)
	}
	// An insider, with the cluster's secret, acknowledges checkpoints for
	// a task it does not run: the coordinator drops every one.
	insider := startHelper(t, "insider with the cluster's secret", "TestForgedHelperProcess",
		append(env, fgRoleEnv+"=attacker", fgTokenEnv+"=cluster", fgJoinEnv+"="+addr))
	insider.await(t, 0, "its messages sent", func(l string) bool { return l == "forged" })
	coord.await(t, 0, "the forged acknowledgements dropped", func(l string) bool {
		return strings.Contains(l, "refused a message that names a worker of another node")
	})
	refused := func(reason string) func(string) bool {
		return func(l string) bool {
			return strings.Contains(l, "refused a connection from outside the cluster") && strings.Contains(l, reason)
		}
	}
	coord.await(t, 0, "the refusal of the node without the handshake", refused("speaks gRPC without snapflow's node handshake"))
	coord.await(t, 0, "the refusal of the node with another secret", refused("before proving the secret"))
	for _, w := range workers {
		w.await(t, 0, "the refusal of the node without the handshake", refused("speaks gRPC without snapflow's node handshake"))
		w.await(t, 0, "the refusal of the node with another secret", refused("before proving the secret"))
	}

	for _, w := range workers {
		w.send(t, "release")
	}
	if _, line := coord.await(t, 0, "the job's result", func(l string) bool { return strings.HasPrefix(l, "result ") }); line != "result exact" {
		t.Fatalf("coordinator: %s", line)
	}
	for _, w := range workers {
		if _, line := w.await(t, 0, "the worker's result", func(l string) bool { return strings.HasPrefix(l, "result ") }); line != "result ok" {
			t.Errorf("%s: %s", w.name, line)
		}
	}
	for _, a := range attackers {
		a.send(t, "count")
		if _, line := a.await(t, 0, "its count of replies", func(l string) bool { return strings.HasPrefix(l, "replies ") }); line != "replies 0" {
			t.Errorf("%s: %s to its registration", a.name, line)
		}
	}
}
