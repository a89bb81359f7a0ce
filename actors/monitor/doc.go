// Package monitor watches a running job for operators: it keeps the recent
// checkpoint history, a timeline of failures, restores and cluster nodes,
// and the job's state, and exports Prometheus metrics. It serves no HTTP:
// package actors/web does, on top of a Monitor.
//
// A Monitor is fed only by what the runtime publishes: the events passed to
// its Listener (give it to actors.WithListener) and, once the job has
// started, the job itself (Attach), whose plan gives the operators, tasks
// and edges and whose counters (actors.Job.TaskMetrics) are read when the
// metrics are scraped or the status is asked for, never per record.
//
//	mon, err := monitor.New(monitor.Options{Registry: reg})
//	...
//	job, err := actors.Start(ctx, g, actors.WithListener(mon.Listener()))
//	...
//	mon.Attach(job)
//
// # Job states
//
// The state follows the events: starting, then running (EventRunning);
// restoring from a task failure (EventTaskFailed) until the job runs again;
// finished (EventFinished) or failed (EventFailed) for good. A job stopped
// by actors.Job.Stop, StopWithSavepoint or its context reports no event: the
// monitor notes it as stopped once the attached job is done.
//
// # Memory
//
// The Monitor keeps the newest Options.History checkpoints, with their
// per-task figures, and the newest Options.Timeline timeline entries, in
// rings; older ones are forgotten. Counters and histograms have a fixed size.
//
// # Metrics
//
// With Options.Registry set, New registers one collector on it (never on
// the global registry) that exports, every series with the label job_name
// (not job, which Prometheus sets to the scrape target's job):
//
//	snapflow_checkpoint_duration_seconds       histogram: trigger to completion, per completed checkpoint (not one settled after a failover)
//	snapflow_checkpoint_size_bytes             histogram: state bytes, per completed checkpoint
//	snapflow_checkpoint_alignment_seconds      histogram: per task with several input channels per completed checkpoint
//	snapflow_checkpoint_sync_seconds           histogram: per task per completed checkpoint
//	snapflow_checkpoint_async_seconds          histogram: per task per completed checkpoint
//	snapflow_checkpoints_total{result}         counter: completed, aborted, declined
//	snapflow_last_checkpoint_id                gauge
//	snapflow_last_checkpoint_age_seconds       gauge, computed at scrape (absent before the first checkpoint)
//	snapflow_restores_total                    counter
//	snapflow_task_failures_total{cause}        counter: panic, error, commit, restore, node-lost, other
//	snapflow_operator_records_in_total{operator}   counter
//	snapflow_operator_records_out_total{operator}  counter
//	snapflow_task_backpressure_seconds_total{task} counter: time an output had no credit
//	snapflow_task_queued_batches{task}         gauge: batches waiting for credit
//
// Savepoints count as checkpoints. The duration histograms have exponential
// buckets from 100 µs to about 3.5 min, the size histogram from 1 KiB to
// 16 GiB. The last four are read from the attached job at scrape time; a
// monitor attached to one job after another (a restart, a rescale) adds
// what the earlier jobs counted, so that its counters only grow.
//
// # Live updates
//
// Subscribe returns a channel of Updates for server-sent events. The
// listener never waits for a subscriber: each subscriber has a buffer of
// SubscriberBuffer updates, and an update that does not fit is dropped for
// that subscriber (not coalesced). A reader that may have missed updates
// reloads the state from Job, Checkpoints and Timeline.
//
// The guide is docs/monitoring.md in the repository.
package monitor
