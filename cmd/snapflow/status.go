package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/snapflow/snapflow/actors/monitor"
	"github.com/snapflow/snapflow/actors/web"
)

const statusSynopsis = "snapflow jobs status --addr URL [--token TOKEN] [--json] [--limit N]"

// tokenEnv holds the bearer token when --token is not given.
const tokenEnv = "SNAPFLOW_TOKEN"

// statusTimeout bounds the whole of jobs status: both requests.
const statusTimeout = 30 * time.Second

// maxBody bounds what jobs status reads of an answer.
const maxBody = 64 << 20

// statusFlags are the flags of jobs status.
type statusFlags struct {
	addr  string
	token string
	json  bool
	limit int
}

// status runs "snapflow jobs status": it asks the HTTP API of a running
// job (the server of package actors/web) for the job's status and its
// recent checkpoints, and prints them.
func status(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseStatusFlags(args, stderr)
	if err != nil {
		return err
	}
	base, err := apiBase(f.addr)
	if err != nil {
		return usageError(statusSynopsis, "--addr %q: %v", f.addr, err)
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	c := &apiClient{base: base, token: f.token, tokenFromEnv: f.token == ""}
	if c.token == "" {
		c.token = os.Getenv(tokenEnv)
	}
	rawJob, err := c.get(ctx, "api/v1/job", nil)
	if err != nil {
		return err
	}
	rawCps, err := c.get(ctx, "api/v1/checkpoints", url.Values{"limit": {strconv.Itoa(f.limit)}})
	if err != nil {
		return err
	}
	var job monitor.JobStatus
	if err := json.Unmarshal(rawJob, &job); err != nil {
		return fmt.Errorf("%s: not a job status: %w", c.shown("api/v1/job", nil), err)
	}
	var cps web.CheckpointsResponse
	if err := json.Unmarshal(rawCps, &cps); err != nil {
		return fmt.Errorf("%s: not a list of checkpoints: %w", c.shown("api/v1/checkpoints", nil), err)
	}
	if f.json {
		var envelope struct {
			Checkpoints json.RawMessage `json:"checkpoints"`
		}
		if err := json.Unmarshal(rawCps, &envelope); err != nil {
			return fmt.Errorf("%s: %w", c.shown("api/v1/checkpoints", nil), err)
		}
		out, err := json.MarshalIndent(struct {
			Job         json.RawMessage `json:"job"`
			Checkpoints json.RawMessage `json:"checkpoints"`
		}{rawJob, envelope.Checkpoints}, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", out)
		return err
	}
	return printStatus(printable{stdout}, job, cps.Checkpoints)
}

// printable writes to its writer with every control character but newline
// and tab replaced by '?': names and errors come from the server, and must
// not reach the terminal as escape sequences.
type printable struct{ w io.Writer }

func (p printable) Write(b []byte) (int, error) {
	clean := make([]byte, len(b))
	for i, c := range b {
		if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
			c = '?'
		}
		clean[i] = c
	}
	return p.w.Write(clean)
}

func parseStatusFlags(args []string, stderr io.Writer) (statusFlags, error) {
	var f statusFlags
	fs := flag.NewFlagSet("jobs status", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by run
	fs.Usage = func() {}
	fs.StringVar(&f.addr, "addr", "", "the job's HTTP address: http://HOST:PORT (what its -http flag was given), or HOST:PORT")
	fs.StringVar(&f.token, "token", "", "the bearer token the server wants (default: $"+tokenEnv+")")
	fs.BoolVar(&f.json, "json", false, `print the API's answers as one JSON object: {"job": ..., "checkpoints": [...]}`)
	fs.IntVar(&f.limit, "limit", 10, "how many recent checkpoints to show")
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) || slices.ContainsFunc(args, isHelp) {
		fmt.Fprintf(stderr, "usage: %s\n", statusSynopsis)
		fs.SetOutput(stderr)
		fs.PrintDefaults()
		return f, &exitError{code: exitOK}
	}
	switch {
	case err != nil:
		return f, usageError(statusSynopsis, "%v", err)
	case fs.NArg() > 0:
		return f, usageError(statusSynopsis, "unexpected argument %q", fs.Arg(0))
	case f.addr == "":
		return f, usageError(statusSynopsis, "--addr is required")
	case f.limit < 1:
		return f, usageError(statusSynopsis, "--limit %d: want 1 or more", f.limit)
	}
	return f, nil
}

// apiBase parses --addr: a URL with scheme http or https, or a bare
// host:port, which means http.
func apiBase(addr string) (*url.URL, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	switch {
	case err != nil:
		return nil, err
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("scheme %q: want http or https", u.Scheme)
	case u.Host == "":
		return nil, errors.New("no host")
	}
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

// apiClient makes the requests of jobs status.
type apiClient struct {
	base         *url.URL
	token        string
	tokenFromEnv bool // the token, if any, came from tokenEnv
}

// url is the address of the API path below base, with query.
func (c *apiClient) url(path string, query url.Values) string {
	return c.target(path, query).String()
}

// shown is url with any password in it masked, for messages.
func (c *apiClient) shown(path string, query url.Values) string {
	return c.target(path, query).Redacted()
}

func (c *apiClient) target(path string, query url.Values) *url.URL {
	u := c.base.JoinPath(path)
	u.RawQuery = query.Encode()
	return u
}

// get GETs path and returns the body of a 200 answer. Any other answer is
// an error that says what the server said.
func (c *apiClient) get(ctx context.Context, path string, query url.Values) ([]byte, error) {
	target := c.shown(path, query)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(path, query), nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", target, err)
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("no answer from %s within %v: %w", target, statusTimeout, err)
		}
		return nil, fmt.Errorf("cannot reach the job at %s: %w", c.base.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading the answer: %w", target, err)
	}
	if resp.StatusCode == http.StatusOK {
		return body, nil
	}
	said := serverSaid(body)
	switch {
	case resp.StatusCode == http.StatusUnauthorized && c.token == "":
		return nil, fmt.Errorf("the server at %s wants a token (--token or %s): %s", c.base.Redacted(), tokenEnv, said)
	case resp.StatusCode == http.StatusUnauthorized:
		from := "--token"
		if c.tokenFromEnv {
			from = tokenEnv
		}
		return nil, fmt.Errorf("the server at %s refused the token of %s: %s", c.base.Redacted(), from, said)
	case resp.StatusCode == http.StatusNotFound:
		return nil, notFound("GET %s: %s: %s (is --addr the address the job serves its API on?)", target, resp.Status, said)
	}
	return nil, fmt.Errorf("GET %s: %s: %s", target, resp.Status, said)
}

// serverSaid returns the error of a JSON error answer ({"error": "..."}),
// else the start of the body.
func serverSaid(body []byte) string {
	var e web.ErrorResponse
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	if s == "" {
		return "(no body)"
	}
	return strconv.Quote(s)
}

// printStatus prints the job's status and its recent checkpoints.
func printStatus(w io.Writer, job monitor.JobStatus, cps []monitor.Checkpoint) error {
	up := "-"
	if !job.Started.IsZero() && !job.Now.IsZero() {
		up = roundDuration(job.Now.Sub(job.Started)).String()
	}
	fmt.Fprintf(w, "job %s: %s, epoch %d, up %s\n", job.Name, job.State, job.Epoch, up)
	if job.Error != "" {
		fmt.Fprintf(w, "error: %s\n", job.Error)
	}
	if lc := job.LastCheckpoint; lc != nil {
		sp := ""
		if lc.Savepoint != "" {
			sp = fmt.Sprintf(" (savepoint %q)", lc.Savepoint)
		}
		fmt.Fprintf(w, "last completed checkpoint: %d%s, %s ago\n", lc.ID, sp, seconds(lc.AgeSeconds))
	} else {
		fmt.Fprintln(w, "last completed checkpoint: none yet")
	}
	n := job.Counts
	fmt.Fprintf(w, "checkpoints: %d completed, %d aborted, %d declined; task failures: %d; restores: %d\n",
		n.Completed, n.Aborted, n.Declined, n.TaskFailures, n.Restores)

	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nOPERATOR\tKIND\tPARALLELISM\tRECORDS IN\tRECORDS OUT\tBACKPRESSURE\tQUEUED BATCHES")
	for _, op := range job.Operators {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%d\n", op.Name, op.Kind, op.Parallelism, op.RecordsIn, op.RecordsOut,
			seconds(op.BackpressureSeconds), op.QueuedBatches)
	}
	if len(job.Nodes) > 0 {
		fmt.Fprintln(tw, "\nNODE\tADDRESS\tSTATE")
		for _, nd := range job.Nodes {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", nd.ID, nd.Address, nd.State)
		}
	}
	if len(cps) == 0 {
		fmt.Fprintln(tw, "\nno checkpoint yet")
	} else {
		fmt.Fprintln(tw, "\nCHECKPOINT\tSTATUS\tDURATION\tSIZE\tALIGNMENT\tSAVEPOINT\tNOTE")
		for _, cp := range cps {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", cp.ID, cp.Status, checkpointDuration(cp), checkpointSize(cp),
				checkpointAlignment(cp), orDash(cp.Savepoint), note(cp))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// An empty last cell leaves the padding of the one before it.
	for l := range strings.Lines(table.String()) {
		if _, err := io.WriteString(w, strings.TrimRight(l, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// checkpointDuration is how long checkpoint cp took, "-" while in
// progress.
func checkpointDuration(cp monitor.Checkpoint) string {
	if cp.Status == monitor.StatusInProgress {
		return "-"
	}
	return seconds(cp.DurationSeconds)
}

// checkpointSize is the state size of a completed checkpoint, else "-".
func checkpointSize(cp monitor.Checkpoint) string {
	if cp.Status != monitor.StatusCompleted {
		return "-"
	}
	return bytesString(cp.Bytes)
}

// checkpointAlignment is the longest alignment of a completed checkpoint,
// else "-".
func checkpointAlignment(cp monitor.Checkpoint) string {
	if cp.Status != monitor.StatusCompleted {
		return "-"
	}
	return seconds(cp.AlignmentSeconds)
}

// note says why a checkpoint was aborted or declined, or that it was the
// final one.
func note(cp monitor.Checkpoint) string {
	var parts []string
	if cp.Final {
		parts = append(parts, "final")
	}
	if cp.Task != "" {
		parts = append(parts, "declined by "+cp.Task)
	}
	if cp.Error != "" {
		parts = append(parts, strings.Join(strings.Fields(cp.Error), " "))
	}
	return strings.Join(parts, ": ")
}

// seconds formats a duration given in seconds.
func seconds(s float64) string {
	return roundDuration(time.Duration(s * float64(time.Second))).String()
}

// roundDuration keeps about three significant digits.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second)
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// bytesString formats n bytes in binary units.
func bytesString(n uint64) string {
	if n < 1024 {
		return fmt.Sprintf("%dB", n)
	}
	v, unit := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	return fmt.Sprintf("%.1f%s", v, unit)
}
