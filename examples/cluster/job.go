package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/snapflow/snapflow/topology"
	"github.com/snapflow/snapflow/topology/filesink"
)

// jobName is the name of the job, and of its checkpoints in the store.
const jobName = "clustersum"

// The job's operators and their parallelism.
const (
	sourceParallelism = 2
	sumParallelism    = 3
	jobTasks          = sourceParallelism + sumParallelism + 1 // and the sink's
)

// jobParams are the flags that shape the job. Every node builds the job from
// them, so they must be the same on every node: the job is Go code, and the
// workers run the sources and the sums.
type jobParams struct {
	records     int64         // records in all, numbered 0..records-1
	keys        int64         // record i has key i % keys
	rate        float64       // records/s of all the sources together (0: unpaced)
	recordBytes int           // each record is padded to about this size
	hold        string        // sources pause halfway until this file exists ("": never)
	sinkDir     string        // the sink's part files (topology/filesink; "": the sink discards)
	sinkDelay   time.Duration // the discarding sink spends this long per record (0: none)
	variant     int           // 2 changes the sum's parallelism (tests of the fingerprint check)
	holdPoll    time.Duration // how often a held source looks for the hold file
}

// record is what the sources emit: record i has key i % keys and value i+1.
// Pad makes it recordBytes long on the wire.
type record struct {
	Key   int64
	Value int64
	Pad   string
}

// total is what the keyed sum emits for every record: the key's new sum.
type total struct {
	Key int64
	Sum int64
}

// recordOverhead is the wire size of a record without its padding (two
// 8-byte numbers; a string that ends a record costs no length).
const recordOverhead = 16

// params are the job's parameters that every node must share: the
// coordinator refuses a worker started with others, naming them.
func (p jobParams) params() map[string]string {
	return map[string]string{
		"records":      strconv.FormatInt(p.records, 10),
		"keys":         strconv.FormatInt(p.keys, 10),
		"rate":         strconv.FormatFloat(p.rate, 'g', -1, 64),
		"record-bytes": strconv.Itoa(p.recordBytes),
		"sink-dir":     p.sinkDir,
		"sink-delay":   p.sinkDelay.String(),
	}
}

// padLen is the length of the padding that makes records recordBytes long.
func (p jobParams) padLen() int { return max(0, p.recordBytes-recordOverhead) }

// sumOperatorParallelism is the parallelism of the keyed sum.
func (p jobParams) sumOperatorParallelism() int {
	if p.variant == 2 {
		return sumParallelism - 1
	}
	return sumParallelism
}

// buildJob returns the job: a paced source of parallelism 2, keyed by
// record key (a shuffle: every source task feeds every sum task, and the
// tasks run on different workers) into a sum of parallelism 3 that keeps a
// count and a sum per key in keyed value state, into a sink. With a sink
// directory, the sink commits a line per record in part files there, exactly
// once (see checkSink); without, it discards the totals.
func buildJob(p jobParams) *topology.Graph {
	pad := strings.Repeat("x", p.padLen())
	g := topology.New(jobName, topology.Params(p.params()))
	recs := topology.FromSource(g, "source", func(subtask, parallelism int) topology.Source[record] {
		return newPacedSource(p, pad, subtask, parallelism)
	}, topology.Parallelism(sourceParallelism))
	byKey := topology.KeyBy(recs, func(r record) int64 { return r.Key })
	sums := topology.Process(byKey, "sum", func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, record, total] {
		sum := topology.Value[int64](s, "sum")
		count := topology.Value[int64](s, "count")
		return func(ctx *topology.Context[int64], r record, out *topology.Collector[total]) error {
			if r.Pad != pad {
				return fmt.Errorf("record %d of key %d arrived with %d bytes of padding, want %d", r.Value-1, r.Key, len(r.Pad), len(pad))
			}
			n, _ := count.Get()
			count.Set(n + 1)
			t, _ := sum.Get()
			t += r.Value
			sum.Set(t)
			out.Emit(total{Key: ctx.Key(), Sum: t})
			return nil
		}
	}, topology.Parallelism(p.sumOperatorParallelism()))
	switch {
	case p.sinkDir != "":
		topology.TwoPhaseCommitSink(sums, "sink", filesink.New(p.sinkDir, filesink.Lines(formatTotal)))
	case p.sinkDelay > 0:
		// A slow consumer: it sleeps once every sinkDelayEvery records, for
		// as long as they take, so that the sleeps are long enough to be
		// kept by the timer.
		var n atomic.Int64
		topology.Sink(sums, "sink", func(total) error {
			if n.Add(1)%sinkDelayEvery == 0 {
				time.Sleep(sinkDelayEvery * p.sinkDelay)
			}
			return nil
		})
	default:
		topology.Sink(sums, "sink", func(total) error { return nil })
	}
	return g
}

// sinkDelayEvery is how many records the slow sink of -sink-delay takes
// between its sleeps.
const sinkDelayEvery = 16

// sourceRecords is how many records source task subtask of parallelism
// emits: the indexes subtask, subtask+parallelism, ... below records.
func sourceRecords(records int64, subtask, parallelism int) int64 {
	if int64(subtask) >= records {
		return 0
	}
	return (records - int64(subtask) + int64(parallelism) - 1) / int64(parallelism)
}

// pacedSource emits its share of the records, at most rate/parallelism per
// second, and pauses halfway while the hold file is missing. Pacing and
// holding only slow it down: what it emits depends on its offset alone, so
// it is replayable. Its offset is the number of records emitted, 8 bytes
// big-endian.
type pacedSource struct {
	p                    jobParams
	pad                  string
	subtask, parallelism int
	count                int64 // records this task emits
	holdAt               int64 // records emitted before the hold
	released             bool  // the hold file exists

	emitted int64     // the offset
	base    int64     // emitted when opened: pacing counts from there
	opened  time.Time // when opened
	perSec  float64   // this task's rate (0: unpaced)
	wake    func()
	timer   *time.Timer // wakes the task when it may read again
}

func newPacedSource(p jobParams, pad string, subtask, parallelism int) *pacedSource {
	count := sourceRecords(p.records, subtask, parallelism)
	return &pacedSource{
		p: p, pad: pad, subtask: subtask, parallelism: parallelism, count: count,
		holdAt: count / 2, released: p.hold == "", perSec: p.rate / float64(parallelism),
	}
}

// SetWake implements topology.Waker.
func (s *pacedSource) SetWake(wake func()) { s.wake = wake }

// Open implements topology.Source.
func (s *pacedSource) Open(_ context.Context, offset []byte) error {
	s.emitted = 0
	if offset != nil {
		if len(offset) != 8 {
			return fmt.Errorf("source#%d: offset of %d bytes, want 8", s.subtask, len(offset))
		}
		n := int64(binary.BigEndian.Uint64(offset))
		if n < 0 || n > s.count {
			return fmt.Errorf("source#%d: offset %d outside 0..%d: was the checkpoint taken with other -records?", s.subtask, n, s.count)
		}
		s.emitted = n
	}
	s.base, s.opened = s.emitted, time.Now()
	return nil
}

// Read implements topology.Source.
func (s *pacedSource) Read(buf []record) (int, error) {
	if s.emitted >= s.count {
		return 0, io.EOF
	}
	limit := s.count
	held := false
	if !s.released {
		if s.emitted < s.holdAt {
			limit = s.holdAt
		} else if _, err := os.Stat(s.p.hold); err == nil {
			s.released = true
		} else {
			limit, held = s.holdAt, true
		}
	}
	var due time.Duration // until the next record is allowed, when paced
	if s.perSec > 0 {
		// The first record at once, then one every 1/perSec seconds.
		elapsed := time.Since(s.opened).Seconds()
		if paced := elapsed * s.perSec; paced < float64(limit-s.base-1) {
			allowed := s.base + 1 + int64(paced)
			limit = allowed
			due = time.Duration((float64(allowed-s.base)/s.perSec - elapsed) * float64(time.Second))
		}
	}
	n := 0
	for n < len(buf) && s.emitted < limit {
		i := int64(s.subtask) + s.emitted*int64(s.parallelism)
		buf[n] = record{Key: i % s.p.keys, Value: i + 1, Pad: s.pad}
		s.emitted++
		n++
	}
	switch {
	case s.emitted >= s.count:
		return n, io.EOF
	case n > 0:
		return n, nil
	case held:
		s.wakeIn(s.p.holdPoll)
	default:
		s.wakeIn(max(due, time.Millisecond))
	}
	return 0, topology.ErrSourceIdle
}

// wakeIn makes the task read again after d.
func (s *pacedSource) wakeIn(d time.Duration) {
	if s.timer != nil {
		s.timer.Reset(d)
		return
	}
	wake := s.wake
	s.timer = time.AfterFunc(d, func() {
		if wake != nil {
			wake()
		}
	})
}

// Offset implements topology.Source.
func (s *pacedSource) Offset() []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(s.emitted))
}

// Close implements topology.Source.
func (s *pacedSource) Close() error {
	if s.timer != nil {
		s.timer.Stop()
	}
	return nil
}

// expected is the closed form of a key's count and sum: the records
// i = key, key+keys, ... below records, with values i+1.
func expected(records, keys, key int64) (count, sum int64) {
	if key >= records {
		return 0, 0
	}
	count = (records - key + keys - 1) / keys
	// sum over j < count of key + j*keys + 1
	sum = count*(key+1) + keys*count*(count-1)/2
	return count, sum
}

// errResult is wrapped by a result that differs from the closed form.
var errResult = errors.New("exactly-once: FAILED")
