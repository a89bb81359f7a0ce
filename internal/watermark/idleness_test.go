package watermark

import (
	"math/rand/v2"
	"testing"
	"time"
)

const timeout = 100 * time.Millisecond

// Read attempts on time, every period, make a quiet source idle after the
// timeout and no sooner; a read with records starts the count over.
func TestIdlenessOnTimeChecks(t *testing.T) {
	d := NewIdleness(timeout)
	p, ok := d.Period()
	if !ok || p != timeout/IdleChecks {
		t.Fatalf("Period = %v, %v; want %v", p, ok, timeout/IdleChecks)
	}
	now := int64(time.Second)
	d.Read(0, now) // the first attempt: nothing to count from
	for i := range IdleChecks {
		if d.Idle() {
			t.Fatalf("idle after %d checks", i)
		}
		now += int64(p)
		d.Read(0, now)
	}
	if !d.Idle() {
		t.Fatalf("not idle after %d checks spanning the timeout (quiet %v)", IdleChecks, time.Duration(d.Quiet()))
	}
	if _, ok := d.Period(); ok {
		t.Fatal("an idle source asks to read again")
	}
	d.Read(1, now+1)
	if d.Idle() || d.Quiet() != 0 {
		t.Fatalf("a read with records left it idle (quiet %d)", d.Quiet())
	}
}

// A stall, however long, counts for one period: the source is not idle at
// the first attempt after it, nor at the second if that one finds records.
func TestIdlenessStallCountsOnePeriod(t *testing.T) {
	d := NewIdleness(timeout)
	now := int64(time.Second)
	d.Read(0, now)
	now += int64(timeout / 2) // quiet for half the timeout, read on time
	for range 2 {
		now += int64(timeout / 4)
		d.Read(0, now)
	}
	now += int64(3 * timeout) // the process stopped
	d.Read(0, now)
	if d.Idle() {
		t.Fatalf("idle after a stall of three timeouts (quiet %v)", time.Duration(d.Quiet()))
	}
	if got, want := time.Duration(d.Quiet()), 3*timeout/4; got != want {
		t.Fatalf("quiet %v after the stall, want %v", got, want)
	}
}

// Attempts closer than the period count their real gaps: a busy task
// reading other splits makes a quiet split idle after the timeout of
// attempts.
func TestIdlenessFrequentAttempts(t *testing.T) {
	d := NewIdleness(timeout)
	now := int64(time.Second)
	for range 99 {
		d.Read(0, now)
		now += int64(time.Millisecond)
	}
	if d.Idle() {
		t.Fatalf("idle after 98 ms of attempts (quiet %v)", time.Duration(d.Quiet()))
	}
	d.Read(0, now+int64(2*time.Millisecond))
	if !d.Idle() {
		t.Fatalf("not idle after 100 ms of attempts (quiet %v)", time.Duration(d.Quiet()))
	}
	d.Read(0, now) // a clock that went back counts nothing, and breaks nothing
	if !d.Idle() {
		t.Fatal("an attempt at an earlier time made it active")
	}
}

// The count survives a restore; the time between the checkpoint and the
// restore does not count, and neither does the first attempt after it. A
// source idle at the checkpoint is idle again one period of empty attempts
// after the restore, not before it has read: records may have come to it
// while the job was down.
func TestIdlenessRestore(t *testing.T) {
	d := NewIdleness(timeout)
	period, _ := d.Period()
	d.Restore(int64(timeout))
	if d.Idle() {
		t.Fatal("a restored idle source is idle before any read attempt after the restore")
	}
	d.Read(0, int64(time.Hour))
	if d.Idle() {
		t.Fatal("the time before the first attempt after a restore counted")
	}
	d.Read(0, int64(time.Hour+period))
	if !d.Idle() {
		t.Fatal("a source idle at the checkpoint is not idle one period of empty attempts after the restore")
	}
	d.Restore(int64(timeout - 2*period))
	d.Read(0, int64(time.Hour))
	d.Read(0, int64(time.Hour+period))
	if d.Idle() || d.Quiet() != int64(timeout-period) {
		t.Fatalf("quiet %v after a restored %v and one period, want %v", time.Duration(d.Quiet()), timeout-2*period, timeout-period)
	}
	d.Read(0, int64(time.Hour+2*period))
	if !d.Idle() {
		t.Fatal("the restored count did not go on")
	}
	d.Restore(-5)
	if d.Quiet() != 0 {
		t.Fatalf("a negative restored count kept: %d", d.Quiet())
	}
	d.Restore(int64(10 * timeout))
	if d.Quiet() != int64(timeout-period) {
		t.Fatalf("quiet %d, want it capped one period short of the timeout", d.Quiet())
	}
	var never Idleness
	never.Restore(int64(timeout))
	never.Read(0, 1)
	never.Read(0, 1<<62)
	if never.Idle() || never.Quiet() != 0 {
		t.Fatal("the zero Idleness became idle")
	}
	if NewIdleness(-time.Second) != (Idleness{}) {
		t.Fatal("a negative timeout is not the zero Idleness")
	}
}

// Over random attempt times, stalls among them: the quiet time is the sum
// of the gaps between empty attempts since the last records, each counted
// up to one period; a source is idle exactly when that reaches the
// timeout, and never with fewer than IdleChecks empty attempts.
func TestIdlenessNeverFromStalls(t *testing.T) {
	period := int64(timeout) / IdleChecks
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		d := NewIdleness(timeout)
		now, last := int64(time.Second), int64(0)
		empties, quiet := 0, int64(0)
		for step := range 400 {
			if rng.IntN(10) == 0 {
				now += int64(timeout) * (1 + rng.Int64N(5)) // a stall
			} else {
				now += rng.Int64N(2 * period)
			}
			if rng.IntN(8) == 0 {
				d.Read(1+rng.IntN(3), now)
				empties, quiet, last = 0, 0, now
				continue
			}
			d.Read(0, now)
			if last != 0 {
				empties++
				quiet = min(int64(timeout), quiet+min(period, now-last))
			}
			last = now
			if d.Quiet() != quiet {
				t.Fatalf("seed %d step %d: quiet %d, want %d", seed, step, d.Quiet(), quiet)
			}
			if d.Idle() != (quiet >= int64(timeout)) || d.Idle() && empties < IdleChecks {
				t.Fatalf("seed %d step %d: idle %v with quiet %d after %d empty attempts", seed, step, d.Idle(), quiet, empties)
			}
		}
	}
}
