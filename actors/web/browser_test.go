package web_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/snapflow/snapflow/actors/monitor"
)

// browser finds Chromium; without one the test skips, or fails when CI=true.
func browser(t *testing.T) chromedp.ExecAllocatorOption {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return chromedp.ExecPath(p)
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium, chromium-browser or google-chrome on PATH, and CI=true: install it (make browser)")
	}
	t.Skip("no chromium, chromium-browser or google-chrome on PATH (make browser installs chromium)")
	return nil
}

// page is a headless browser tab; the messages of its console are kept.
type page struct {
	t   *testing.T
	ctx context.Context
	// waits is ctx, cancelled by the page's first uncaught exception, so
	// that a broken script fails a wait at once rather than at the deadline.
	waits context.Context

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
}

// openBrowser starts headless Chromium with a 1280x800 window; it ends
// with ctx or the test.
func openBrowser(t *testing.T, ctx context.Context) *page {
	t.Helper()
	// Chromium's own temporary files (its singleton socket's directory) go
	// under the test's directory: a killed browser does not remove them.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], browser(t), chromedp.WindowSize(1280, 800), chromedp.Env("TMPDIR="+t.TempDir()))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run its sandbox as root
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelTab := chromedp.NewContext(actx)
	waits, broken := context.WithCancelCause(bctx)
	p := &page{t: t, ctx: bctx, waits: waits}
	// Subscribe before the first page loads, so that no message is lost.
	messages := chromedp.Console(bctx)
	read := make(chan struct{})
	go func() {
		defer close(read)
		for m, err := range messages {
			if err != nil {
				return
			}
			p.mu.Lock()
			p.console = append(p.console, m)
			p.mu.Unlock()
			if m.IsException() {
				broken(fmt.Errorf("the page threw: %s", m))
			}
		}
	}()
	t.Cleanup(func() {
		broken(nil)
		cancelTab()
		cancelAlloc()
		<-read
	})
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("starting the browser: %v", err)
	}
	return p
}

// do runs browser actions, failing the test on an error.
func (p *page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.waits, steps...); err != nil {
		p.t.Fatalf("%s: %v%s", what, causeOr(p.waits, err), p.consoleText())
	}
}

// poll waits, without a timeout of its own (the test's context bounds it),
// until the JavaScript expression is truthy, and returns its value.
func poll[T any](p *page, what, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.waits, chromedp.Poll[T](expr, chromedp.WithPollingTimeout(0), chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		p.t.Fatalf("waiting for %s: %v%s", what, causeOr(p.waits, err), p.consoleText())
	}
	return v
}

func eval[T any](p *page, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.waits, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("evaluating %s: %v%s", expr, causeOr(p.waits, err), p.consoleText())
	}
	return v
}

// causeOr is why ctx ended, if it did, else err.
func causeOr(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil {
		return c
	}
	return err
}

// problems are the console's errors, warnings and exceptions (a refused
// request or a Content-Security-Policy violation among them).
func (p *page) problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.console {
		if m.IsException() || m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning {
			out = append(out, m.String())
		}
	}
	return out
}

func (p *page) consoleText() string {
	if pr := p.problems(); len(pr) > 0 {
		return "\nbrowser console:\n" + strings.Join(pr, "\n")
	}
	return ""
}

// TestDashboardInABrowser loads the dashboard of a running job (with a
// token, one injected task failure and checkpoints every 250ms) in headless
// Chromium: the checkpoint table fills, the charts draw, the topology and
// the failure show; a click on "Trigger checkpoint" brings the new
// checkpoint's id into the table, and its row expands to the per-task
// figures. The screenshot (1280x800) is saved in the test's artifact
// directory, and to $SNAPFLOW_SCREENSHOT when set (docs/dashboard.png).
func TestDashboardInABrowser(t *testing.T) {
	const token = "dashboard-token"
	ctx := testContext(t)
	p := openBrowser(t, ctx)
	e := start(t, setup{token: token, interval: 250 * time.Millisecond, failAt: 30000, sinkRate: 5000})
	e.waitRunning(ctx)

	shotPath := os.Getenv("SNAPFLOW_SCREENSHOT")
	rows := 3
	if shotPath != "" {
		rows = 10 // fuller charts for the README
	}
	p.do("loading the dashboard", chromedp.Navigate(e.srv.URL()+"/?token="+token))
	poll[bool](p, "completed checkpoints in the table",
		fmt.Sprintf(`document.querySelectorAll('#checkpoints tbody tr.cp[data-status="completed"]').length >= %d`, rows))
	poll[bool](p, "the duration chart's line",
		`(() => { const l = document.querySelector('#chart-duration path.line');
			return !!l && Number(l.dataset.points) >= 3 && /^M[\d.]+,[\d.]+(L[\d.]+,[\d.]+){2,}/.test(l.getAttribute('d')); })()`)
	poll[bool](p, "the size and alignment charts", `['#chart-size', '#chart-alignment'].every(
		(id) => document.querySelectorAll(id + ' circle.pt').length >= 3 || Number((document.querySelector(id + ' path.line') || {dataset: {}}).dataset.points) >= 3)`)
	poll[bool](p, "the seven tasks", `document.querySelectorAll('#tasks tbody tr[data-task]').length === 7`)
	poll[bool](p, "the four operators of the topology", `document.querySelectorAll('#topology g.op').length === 4 &&
		document.querySelectorAll('#topology g.edge path').length === 3`)
	if par := eval[string](p, `document.querySelector('#topology g.op[data-op="sum"] text.par').textContent`); par != "×2" {
		t.Errorf("the sum operator's box shows %q, want ×2", par)
	}
	poll[bool](p, "the failure and the restore in the timeline",
		`!!document.querySelector('#timeline li[data-kind="task-failed"]') && !!document.querySelector('#timeline li[data-kind="restoring"]')`)
	poll[bool](p, "the live event stream", `document.getElementById('live').classList.contains('on')`)
	poll[bool](p, "the backpressure in front of the slow sink", `!!document.querySelector('#topology g.op.bp-warn, #topology g.op.bp-hot')`)
	poll[bool](p, "the records' rates", `/\d/.test(document.getElementById('st-rate-in').textContent) &&
		/\d[kMG]?\/s$/.test(document.querySelector('#topology g.op[data-op="sum"] text.rate').textContent)`)

	// Trigger a checkpoint from the page.
	newest := eval[int](p, `Math.max(0, ...[...document.querySelectorAll('#checkpoints tbody tr.cp[data-status="completed"]')].map((r) => +r.dataset.id))`)
	p.do("clicking Trigger checkpoint", chromedp.WaitEnabled(chromedp.ID("trigger")), chromedp.Click(chromedp.ID("trigger")))
	id := poll[int](p, "the triggered checkpoint's id", `+document.getElementById('trigger').dataset.lastId || 0`)
	if id <= newest {
		t.Errorf("the triggered checkpoint %d is not newer than the newest completed one listed before, %d", id, newest)
	}
	row := fmt.Sprintf(`#checkpoints tbody tr.cp[data-id="%d"]`, id)
	p.do("the triggered checkpoint's row", chromedp.WaitVisible(chromedp.CSS(row)))
	if cp, ok := e.mon.Checkpoint(uint64(id)); !ok || cp.Status != monitor.StatusCompleted {
		t.Errorf("checkpoint %d that the page shows: %+v, %v in the monitor", id, cp, ok)
	}
	p.do("expanding the row", chromedp.Click(chromedp.CSS(row)))
	poll[bool](p, "the row's per-task figures", fmt.Sprintf(
		`document.querySelectorAll('#checkpoints tr.detail[data-detail="%d"] table.tasks tbody tr').length === 7`, id))

	// Readable at 1280x800: nothing spills out of the window, and no panel
	// needs a horizontal scroll.
	if fits := eval[bool](p, `document.documentElement.scrollWidth <= innerWidth && document.documentElement.scrollHeight <= innerHeight`); !fits {
		t.Errorf("the page overflows the 1280x800 window: %s", eval[string](p,
			`document.documentElement.scrollWidth + 'x' + document.documentElement.scrollHeight`))
	}
	if wide := eval[[]string](p, `[...document.querySelectorAll('.panel, .scroll')].filter((e) => e.scrollWidth > e.clientWidth + 1)
		.map((e) => (e.id || e.className) + ' ' + e.scrollWidth + '>' + e.clientWidth)`); len(wide) > 0 {
		t.Errorf("too wide for their panel at 1280x800: %v", wide)
	}
	if pr := p.problems(); len(pr) > 0 {
		t.Errorf("the browser console reports problems:\n%s", strings.Join(pr, "\n"))
	}

	shot, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(shot))
	if err != nil || cfg.Width != 1280 || cfg.Height != 800 {
		t.Errorf("the screenshot is %dx%d (%v), want 1280x800", cfg.Width, cfg.Height, err)
	}
	save := func(path string) {
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			t.Errorf("saving the screenshot: %v", err)
			return
		}
		t.Logf("screenshot: %s", path)
	}
	save(filepath.Join(t.ArtifactDir(), "dashboard.png"))
	if shotPath != "" {
		save(shotPath)
	}
}

// TestDashboardPollsWithoutEventSource runs the page in a browser without
// EventSource: it falls back to polling, and a checkpoint taken by the job
// (not by the page) still reaches its table. The savepoint form then takes
// a savepoint, which the table shows with its name.
func TestDashboardPollsWithoutEventSource(t *testing.T) {
	ctx := testContext(t)
	p := openBrowser(t, ctx)
	e := start(t, setup{})
	e.waitRunning(ctx)

	p.do("removing EventSource", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, cdppage.AddScriptToEvaluateOnNewDocument,
			cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: "delete window.EventSource;"})
		return err
	}))
	p.do("loading the dashboard", chromedp.Navigate(e.srv.URL()+"/"))
	poll[bool](p, "the page to poll", `typeof EventSource === 'undefined' && document.getElementById('live').textContent === 'polling'`)

	id, err := e.job.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.do("the job's checkpoint in the table", chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#checkpoints tbody tr.cp[data-id="%d"][data-status="completed"]`, id))))

	p.do("taking a savepoint from the page",
		chromedp.Click(chromedp.ID("savepoint-open")),
		chromedp.WaitVisible(chromedp.ID("savepoint-name")),
		chromedp.SetValue(chromedp.ID("savepoint-name"), "from-the-page"),
		chromedp.Click(chromedp.ID("savepoint-take")))
	poll[bool](p, "the savepoint in the table", `[...document.querySelectorAll('#checkpoints tbody tr.cp[data-status="completed"] .badge.savepoint')]
		.some((b) => b.textContent === 'savepoint from-the-page')`)
	var sp monitor.Checkpoint
	for _, cp := range e.mon.Checkpoints(0) {
		if cp.Savepoint == "from-the-page" {
			sp = cp
		}
	}
	if sp.Status != monitor.StatusCompleted {
		t.Errorf("the monitor does not have the page's savepoint completed: %+v", sp)
	}
	if pr := p.problems(); len(pr) > 0 {
		t.Errorf("the browser console reports problems:\n%s", strings.Join(pr, "\n"))
	}
}
