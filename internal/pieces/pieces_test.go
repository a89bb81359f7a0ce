package pieces

import (
	"testing"
	"time"
)

// TestLen: fast records go whole; slow ones are cut to the target, at
// least one record; nothing known, or no target, cuts nothing.
func TestLen(t *testing.T) {
	var e Estimator
	if got := e.Len(256); got != 256 {
		t.Fatalf("nothing observed: Len(256) = %d", got)
	}
	e.Target = time.Millisecond
	if got := e.Len(256); got != 256 {
		t.Fatalf("nothing observed, with a target: Len(256) = %d", got)
	}
	e.Observe(256, 256*100*time.Nanosecond) // 100ns a record: a batch takes 25.6µs
	if got := e.Len(256); got != 256 {
		t.Fatalf("fast records: Len(256) = %d", got)
	}
	var slow Estimator
	slow.Target = time.Millisecond
	slow.Observe(256, 256*50*time.Microsecond) // 50µs a record
	if got := slow.Len(256); got != 20 {
		t.Fatalf("50µs records, 1ms target: Len(256) = %d, want 20", got)
	}
	slow.Observe(1, 10*time.Millisecond) // one very slow record weighs by its count
	if per := slow.PerRecord(); per < 50*time.Microsecond || per > 150*time.Microsecond {
		t.Fatalf("PerRecord = %v after 256 records at 50µs and 1 at 10ms", per)
	}
	var slower Estimator
	slower.Target = time.Millisecond
	slower.Observe(4, 40*time.Millisecond)
	if got := slower.Len(256); got != 1 {
		t.Fatalf("10ms records: Len(256) = %d, want 1", got)
	}
	if got := slower.Len(0); got != 0 {
		t.Fatalf("Len(0) = %d", got)
	}
}

// TestObserveDecays: the estimate follows a change of cost within a few
// observations.
func TestObserveDecays(t *testing.T) {
	e := Estimator{Target: time.Millisecond}
	for range 20 {
		e.Observe(100, 100*time.Microsecond) // 1µs a record
	}
	for range 10 {
		e.Observe(100, 100*time.Millisecond) // 1ms a record
	}
	if per := e.PerRecord(); per < 900*time.Microsecond {
		t.Fatalf("PerRecord = %v ten observations after records became 1000 times slower", per)
	}
	e.Observe(0, time.Hour) // no records: ignored
	if per := e.PerRecord(); per > time.Millisecond {
		t.Fatalf("an observation of no records moved PerRecord to %v", per)
	}
}
