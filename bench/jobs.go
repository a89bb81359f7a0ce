package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/snapflow/snapflow/internal/benchwork"
	"github.com/snapflow/snapflow/topology"
)

// probe is what a benchmark job reports while it runs: records seen by the
// sink and their latencies.
type probe struct {
	records atomic.Int64
	latency benchwork.Histogram
	failAt  atomic.Int64 // >0: the keyed operator panics once on its next record after this many sink records
	failed  atomic.Bool
	window  atomic.Bool // set while the measuring window is open: latencies count
}

// buildJob adds the topology of rc to a new graph named job. Every shape
// ends in a keyed sum ("sum") feeding the sink.
func buildJob(job string, rc rowConfig, p *probe) (*topology.Graph, error) {
	maxp := rc.MaxParallelism
	if maxp == 0 {
		maxp = max(128, rc.Parallelism)
	}
	g := topology.New(job, topology.MaxParallelism(maxp))
	gen := benchwork.NewGenerator(rc.Keys, rc.RecordSize).WithUpdateFraction(rc.UpdateFraction)
	// The rate and the record limit are the job's: they are shared by every
	// source task of every source operator.
	tasks := sourceTasks(rc.Topology)
	limit := uint64(rc.Records) / uint64(tasks) // per source task
	if rc.Records > 0 && limit == 0 {
		return nil, fmt.Errorf("bench: topology %s: %d records are fewer than its %d source tasks", rc.Topology, rc.Records, tasks)
	}
	// Every topology delivers each source record to the sink once.
	sinkTotal := int64(limit) * int64(tasks)
	source := func(name string, parallelism int) topology.Stream[benchwork.Record] {
		opts := []topology.Option{topology.Parallelism(parallelism)}
		if rc.EventTime != "" {
			opts = append(opts, topology.WithWatermarks(topology.WatermarkStrategy[benchwork.Record]{
				Timestamp: func(r benchwork.Record) time.Time { return time.Unix(0, r.TS) }}))
		}
		return topology.FromSource(g, name, func(subtask, _ int) topology.Source[benchwork.Record] {
			return &genSource{gen: gen, rate: rc.Rate / float64(tasks), limit: limit}
		}, opts...)
	}
	var in topology.Stream[benchwork.Record]
	switch name, arg, _ := strings.Cut(rc.Topology, "-"); name {
	case "paritysum":
		in = source("source", 1)
	case "chain":
		n, err := strconv.Atoi(arg)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("topology %q: want chain-N with N >= 1", rc.Topology)
		}
		in = source("source", 1)
		for i := range n {
			in = topology.Map(in, fmt.Sprintf("map%d", i), func(r benchwork.Record) benchwork.Record { r.Key++; return r })
		}
	case "fanout":
		// 1 -> 4 -> parallelism: a keyed pre-aggregation stage of 4 first.
		first := sumStage(topology.KeyBy(source("source", 1), recordKey), "pre", 4, rc, p)
		in = topology.Map(first, "unwrap", func(o benchwork.Output) benchwork.Record { return benchwork.Record{Key: o.Key, TS: o.TS} })
	case "union":
		a, b := source("source-a", 1), source("source-b", 1)
		switch arg {
		case "":
		case "skewed":
			// One input of the union lags: source-b passes through "lag",
			// which -sink-rate (here the lag's, not the sink's) paces.
			pace := newPacer(rc.SinkRate)
			b = topology.Map(b, "lag", func(r benchwork.Record) benchwork.Record { pace.record(); return r })
		default:
			return nil, fmt.Errorf("topology %q: want union or union-skewed", rc.Topology)
		}
		in = topology.Union(a, b)
	case "diamond":
		src := source("source", 1)
		in = topology.Union(
			topology.Filter(src, "even", func(r benchwork.Record) bool { return r.Key%2 == 0 }),
			topology.Filter(topology.Rebalance(src), "odd", func(r benchwork.Record) bool { return r.Key%2 == 1 }))
	case "fanin":
		// A keyed task with F inputs: F source tasks into one sum.
		f, err := strconv.Atoi(arg)
		if err != nil || f < 1 {
			return nil, fmt.Errorf("topology %q: want fanin-F with F >= 1", rc.Topology)
		}
		in = source("source", f)
	default:
		return nil, fmt.Errorf("unknown topology %q (paritysum, chain-N, fanout, union, union-skewed, diamond, fanin-F)", rc.Topology)
	}
	par := rc.Parallelism
	if strings.HasPrefix(rc.Topology, "fanin") {
		par = 1
	}
	sums := sumStage(topology.KeyBy(in, recordKey), "sum", par, rc, p)
	// One sink task, run by one actor at a time: its state needs no lock.
	// It takes the records a batch at a time, as the hand-written baselines
	// do, and reads the clock once per batch (per record, the reads would
	// cost more than the work measured), and again after a paced sleep.
	// The probe is updated every 256 records, and at the last record of a
	// bounded run, so that its count is exact.
	tss := make([]int64, 0, 256)
	var n, reported int64
	sinkRate := rc.SinkRate
	if rc.Topology == "union-skewed" {
		sinkRate = 0 // -sink-rate is the lag's
	}
	pace := newPacer(sinkRate) // a slow consumer: blocks until its rate allows more
	if rc.SinkPaceEvery > 0 {
		pace.every = int64(rc.SinkPaceEvery)
	}
	topology.SinkBatch(sums, "sink", func(batch []benchwork.Output) error {
		now := time.Now().UnixNano()
		timing := p.window.Load() // the measuring window is open: latencies count
		for _, o := range batch {
			if sinkRate > 0 && pace.record() {
				now = time.Now().UnixNano()
			}
			if timing {
				tss = append(tss, o.TS-now) // latency = now - TS, see RecordBatch below
			}
			if n++; n%256 != 0 && n != sinkTotal {
				continue
			}
			p.latency.RecordBatch(0, tss)
			p.records.Add(n - reported)
			reported = n
			tss = tss[:0]
		}
		return nil
	})
	return g, nil
}

// paceEvery is how many records a pacer lets through between sleeps: a
// slow consumer spends its time spread over its records, as one that waits
// on an external system per record would (Flink's CheckpointingTimeBenchmark
// sleeps per record), rather than in one stall per batch.
const paceEvery = 16

// pacer holds a task to rate records/s (0: no limit), sleeping every
// `every` records. One task calls it: it needs no lock.
type pacer struct {
	rate  float64
	every int64
	n     int64
	start time.Time
}

func newPacer(rate float64) *pacer { return &pacer{rate: rate, every: paceEvery} }

// record counts a record and, every p.every records, sleeps until the
// rate allows the next ones. It reports whether it slept.
func (p *pacer) record() bool {
	if p.rate <= 0 {
		return false
	}
	if p.n++; p.n%p.every != 0 {
		return false
	}
	if p.start.IsZero() {
		p.start = time.Now()
	}
	time.Sleep(time.Until(p.start.Add(time.Duration(float64(p.n) / p.rate * float64(time.Second)))))
	return true
}

func recordKey(r benchwork.Record) uint64 { return r.Key }

// sourceTasks is the number of source tasks of a topology.
func sourceTasks(topo string) int {
	name, arg, _ := strings.Cut(topo, "-")
	switch name {
	case "union":
		return 2
	case "fanin":
		if f, err := strconv.Atoi(arg); err == nil && f > 0 {
			return f
		}
	}
	return 1
}

// sumStage is the keyed per-record work: a running sum per key, and, with a
// state size, a value of that many bytes per key.
func sumStage(s topology.KeyedStream[benchwork.Record, uint64], name string, par int, rc rowConfig, p *probe) topology.Stream[benchwork.Output] {
	blob := ""
	if rc.StateSize > 0 {
		// Random bytes: the on-disk backend compresses its files, and a
		// value of one repeated byte would shrink to almost nothing.
		b := make([]byte, rc.StateSize)
		rng := rand.New(rand.NewPCG(uint64(rc.StateSize), 7))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		blob = string(b)
	}
	return topology.Process(s, name, func(ks *topology.KeyedSetup[uint64]) topology.ProcessFunc[uint64, benchwork.Record, benchwork.Output] {
		sum := topology.Value[uint64](ks, "sum")
		var state *topology.ValueState[uint64, string]
		if blob != "" {
			state = topology.Value[string](ks, "blob")
		}
		timers := rc.EventTime == "timers"
		failing := rc.Recovery
		var seq int64 // makes each record's timer distinct
		if timers {
			topology.OnTimer(ks, func(*topology.Context[uint64], topology.Timer, *topology.Collector[benchwork.Output]) error {
				return nil
			})
		}
		return func(ctx *topology.Context[uint64], r benchwork.Record, out *topology.Collector[benchwork.Output]) error {
			if failing { // read only where a recovery is measured, as the baselines inject no failure
				if at := p.failAt.Load(); at > 0 && p.records.Load() >= at && p.failed.CompareAndSwap(false, true) {
					panic("bench: injected failure to measure recovery")
				}
			}
			if timers {
				seq++
				ctx.RegisterEventTimer(time.Unix(0, r.TS+int64(time.Millisecond)+seq%int64(time.Millisecond)))
			}
			v, _ := sum.Get()
			v = benchwork.Add(v, r)
			sum.Set(v)
			if state != nil && v == 1 {
				state.Set(blob)
			}
			out.Emit(benchwork.Output{Key: ctx.Key(), Sum: v, TS: r.TS})
			return nil
		}
	}, topology.Parallelism(par))
}
