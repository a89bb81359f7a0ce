package chaos

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/snapshots"
)

// TestRunEventTime runs the event-time shape through 1 -> 3 -> 2 with only
// the forced failures (the first upload of each savepoint, the first
// restore of each): its rows equal the reference, both kinds of timer
// fired, and every savepoint held pending event-time timers.
func TestRunEventTime(t *testing.T) {
	res, err := Run(context.Background(), RunConfig{Shape: EventTime(EventTimeConfig{Dir: t.TempDir(), Quiet: true}),
		N: 6400, Store: snapshots.NewMem(), Seed: 1, Phases: []int{1, 3, 2}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Savepoints != 2 || res.SavepointRestores < 2 || res.PendingAtSavepoints == 0 {
		t.Fatalf("%d savepoints, %d restores of a savepoint, %d timers pending in them; want 2, at least 2 and some",
			res.Savepoints, res.SavepointRestores, res.PendingAtSavepoints)
	}
	clicks, _ := etReference(6400)
	if res.TimersFired+res.Late == 0 || res.ProcTimersFired == 0 {
		t.Fatalf("%d event-time timers, %d processing-time timers fired, %d late records", res.TimersFired, res.ProcTimersFired, res.Late)
	}
	t.Logf("%d windows of clicks; %d event-time and %d processing-time timers fired; %d late records; %d timers pending in the savepoints",
		len(clicks), res.TimersFired, res.ProcTimersFired, res.Late, res.PendingAtSavepoints)
}

// TestVerifyEventTimeDetects: the verification refuses a row committed
// twice, a lost row and a wrong count.
func TestVerifyEventTimeDetects(t *testing.T) {
	const n = 640
	clicks, views := etReference(n)
	var good []string
	for w, c := range clicks {
		good = append(good, Row{Kind: 'c', Key: w.key, End: w.end, N: c}.String())
		good = append(good, Row{Kind: 'j', Key: w.key, End: w.end, N: c, M: views[w]}.String())
	}
	for w, v := range views {
		if clicks[w] == 0 {
			good = append(good, Row{Kind: 'j', Key: w.key, End: w.end, M: v}.String())
		}
	}
	check := func(lines []string) error {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "part-00000-0000000001"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return verifyEventTime(dir, n, &RunResult{})
	}
	if err := check(good); err != nil {
		t.Fatalf("the reference's own rows: %v", err)
	}
	for name, c := range map[string]struct {
		lines []string
		want  string
	}{
		"twice": {append(good[:len(good):len(good)], good[0]), "committed twice"},
		"lost":  {good[1:], "want"},
		"wrong": {append([]string{wrong(t, good[0])}, good[1:]...), "want"},
	} {
		if err := check(c.lines); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
}

// wrong returns line's row with one more in N.
func wrong(t *testing.T, line string) string {
	r, err := parseRow(line)
	if err != nil {
		t.Fatal(err)
	}
	r.N++
	return r.String()
}
