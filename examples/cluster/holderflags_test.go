package main

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// TestHolderFlags: the coordinator's -takeover, -lease-timeout,
// -inline-limit and -retain, and the job's -sink-dir and -sink-delay, are
// parsed, and values out of range (a slow sink with a sink directory among
// them) are refused as bad usage naming the flag.
func TestHolderFlags(t *testing.T) {
	base := []string{"-role", "coordinator", "-store", t.TempDir()}
	o, err := parseFlags(append(base, "-takeover", "-lease-timeout", "1m", "-inline-limit", "0", "-retain", "7", "-sink-dir", "out"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.takeOver || o.leaseTimeout != time.Minute || o.inlineLimit != 0 || o.retained != 7 || o.job.sinkDir != "out" {
		t.Errorf("parsed %+v", o)
	}
	if o, err := parseFlags(base, io.Discard); err != nil || o.takeOver || o.leaseTimeout != 0 || o.inlineLimit != -1 || o.retained != 0 || o.job.sinkDir != "" {
		t.Errorf("defaults: %+v, %v; want no take-over, the runtime's lease timeout, inline limit and retention, no sink directory", o, err)
	}
	if o, err := parseFlags(append(base, "-sink-delay", "250us"), io.Discard); err != nil || o.job.sinkDelay != 250*time.Microsecond || o.job.params()["sink-delay"] != "250µs" {
		t.Errorf("-sink-delay 250us: %+v, %v; want a slow sink of 250µs per record, in the job's parameters", o.job, err)
	}
	for _, bad := range [][]string{{"-inline-limit", "-2"}, {"-inline-limit", "5000000"}, {"-retain", "-1"}, {"-lease-timeout", "-1s"},
		{"-sink-delay", "-1ms"}, {"-sink-delay", "1ms", "-sink-dir", "out"}} {
		_, err := parseFlags(append(base, bad...), io.Discard)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v, want bad usage naming %s", bad, err, bad[0])
		}
	}
}
