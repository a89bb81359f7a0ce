// Command sessions is a clickstream sessionizer with event time: users'
// clicks arrive out of order from two source tasks, each user's sessions
// close when the watermark passes 30 minutes (of event time) after their
// last click, clicks that arrive behind the watermark go to a side output,
// one task fails on purpose mid-run, and the sessions are committed exactly
// once to files, which the example then checks against the sessions it
// generated.
//
//	go run ./examples/sessions [-users 200] [-sessions 20] [-out DIR]
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
	"github.com/snapflow/snapflow/topology/filesink"
)

// gap closes a session: 30 minutes without a click.
const gap = 30 * time.Minute

// outOfOrder is how far behind the newest click a click may arrive and
// still be on time.
const outOfOrder = 10 * time.Second

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "sessions:", err)
		os.Exit(1)
	}
}

type options struct {
	users, sessions int
	out             string
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("sessions", flag.ContinueOnError)
	var o options
	fs.IntVar(&o.users, "users", 500, "number of users")
	fs.IntVar(&o.sessions, "sessions", 40, "sessions per user")
	fs.StringVar(&o.out, "out", "", "directory of the committed session files (default: a temporary one, removed at the end)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.users < 1 || o.sessions < 1 {
		return fmt.Errorf("-users %d and -sessions %d must be at least 1", o.users, o.sessions)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if o.out == "" {
		dir, err := os.MkdirTemp("", "sessions-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.out = dir
	}
	return runJob(ctx, o, stdout)
}

func runJob(ctx context.Context, o options, stdout io.Writer) error {
	cs := newClickstream(o.users, o.sessions)
	fmt.Fprintf(stdout, "clickstream: %d users, %d sessions each, %d clicks (%d of them sent late on purpose)\n",
		o.users, o.sessions, cs.count(), o.users)

	g := topology.New("sessions")
	clicks := topology.Generate(g, "clicks", cs.count(), cs.click, topology.Parallelism(2),
		topology.WithWatermarks(topology.WatermarkStrategy[Click]{
			Timestamp:      func(c Click) time.Time { return c.At },
			OutOfOrderness: outOfOrder,
		}))
	late := topology.NewSideOutput[Click]("late")
	sessions := topology.Process(topology.KeyBy(clicks, func(c Click) string { return c.User }), "sessionize",
		sessionize(late), topology.Parallelism(2))
	topology.TwoPhaseCommitSink(sessions, "sessions-out", filesink.New(filepath.Join(o.out, "sessions"), filesink.Lines(Session.String)))
	topology.TwoPhaseCommitSink(topology.SideOutputOf(sessions, late), "late-out",
		filesink.New(filepath.Join(o.out, "late"), filesink.Lines(Click.String)))

	// One injected failure of a sessionizer task, when it learns that the
	// first checkpoint completed: sessions and their timers are pending in
	// that checkpoint (unless the job was so quick that its first
	// checkpoint is its final one), and the job restores it.
	var failed atomic.Bool
	faults := &actorstest.Faults{Complete: func(task string, _ uint64) {
		if task == "sessionize#0" && !failed.Swap(true) {
			panic("injected failure")
		}
	}}
	var restores atomic.Int64
	listen := func(e actors.Event) {
		switch e.Kind {
		case actors.EventTaskFailed:
			fmt.Fprintf(stdout, "task %s failed: %v\n", e.Task, e.Err)
		case actors.EventRestoring:
			restores.Add(1)
			fmt.Fprintf(stdout, "restoring checkpoint %d\n", e.Checkpoint)
		}
	}
	store := snapshots.NewMem()
	start := time.Now()
	err := actors.Run(ctx, g, actors.WithStore(store), actors.WithCheckpointInterval(20*time.Millisecond),
		actors.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), actors.WithListener(listen), actorstest.WithFaults(faults))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "job finished in %v: %d failure injected, %d restore(s)\n", time.Since(start).Round(time.Millisecond), b2i(failed.Load()), restores.Load())
	return check(cs, o.out, stdout)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Click is one click of a user, at its event time. Seq numbers the clicks
// of the stream.
type Click struct {
	User string
	At   time.Time
	Seq  int64
}

// String is the click as the late files hold it: user, time (ns), seq.
func (c Click) String() string { return fmt.Sprintf("%s %d %d", c.User, c.At.UnixNano(), c.Seq) }

// Session is a user's session: its first and last click, and how many
// clicks it has.
type Session struct {
	User        string
	Start, Last time.Time
	Clicks      int64
}

// String is the session as the session files hold it: user, start and
// last click (ns), clicks.
func (s Session) String() string {
	return fmt.Sprintf("%s %d %d %d", s.User, s.Start.UnixNano(), s.Last.UnixNano(), s.Clicks)
}

// open is a session being built, in state: times in ns.
type open struct {
	Start, Last, Clicks int64
}

// sessionize keeps each user's open sessions (by start), merges a click
// into the sessions less than a gap away, and closes a session with an
// event-time timer a gap after its last click. A click behind the
// watermark goes to the late side output.
func sessionize(late topology.SideOutput[Click]) func(*topology.KeyedSetup[string]) topology.ProcessFunc[string, Click, Session] {
	return func(s *topology.KeyedSetup[string]) topology.ProcessFunc[string, Click, Session] {
		opens := topology.MapOf[int64, open](s, "open") // start -> session
		topology.OnTimer(s, func(ctx *topology.Context[string], t topology.Timer, out *topology.Collector[Session]) error {
			for start, o := range opens.All {
				if o.Last+int64(gap) == t.Time.UnixNano() {
					opens.Delete(start)
					out.Emit(Session{User: ctx.Key(), Start: time.Unix(0, o.Start).UTC(), Last: time.Unix(0, o.Last).UTC(), Clicks: o.Clicks})
				}
			}
			return nil
		})
		return func(ctx *topology.Context[string], c Click, _ *topology.Collector[Session]) error {
			ts := c.At.UnixNano()
			if wm, ok := ctx.Watermark(); ok && c.At.Before(wm) {
				late.Emit(ctx, c)
				return nil
			}
			merged := open{Start: ts, Last: ts, Clicks: 1}
			for start, o := range opens.All {
				if ts < o.Last+int64(gap) && ts > o.Start-int64(gap) { // less than a gap apart
					merged = open{Start: min(merged.Start, o.Start), Last: max(merged.Last, o.Last), Clicks: merged.Clicks + o.Clicks}
					opens.Delete(start)
					ctx.DeleteEventTimer(time.Unix(0, o.Last+int64(gap)))
				}
			}
			opens.Put(merged.Start, merged)
			ctx.RegisterEventTimer(time.Unix(0, merged.Last+int64(gap)))
			return nil
		}
	}
}

// clickstream is the generated input: for each user, sessions of clicks
// less than a gap apart, separated by more than two gaps, the clicks of
// all users interleaved in time order with a bounded jitter; then one
// late click per user, far behind (a day before the user's first
// session), at the end of the stream.
type clickstream struct {
	users, sessions int
	perSession      int // clicks per session
	base            time.Time
}

func newClickstream(users, sessions int) *clickstream {
	return &clickstream{users: users, sessions: sessions, perSession: 5, base: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
}

func (cs *clickstream) regular() int64 { return int64(cs.users * cs.sessions * cs.perSession) }

func (cs *clickstream) count() int64 { return cs.regular() + int64(cs.users) }

// click is the i-th click of the stream. Regular click i is click k of
// session s of user u, at base + s*3*gap + k*5min + u*(5min/users), less
// a jitter of up to 9s: the stream is in time order but for that jitter,
// which the 10s of out-of-orderness allow.
func (cs *clickstream) click(i int64) Click {
	if i >= cs.regular() {
		u := int(i - cs.regular())
		return Click{User: user(u), At: cs.base.Add(-24 * time.Hour).Add(time.Duration(u) * time.Second), Seq: i}
	}
	per := int64(cs.users * cs.perSession) // clicks per round of sessions
	s := i / per
	r := i % per
	k, u := r/int64(cs.users), r%int64(cs.users)
	at := cs.base.Add(time.Duration(s)*3*gap + time.Duration(k)*5*time.Minute + time.Duration(u)*(5*time.Minute/time.Duration(cs.users)))
	at = at.Add(-time.Duration((i*7919)%10) * time.Second)
	return Click{User: user(int(u)), At: at, Seq: i}
}

func user(u int) string { return "user-" + strconv.Itoa(u) }

// check reads the committed files back and compares them with the
// sessions the clickstream holds: every regular session exactly once, with
// its clicks; every late click exactly once, either in the late files or,
// when it reached the sessionizer before the watermark passed it, as a
// session of its own.
func check(cs *clickstream, dir string, stdout io.Writer) error {
	want := map[string]int64{} // session line -> times expected
	for u := range cs.users {
		for s := range cs.sessions {
			var first, last time.Time
			for k := range cs.perSession {
				i := int64(s*cs.users*cs.perSession + k*cs.users + u)
				at := cs.click(i).At
				if k == 0 || at.Before(first) {
					first = at
				}
				if k == 0 || at.After(last) {
					last = at
				}
			}
			want[Session{User: user(u), Start: first, Last: last, Clicks: int64(cs.perSession)}.String()]++
		}
	}
	sessions, err := readLines(filepath.Join(dir, "sessions"))
	if err != nil {
		return err
	}
	lates, err := readLines(filepath.Join(dir, "late"))
	if err != nil {
		return err
	}
	lateSeen := map[int64]int{}
	for _, l := range lates {
		f := strings.Fields(l)
		seq, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
		lateSeen[seq]++
	}
	onTime := 0
	got := map[string]int64{}
	for _, l := range sessions {
		got[l]++
	}
	for u := range cs.users {
		c := cs.click(cs.regular() + int64(u))
		single := Session{User: c.User, Start: c.At, Last: c.At, Clicks: 1}.String()
		switch {
		case lateSeen[c.Seq] == 1 && got[single] == 0:
		case lateSeen[c.Seq] == 0 && got[single] == 1:
			onTime++
			delete(got, single)
		default:
			return fmt.Errorf("exactly-once: FAILED: the late click %d was reported %d times as late and %d times as a session", c.Seq, lateSeen[c.Seq], got[single])
		}
		delete(lateSeen, c.Seq)
	}
	if len(lateSeen) > 0 {
		return fmt.Errorf("exactly-once: FAILED: %d regular clicks were reported late", len(lateSeen))
	}
	for l, n := range want {
		if got[l] != n {
			return fmt.Errorf("exactly-once: FAILED: session %q committed %d times, want %d", l, got[l], n)
		}
		delete(got, l)
	}
	if len(got) > 0 {
		return fmt.Errorf("exactly-once: FAILED: %d sessions committed that the clickstream does not hold", len(got))
	}
	fmt.Fprintf(stdout, "sessions committed: %d (want %d); late clicks: %d to the side output, %d arrived before the watermark passed them\n",
		len(sessions)-onTime, len(want), len(lates), onTime)
	fmt.Fprintln(stdout, "exactly-once: OK")
	return nil
}

// readLines reads the lines of the committed part files in dir.
func readLines(dir string) ([]string, error) {
	parts, err := filepath.Glob(filepath.Join(dir, "part-*"))
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, p := range parts {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return lines, nil
}
