package racedetect

import (
	"strings"
	"testing"
)

// TestForeignRaces: a race report both of whose accesses are in
// protoactor-go's remote package is tolerated, with or without a worker's
// prefix; one with an access elsewhere is returned.
func TestForeignRaces(t *testing.T) {
	report := func(prefix, first, second string) string {
		lines := []string{"==================", "WARNING: DATA RACE",
			"Write at 0x00c0002f4400 by goroutine 17:", "  " + first, "      /x/remote/endpoint_manager.go:115 +0x405", "",
			"Previous read at 0x00c0002f4400 by goroutine 60:", "  " + second, "      /x/remote/endpoint_manager.go:248 +0x73", "",
			"Goroutine 17 (running) created at:", "  github.com/snapflow/snapflow/actors.Start()", "=================="}
		var b strings.Builder
		for _, l := range lines {
			b.WriteString(prefix + l + "\n")
		}
		return b.String()
	}
	upstream := report("", "github.com/asynkron/protoactor-go/remote.(*endpointManager).stop()",
		"github.com/asynkron/protoactor-go/remote.(*endpointManager).removeEndpoint()")
	ours := report("worker 1: ", "github.com/asynkron/protoactor-go/remote.(*endpointReader).suspend()",
		"github.com/snapflow/snapflow/bench.(*workerWindow).open()")
	if got := Foreign("progress ...\n" + upstream + report("worker 0: ", "github.com/asynkron/protoactor-go/remote.(*endpointReader).Receive()",
		"github.com/asynkron/protoactor-go/remote.(*endpointReader).suspend()")); len(got) != 0 {
		t.Errorf("upstream races reported: %q", got)
	}
	// Past the runtime's frames (a channel closed and sent on).
	viaRuntime := func(second string) string {
		return report("", "runtime.closechan()\n      /go/src/runtime/chan.go:414 +0x0\n  github.com/asynkron/protoactor-go/remote.(*endpointReader).Receive.func1()",
			"runtime.chansend()\n      /go/src/runtime/chan.go:176 +0x0\n  "+second)
	}
	if got := Foreign(viaRuntime("github.com/asynkron/protoactor-go/remote.(*endpointManager).stop.func1()")); len(got) != 0 {
		t.Errorf("an upstream race through the runtime reported: %q", got)
	}
	if got := Foreign(viaRuntime("github.com/snapflow/snapflow/actors.(*node).shutdown()")); len(got) != 1 {
		t.Errorf("a race with snapflow through the runtime: %q, want it reported", got)
	}
	got := Foreign(upstream + ours + "tail\n")
	if len(got) != 1 || !strings.Contains(got[0], "workerWindow") {
		t.Errorf("Foreign = %q, want the report with workerWindow", got)
	}
	if got := Foreign(strings.Join(strings.SplitAfter(ours, "\n")[:6], "")); len(got) != 1 {
		t.Errorf("a report cut short: %q, want it reported", got)
	}
}

// TestUpstreamRace tells the tolerated races of protoactor-go's remote
// package from the others.
func TestUpstreamRace(t *testing.T) {
	upstream := []string{
		"WARNING: DATA RACE",
		"Write at 0x00c000294270 by goroutine 20:",
		"  github.com/asynkron/protoactor-go/remote.(*endpointReader).suspend()",
		"      /x/remote/endpoint_reader.go:255 +0x30",
		"  github.com/snapflow/snapflow/actors.(*node).shutdown()",
		"",
		"Previous read at 0x00c000294270 by goroutine 52:",
		"  github.com/asynkron/protoactor-go/remote.(*endpointReader).Receive()",
		"      /x/remote/endpoint_reader.go:75 +0x375",
	}
	if !Upstream(upstream) {
		t.Error("a race inside protoactor-go's remote package is not tolerated")
	}
	ours := append([]string(nil), upstream...)
	ours[7] = "  github.com/snapflow/snapflow/actors.(*task).Receive()"
	if Upstream(ours) {
		t.Error("a race with snapflow's code is tolerated")
	}
	if Upstream(upstream[:4]) {
		t.Error("a report with one access is tolerated")
	}
	// A log line of the process, written to stderr while the race
	// detector writes its report, lands between an access and its stack.
	interleaved := append([]string(nil), upstream[:2]...)
	interleaved = append(interleaved, `time=2026-12-03T06:13:42.107Z level=ERROR msg="EndpointWriter failed to create receive stream" error="rpc error: code = Unavailable"`)
	interleaved = append(interleaved, upstream[2:]...)
	if !Upstream(interleaved) {
		t.Error("a race inside protoactor-go's remote package with a log line among its report is not tolerated")
	}
	interleaved[8] = "  github.com/snapflow/snapflow/actors.(*task).Receive()"
	if Upstream(interleaved) {
		t.Error("a race with snapflow's code, with a log line among its report, is tolerated")
	}
	viaRuntime := []string{
		"WARNING: DATA RACE",
		"Write at 0x00c00011fd90 by goroutine 91:",
		"  runtime.closechan()",
		"      /usr/local/go/src/runtime/chan.go:414 +0x0",
		"  github.com/asynkron/protoactor-go/remote.(*endpointReader).Receive.func1()",
		"      /x/remote/endpoint_reader.go:43 +0xa8",
		"",
		"Previous read at 0x00c00011fd90 by main goroutine:",
		"  runtime.chansend()",
		"      /usr/local/go/src/runtime/chan.go:176 +0x0",
		"  github.com/asynkron/protoactor-go/remote.(*endpointManager).stop.func1()",
		"      /x/remote/endpoint_manager.go:119 +0x5d",
	}
	if !Upstream(viaRuntime) {
		t.Error("a race of protoactor-go's remote package through the runtime's channel code is not tolerated")
	}
	viaRuntime[10] = "  github.com/snapflow/snapflow/actors.(*node).shutdown()"
	if Upstream(viaRuntime) {
		t.Error("a race of snapflow's code through the runtime's channel code is tolerated")
	}
}
