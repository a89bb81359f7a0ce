package main

// ratios sets each snapflow row's throughput relative to the unthrottled
// row with checkpoints off of its mode (abs for sync), topology,
// parallelism and state, and a cluster row's also relative to the abs one
// (in one process). A baseline has none: it is not snapflow with
// checkpoints on. An unthrottled kafka row's is against the alo row, and
// its RatioToLoop against the plain loop's.
func ratios(rows []Row) {
	for i := range rows {
		r := &rows[i]
		r.RatioToOff, r.RatioToInProcess, r.RatioToLoop, r.RatioToUnmonitored = metric{}, metric{}, metric{}, metric{}
		r.RatioToUntimed = metric{}
		r.RatioP99ToFull, r.RatioToHeap, r.SyncRatioToHeap = metric{}, metric{}, metric{}
		r.RatioToAligned, r.RatioP99ToAligned = metric{}, metric{}
		if r.Backend != "" {
			if heap, ok := heapRow(rows, *r); ok {
				r.RatioToHeap = per(r.RecordsPerSec.or(0), heap.RecordsPerSec.or(0))
				if s, ok := r.SyncP50Ms.value(); ok {
					r.SyncRatioToHeap = per(s, heap.SyncP50Ms.or(0))
				}
			}
		}
		if r.baseline() {
			continue
		}
		if p99, ok := r.CkptP99Ms.value(); ok && r.Checkpointing == "incremental" {
			if full, ok := fullRow(rows, *r); ok {
				r.RatioP99ToFull = per(p99, full.CkptP99Ms.or(0))
			}
		}
		v, ok := r.RecordsPerSec.value()
		if !ok {
			continue
		}
		offMode := "abs"
		if r.Topology == "kafka" {
			if r.Rate > 0 {
				continue
			}
			offMode = kafkaALO
			if loop, ok := offRate(rows, *r, kafkaLoop); ok {
				r.RatioToLoop = per(v, loop)
			}
		}
		if r.Mode == "cluster" {
			offMode = "cluster"
			if off, ok := offRate(rows, *r, "abs"); ok {
				r.RatioToInProcess = per(v, off)
			}
		}
		if off, ok := offRate(rows, *r, offMode); ok {
			r.RatioToOff = per(v, off)
		}
		if r.EventTime != "" {
			if u, ok := twinRate(rows, *r, func(o Row) bool { return o.EventTime == "" && o.Monitored == r.Monitored }); ok {
				r.RatioToUntimed = per(v, u)
			}
		}
		if r.CheckpointMode != "" && r.CheckpointMode != "aligned" {
			aligned := func(o Row) bool { return o.CheckpointMode == "aligned" && o.Recovery == r.Recovery }
			if u, ok := twinRate(rows, *r, aligned); ok {
				r.RatioToAligned = per(v, u)
			}
			if p99, ok := r.CkptP99Ms.value(); ok {
				if a, ok := twinP99(rows, *r, aligned); ok {
					r.RatioP99ToAligned = per(p99, a)
				}
			}
		}
		if r.Monitored {
			if u, ok := twinRate(rows, *r, func(o Row) bool { return !o.Monitored && o.EventTime == r.EventTime }); ok {
				r.RatioToUnmonitored = per(v, u)
			}
		}
	}
}

// offRate is the records/s of the unthrottled row of mode with checkpoints
// off and r's topology, parallelism and state, if rows hold one measured.
func offRate(rows []Row, r Row, mode string) (float64, bool) {
	for _, o := range rows {
		if o.Mode == mode && o.Interval == "off" && !o.Monitored && o.EventTime == "" && o.Topology == r.Topology && o.Parallelism == r.Parallelism &&
			o.StateSize == r.StateSize && o.UpdateFraction == r.UpdateFraction && o.MaxParallelism == r.MaxParallelism && o.SinkRate == 0 && o.Rate == 0 &&
			o.Backend == r.Backend {
			return o.RecordsPerSec.value()
		}
	}
	return 0, false
}

// fullRow is the full row with r's interval, topology, parallelism, state,
// update fraction, key groups, store and rates, if rows hold one.
func fullRow(rows []Row, r Row) (Row, bool) {
	for _, o := range rows {
		if o.Checkpointing == "full" && o.Mode == r.Mode && o.Interval == r.Interval && o.Topology == r.Topology &&
			o.Parallelism == r.Parallelism && o.StateSize == r.StateSize && o.Keys == r.Keys && o.UpdateFraction == r.UpdateFraction &&
			o.MaxParallelism == r.MaxParallelism && o.Store == r.Store && o.Rate == r.Rate && o.SinkRate == r.SinkRate && o.SinkPaceEvery == r.SinkPaceEvery && o.Backend == r.Backend && !o.Recovery {
			return o, true
		}
	}
	return Row{}, false
}

// twinRate is the records/s of the last measured row that runs what r runs
// (mode, interval, topology, parallelism, state, rates) and that is as
// twin says: r without the monitoring, or without event time.
func twinRate(rows []Row, r Row, twin func(Row) bool) (v float64, ok bool) {
	for _, o := range rows {
		if twin(o) && o.Mode == r.Mode && o.Interval == r.Interval && o.Topology == r.Topology &&
			o.Parallelism == r.Parallelism && o.StateSize == r.StateSize && o.SinkRate == r.SinkRate && o.SinkPaceEvery == r.SinkPaceEvery && o.Rate == r.Rate {
			if u, measured := o.RecordsPerSec.value(); measured {
				v, ok = u, true
			}
		}
	}
	return v, ok
}

// twinP99 is twinRate's for the checkpoint p99.
func twinP99(rows []Row, r Row, twin func(Row) bool) (v float64, ok bool) {
	for _, o := range rows {
		if twin(o) && o.Mode == r.Mode && o.Interval == r.Interval && o.Topology == r.Topology &&
			o.Parallelism == r.Parallelism && o.StateSize == r.StateSize && o.SinkRate == r.SinkRate && o.SinkPaceEvery == r.SinkPaceEvery && o.Rate == r.Rate {
			if u, measured := o.CkptP99Ms.value(); measured {
				v, ok = u, true
			}
		}
	}
	return v, ok
}

// heapRow is the row that runs what r runs with its state on the heap, if
// rows hold one.
func heapRow(rows []Row, r Row) (Row, bool) {
	for _, o := range rows {
		if o.Backend == "" && o.Recovery == r.Recovery && o.Checkpointing == r.Checkpointing && o.Mode == r.Mode && o.Interval == r.Interval && o.Topology == r.Topology &&
			o.Parallelism == r.Parallelism && o.StateSize == r.StateSize && o.Keys == r.Keys && o.UpdateFraction == r.UpdateFraction &&
			o.MaxParallelism == r.MaxParallelism && o.Store == r.Store && o.Rate == r.Rate && o.SinkRate == r.SinkRate && o.SinkPaceEvery == r.SinkPaceEvery {
			return o, true
		}
	}
	return Row{}, false
}
