package chaos

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/topology"
)

// Event is one record of the semantics check: the seq-th record of key.
type Event struct {
	Key int64
	Seq int64
}

// Violations collects semantic violations. They are recorded outside any
// operator state, so a violation is not forgotten when the job recovers.
type Violations struct {
	mu   sync.Mutex
	list []string
}

// Add records a violation.
func (v *Violations) Add(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.list) < 100 {
		v.list = append(v.list, fmt.Sprintf(format, args...))
	}
}

// Err returns nil, or an error listing the violations.
func (v *Violations) Err() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.list) == 0 {
		return nil
	}
	return fmt.Errorf("chaos: %d semantic violations:\n  %s", len(v.list), strings.Join(v.list, "\n  "))
}

// Generate adds a source of Events: record i (from 0) of task s is key
// keyBase + (i*p+s) % keys, with the seq that key has reached. Each key is
// produced by exactly one task, in seq order; count records in all. With
// rate > 0 the source emits at most rate records/s (per task), going idle in
// between, so that a run lasts long enough for checkpoints to complete
// between failures.
func Generate(g *topology.Graph, name string, keyBase, keys, count int64, rate float64, opts ...topology.Option) topology.Stream[Event] {
	gen := func(i int64) Event { return Event{Key: keyBase + i%keys, Seq: i/keys + 1} }
	if rate <= 0 {
		return topology.Generate(g, name, count, gen, opts...)
	}
	return topology.FromSource(g, name, func(subtask, parallelism int) topology.Source[Event] {
		return testsrc.NewRated(gen, count, int64(subtask), int64(parallelism), rate)
	}, opts...)
}

// Check adds the keyed checker: it keeps the last seq of each key in state
// and records a violation, then fails, when a record is not exactly the next
// seq. in, when not nil, may panic on any record (OperatorPanic).
func Check(s topology.Stream[Event], name string, p int, in *Injector, v *Violations) topology.Stream[Event] {
	keyed := topology.KeyBy(s, func(e Event) int64 { return e.Key })
	return topology.Process(keyed, name, func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, Event, Event] {
		last := topology.Value[int64](ks, "last")
		task := ks.TaskID()
		return func(ctx *topology.Context[int64], e Event, out *topology.Collector[Event]) error {
			if in != nil {
				in.OperatorFault(task, e.Key, e.Seq)
			}
			l, _ := last.Get()
			if e.Seq != l+1 {
				v.Add("%s: key %d: seq %d after %d", task, e.Key, e.Seq, l)
				return fmt.Errorf("semantics violated in %s: key %d got seq %d after %d", task, e.Key, e.Seq, l)
			}
			last.Set(e.Seq)
			out.Emit(e)
			return nil
		}
	}, topology.Parallelism(p))
}

// Sink is the verifying sink: per key, a seq may repeat (a replay) but never
// skip one, and the highest seq is the final count.
type Sink struct {
	mu  sync.Mutex
	max map[int64]int64
	v   *Violations
}

// NewSink returns a verifying sink reporting to v.
func NewSink(v *Violations) *Sink { return &Sink{max: map[int64]int64{}, v: v} }

// Write is the sink function.
func (s *Sink) Write(e Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.max[e.Key]; e.Seq > m+1 {
		s.v.Add("sink: key %d: seq %d after at most %d: records were lost", e.Key, e.Seq, m)
	} else if e.Seq == m+1 {
		s.max[e.Key] = e.Seq
	}
	return nil
}

// Max returns the highest seq seen per key.
func (s *Sink) Max() map[int64]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int64]int64, len(s.max))
	for k, v := range s.max {
		out[k] = v
	}
	return out
}

// Expected returns the final seq of each key for sources made by Generate.
func Expected(keyBase, keys, count int64) map[int64]int64 {
	out := map[int64]int64{}
	for k := int64(0); k < keys && k < count; k++ {
		out[keyBase+k] = (count - k + keys - 1) / keys
	}
	return out
}

// Diff describes how got differs from want, or returns "".
func Diff(got, want map[int64]int64) string {
	var d []string
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			d = append(d, fmt.Sprintf("key %d: %d, want %d", k, g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			d = append(d, fmt.Sprintf("key %d: %d, want none", k, g))
		}
	}
	sort.Strings(d)
	if len(d) > 10 {
		d = append(d[:10], fmt.Sprintf("... %d more", len(d)-10))
	}
	return strings.Join(d, "; ")
}
