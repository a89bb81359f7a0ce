package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/snapflow/snapflow/snapshots"
)

// flags are the flags that every checkpoints and savepoints subcommand
// takes.
type flags struct {
	fs       *flag.FlagSet
	synopsis string
	store    string
	job      string
}

func newFlags(name, synopsis string) *flags {
	f := &flags{fs: flag.NewFlagSet(name, flag.ContinueOnError), synopsis: synopsis}
	f.fs.SetOutput(io.Discard) // errors are reported by run
	f.fs.Usage = func() {}
	f.fs.StringVar(&f.store, "store", "", "the snapshot store: a directory, file:///PATH, mem://NAME or s3://BUCKET/PREFIX?...")
	f.fs.StringVar(&f.job, "job", "", "the job; may be left out when the store holds exactly one")
	return f
}

// checkpointArg is the ID argument of a subcommand: a checkpoint id, or
// latest, the newest complete checkpoint.
type checkpointArg struct {
	id     uint64
	latest bool
}

// latestArg names the newest complete checkpoint on the command line.
const latestArg = "latest"

// isHelp reports whether a is a request for help.
func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

// parseArgs parses args: flags, then one positional argument when what
// names it ("the checkpoint ID"), or none when what is empty. On -h, -help
// or --help, wherever it stands before a "--", it prints the subcommand's
// usage and returns an error meaning exit 0.
func (f *flags) parseArgs(args []string, stderr io.Writer, what string) (string, error) {
	options := args
	if i := slices.Index(args, "--"); i >= 0 {
		options = args[:i]
	}
	err := f.fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) || slices.ContainsFunc(options, isHelp) {
		fmt.Fprintf(stderr, "usage: %s\n", f.synopsis)
		f.fs.SetOutput(stderr)
		f.fs.PrintDefaults()
		return "", &exitError{code: exitOK}
	}
	if err != nil {
		return "", usageError(f.synopsis, "%v", err)
	}
	// A flag after the argument is named as such, before anything it
	// would have set is missed (--store after the ID).
	rest := f.fs.Args()
	for i, a := range rest {
		if i > 0 && len(a) > 1 && a[0] == '-' {
			return "", usageError(f.synopsis, "flag %s after the argument %q: flags must come before positional arguments", a, rest[0])
		}
	}
	if f.store == "" {
		return "", usageError(f.synopsis, "--store is required")
	}
	n := 0
	if what != "" {
		n = 1
	}
	switch {
	case len(rest) > n:
		return "", usageError(f.synopsis, "unexpected argument %q", rest[n])
	case len(rest) < n:
		return "", usageError(f.synopsis, "missing %s", what)
	case n == 0:
		return "", nil
	}
	return rest[0], nil
}

// parse parses args: flags, then the checkpoint ID when wantID is set (see
// parseArgs).
func (f *flags) parse(args []string, stderr io.Writer, wantID bool) (checkpointArg, error) {
	what := ""
	if wantID {
		what = "the checkpoint ID"
	}
	raw, err := f.parseArgs(args, stderr, what)
	if err != nil || !wantID {
		return checkpointArg{}, err
	}
	if raw == latestArg {
		return checkpointArg{latest: true}, nil
	}
	id, err := strconv.ParseUint(strings.TrimPrefix(raw, "chk-"), 10, 64)
	if err != nil || id == 0 {
		return checkpointArg{}, usageError(f.synopsis, "checkpoint ID %q: want a number from 1 up, or %s", raw, latestArg)
	}
	return checkpointArg{id: id}, nil
}

// parseName parses args: flags, then the savepoint NAME, which must be a
// valid savepoint name (see parseArgs).
func (f *flags) parseName(args []string, stderr io.Writer) (string, error) {
	name, err := f.parseArgs(args, stderr, "the savepoint NAME")
	if err != nil {
		return "", err
	}
	if err := snapshots.ValidateSavepointName(name); err != nil {
		return "", usageError(f.synopsis, "%v", err)
	}
	return name, nil
}

// resolve returns the checkpoint id that arg names in c. For latest, that
// is the checkpoint a recovery would restore: the newest complete one whose
// objects all verify (a newer one that does not is passed over, as
// recovery passes over it). It says on stderr which one, and which newer
// ones it passed over.
func resolve(ctx context.Context, c *snapshots.Checkpoints, arg checkpointArg, stderr io.Writer) (uint64, error) {
	if !arg.latest {
		return arg.id, nil
	}
	newest, err := c.LatestCompleteID(ctx)
	if err != nil {
		return 0, err
	}
	if newest == 0 {
		return 0, notFound("job %s has no complete checkpoint, so no %s one", c.Job(), latestArg)
	}
	rp, err := c.Load(ctx, snapshots.LoadOptions{})
	switch {
	case errors.Is(err, snapshots.ErrNoUsableCheckpoint):
		return 0, notFound("job %s has complete checkpoints (the newest is %d), but none a recovery could restore, so no %s one: %v", c.Job(), newest, latestArg, err)
	case err != nil:
		return 0, err
	case rp == nil:
		return 0, notFound("job %s has no usable complete checkpoint, so no %s one", c.Job(), latestArg)
	}
	id := rp.Manifest.GetCheckpointId()
	if id != newest {
		fmt.Fprintf(stderr, "snapflow: %s is checkpoint %d of job %s, the one a recovery would restore: the newer complete checkpoints up to %d do not verify (checkpoints list says which)\n",
			latestArg, id, c.Job(), newest)
		return id, nil
	}
	fmt.Fprintf(stderr, "snapflow: %s is checkpoint %d of job %s\n", latestArg, id, c.Job())
	return id, nil
}

// open opens the store and picks the job. The caller closes c.Store().
func (f *flags) open(ctx context.Context) (*snapshots.Checkpoints, error) {
	s, err := openStore(ctx, f.store)
	if err != nil {
		return nil, err
	}
	job, err := pickJob(ctx, s, f.job)
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return snapshots.NewCheckpoints(s, job, nil), nil
}

// openStore opens the store at raw. A local directory that does not exist
// is not found rather than created, since the commands only look at what is
// there.
func openStore(ctx context.Context, raw string) (snapshots.Store, error) {
	if dir, ok := localDir(raw); ok {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil, notFound("no store at %s: the directory does not exist", dir)
		}
	}
	s, err := snapshots.Open(ctx, raw)
	if err != nil {
		if badURL(err) && ctx.Err() == nil {
			return nil, &exitError{code: exitUsage, err: fmt.Errorf("--store: %w", err)}
		}
		return nil, fmt.Errorf("open store: %w", err)
	}
	return s, nil
}

// badURL reports whether err from snapshots.Open is about the URL itself.
// It is a stopgap until snapshots exports a sentinel: its parse errors all
// start like this, and its I/O errors (unreachable endpoint, missing bucket,
// unwritable directory) do not.
func badURL(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "snapshots: store URL ") || strings.HasPrefix(msg, "snapshots: unsupported store URL ")
}

// localDir returns the directory that raw names when it is a plain path or
// a file:// URL.
func localDir(raw string) (string, bool) {
	if scheme, _, ok := strings.Cut(raw, "://"); ok {
		u, err := url.Parse(raw)
		if !strings.EqualFold(scheme, "file") || err != nil || (u.Host != "" && u.Host != "localhost") {
			return "", false // Open explains what is wrong
		}
		return u.Path, u.Path != ""
	}
	return raw, raw != "" && !strings.Contains(raw, ":")
}

// jobs returns the jobs that have checkpoints or savepoints in s, sorted:
// the first path segment of every key of the form JOB/checkpoints/... or
// JOB/savepoints/....
func jobs(ctx context.Context, s snapshots.Store) ([]string, error) {
	keys, err := s.List(ctx, "")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range keys {
		job, rest, _ := strings.Cut(k, "/")
		if job != "" && (strings.HasPrefix(rest, "checkpoints/") || strings.HasPrefix(rest, "savepoints/")) {
			out = append(out, job)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// pickJob returns job if it has checkpoints or savepoints in s, or, when
// job is empty, the only job that has.
func pickJob(ctx context.Context, s snapshots.Store, job string) (string, error) {
	all, err := jobs(ctx, s)
	if err != nil {
		return "", err
	}
	switch {
	case job != "" && slices.Contains(all, job):
		return job, nil
	case job != "" && len(all) == 0:
		return "", notFound("no job %q in %s: it holds no checkpoints or savepoints", job, s)
	case job != "":
		return "", notFound("no job %q in %s (jobs: %s)", job, s, strings.Join(all, ", "))
	case len(all) == 0:
		return "", notFound("no checkpoints or savepoints in %s", s)
	case len(all) > 1:
		return "", &exitError{code: exitUsage, err: fmt.Errorf("%s holds several jobs; choose one with --job: %s", s, strings.Join(all, ", "))}
	}
	return all[0], nil
}

// lookup reports whether checkpoint id is complete, and returns a not-found
// error when it has no object at all.
func lookup(ctx context.Context, c *snapshots.Checkpoints, id uint64) (complete bool, err error) {
	keys, err := c.Store().List(ctx, snapshots.CheckpointPrefix(c.Job(), id))
	if err != nil {
		return false, err
	}
	if len(keys) == 0 {
		return false, notFound("job %s has no checkpoint %d", c.Job(), id)
	}
	return slices.Contains(keys, snapshots.ManifestKey(c.Job(), id)), nil
}

func incomplete(c *snapshots.Checkpoints, id uint64) error {
	return fmt.Errorf("checkpoint %d of job %s is incomplete: it has no manifest (it was aborted or is still in flight)", id, c.Job())
}

// closeStore closes c's store, keeping the first error in *err.
func closeStore(c *snapshots.Checkpoints, err *error) {
	if cerr := c.Store().Close(); cerr != nil && *err == nil {
		*err = fmt.Errorf("close store: %w", cerr)
	}
}
