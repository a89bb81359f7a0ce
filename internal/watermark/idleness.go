package watermark

import "time"

// IdleChecks is how many read attempts, at the least, find nothing before
// a source (or a split) is idle: one read attempt counts for at most
// IdleTimeout / IdleChecks of quiet time.
const IdleChecks = 4

// Idleness decides when a source, or one split of a source, is idle: once
// its read attempts have found nothing for the idleness timeout, counted
// in the attempts themselves and not on the wall clock. Each read attempt
// that finds nothing adds the time since the attempt before it, but never
// more than a check period (the timeout / IdleChecks), so that a stall of
// the whole process (a long GC pause, CPU starvation, a SIGSTOP), in which
// the source could not read, counts as one period at most: after a stall
// the source reads again before it can be idle, and a source is idle only
// after at least IdleChecks attempts that found nothing. A read with
// records makes it active again, and the count starts over.
//
// It is a pure value: the caller passes the processing time of each read
// attempt and, while the source waits for records, attempts a read every
// Period. The zero Idleness is never idle.
type Idleness struct {
	timeout int64 // ns; 0: never idle
	period  int64 // the most one read attempt counts
	quiet   int64 // quiet time counted since the last read with records
	last    int64 // processing time of the last read attempt
	started bool  // a read was attempted since the start or the restore
}

// NewIdleness returns the idleness of a source with idleness timeout
// timeout (0 or less: never idle).
func NewIdleness(timeout time.Duration) Idleness {
	if timeout <= 0 {
		return Idleness{}
	}
	return Idleness{timeout: int64(timeout), period: max(1, int64(timeout)/IdleChecks)}
}

// Read records a read attempt at processing time now that returned n
// records (of this source or split).
func (d *Idleness) Read(n int, now int64) {
	if d.timeout == 0 {
		return
	}
	if n > 0 {
		d.quiet, d.last, d.started = 0, now, true
		return
	}
	if d.started && now > d.last {
		d.quiet = min(d.timeout, d.quiet+min(now-d.last, d.period))
	}
	if !d.started || now > d.last {
		d.last, d.started = now, true
	}
}

// Idle reports whether the read attempts have found nothing for the
// timeout.
func (d *Idleness) Idle() bool { return d.timeout > 0 && d.quiet >= d.timeout }

// Period is how long a source that waits for records waits before it
// attempts a read again, and false when it need not: it is never idle, or
// idle already.
func (d *Idleness) Period() (time.Duration, bool) {
	if d.timeout == 0 || d.Idle() {
		return 0, false
	}
	return time.Duration(d.period), true
}

// Quiet is the quiet time counted so far: what a checkpoint keeps, so that
// a restored source resumes its count, and an idle one is idle at once.
func (d *Idleness) Quiet() int64 { return d.quiet }

// Restore sets the quiet time counted, from a checkpoint, as of no read
// attempt yet: the time between the checkpoint and the restore does not
// count. A source (or split) idle at the checkpoint is restored one period
// short of idle: it is idle again after its first read attempts after the
// restore have found nothing, not before, since records may have come to
// it while the job was down.
func (d *Idleness) Restore(quiet int64) {
	if d.timeout > 0 {
		d.quiet, d.started = min(max(quiet, 0), d.timeout-d.period), false
	}
}

// Timeout is the idleness timeout (0: never idle).
func (d *Idleness) Timeout() time.Duration { return time.Duration(d.timeout) }
