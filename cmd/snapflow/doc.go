// Command snapflow inspects and manages the checkpoints and savepoints that
// snapflow jobs keep in a snapshot store, which it opens with
// snapshots.Open: a directory path, file:///PATH, mem://NAME or
// s3://BUCKET/PREFIX?endpoint=HOST:PORT. It also asks a running job how it
// is doing, through the HTTP API of package actors/web.
//
// Usage:
//
//	snapflow checkpoints list   --store URL [--job NAME]
//	snapflow checkpoints show   --store URL [--job NAME] [--json] ID
//	snapflow checkpoints verify --store URL [--job NAME] ID
//	snapflow checkpoints delete --store URL [--job NAME] [--force] ID
//	snapflow savepoints list    --store URL [--job NAME]
//	snapflow savepoints show    --store URL [--job NAME] [--json] NAME
//	snapflow savepoints verify  --store URL [--job NAME] NAME
//	snapflow savepoints delete  --store URL [--job NAME] [--force] NAME
//	snapflow jobs status        --addr URL [--token TOKEN] [--json] [--limit N]
//	snapflow help
//
// Flags come before positional arguments; a flag after the ID or NAME is a
// usage error. --job may be left out when the store holds the checkpoints
// or savepoints of exactly one job (the jobs are the first path segments
// of the keys JOB/checkpoints/... and JOB/savepoints/...). ID is a number,
// chk-<number> as in the keys, or latest: the checkpoint a recovery would
// restore (the newest complete one whose objects all verify; newer ones
// that do not are passed over, and named). With latest, the command prints
// the id it stands for on standard error ("snapflow: latest is checkpoint
// 7 of job wc"), so that standard output keeps its format. NAME is a
// savepoint name, as snapshots.ValidateSavepointName accepts; another is a
// usage error.
//
// help, -h and --help print the usage and exit 0; after a subcommand, -h,
// -help or --help, wherever it stands, prints that subcommand's usage and
// exits 0.
//
// checkpoints list prints a header row, then one checkpoint per line in ascending id order,
// as "ID TIME TASKS STATE STORED STATUS NOTE": TIME is RFC 3339 in UTC,
// STATE sums the tasks' whole states (snapshots.StateSize) and STORED what
// the checkpoint wrote for them (snapshots.UploadedSize: an incremental
// state stores only the key groups that changed and references the others
// in earlier checkpoints' objects; an inline state travels in the
// manifest). STATUS is complete, incomplete (no manifest; TIME, STATE and
// STORED are "-" and TASKS counts the objects written so far), kept (no
// manifest, and every object is one that complete checkpoints reference:
// what deleting a checkpoint leaves while newer incremental checkpoints
// build on it) or corrupt (the manifest does not verify). NOTE names the
// checkpoints that a checkpoint references and those that reference it,
// and counts its inline states. show prints the manifest, the state and
// stored sizes, the key groups referenced in earlier checkpoints, and each
// task's state (key, state size, stored bytes or "inline", CRC-32C,
// references), with the operators, operator ids and key-group ranges when
// the manifest records them, or, with --json, the manifest as protojson.
// verify re-reads every task state of a checkpoint (its object or its
// inline bytes, and the sections of earlier objects it references) and
// checks sizes and CRC-32C checksums, printing "ok KEY ..." or "FAIL KEY
// ..." per state. delete deletes a checkpoint but keeps the objects that
// other complete checkpoints reference, saying which; it refuses, unless
// --force is given, the checkpoints that recovery needs: the newest
// complete one, and the newest usable one when no newer complete
// checkpoint verifies (recovery restores the newest checkpoint whose
// objects all verify), and the job's origin (the checkpoint it was
// started from) until it has a usable checkpoint of its own. delete
// latest is refused without --force like any newest complete checkpoint.
// A kept directory has nothing to delete: it goes once nothing references
// it.
//
// Both delete commands delete only under the job's lease: they take it,
// and refuse while a live holder (a running job) has it, naming the
// holder; a holder that is gone lets them take it at once (on this host)
// or after its TTL of silence. They release it when done. --force does not
// override the lease.
//
// savepoints list prints a header row, then one savepoint per line sorted by name, as
// "NAME ID TIME TASKS BYTES STATUS", where ID is the checkpoint id the
// savepoint was taken as and the rest is as for checkpoints list; a name
// that holds white space or starts with a quote is printed Go-quoted.
// savepoints show prints the job, name, checkpoint id, epoch, time, max
// parallelism, every operator (id, name, kind, parallelism, keyed, splits)
// and its state descriptors, and each task's state (task id, operator,
// operator id, subtask, key-group range [start,end), key, state size,
// stored bytes or "inline", CRC-32C), with "-" for what an older manifest
// does not record. verify works as for checkpoints. delete deletes a
// savepoint, complete or not (retention never deletes one, so it is the
// way to), and prints what it deleted; it refuses, unless --force is
// given, the job's origin (the savepoint it was started from or stopped
// with) until the job has a usable checkpoint of its own.
//
// jobs status asks the HTTP server of a running job (started by a job or a
// cluster coordinator with package actors/web, for example by an example's
// -http ADDR flag) for GET /api/v1/job and /api/v1/checkpoints?limit=N
// (--limit, default 10). --addr is http://HOST:PORT or https://..., or a
// bare HOST:PORT meaning http. It prints the job's name, state, epoch and
// uptime, its last completed checkpoint (id, savepoint name, age), the
// counts of completed, aborted and declined checkpoints, task failures and
// restores, one line per operator (kind, parallelism, records in and out,
// time without credit, queued batches), the workers in cluster mode, and
// one line per recent checkpoint, newest first, as "CHECKPOINT STATUS
// DURATION SIZE ALIGNMENT SAVEPOINT NOTE" (SIZE and ALIGNMENT are "-" unless
// the checkpoint completed; NOTE says why it was aborted or declined, or
// that it was the final one). --json prints both answers as one JSON object,
// {"job": ..., "checkpoints": [...]}, with the fields of package
// actors/monitor's JobStatus and Checkpoint. A server started with a token
// wants it: --token, or else the environment variable SNAPFLOW_TOKEN. An
// unreachable address, a refused or missing token and an error answer (the
// server's JSON error is printed) exit 1; an address that answers 404 exits
// 3. The whole command gives up after 30 seconds.
//
// Errors go to standard error, prefixed "snapflow: ". The exit codes are:
//
//	0  success, and help
//	1  the operation failed: verification found problems, the checkpoint
//	   or savepoint is incomplete, deletion was refused, or the store
//	   failed; for jobs status, the server could not be reached, wants a
//	   token or refused it, or answered an error
//	2  usage error: bad command, flags, arguments, store URL or --addr,
//	   or a store with several jobs and no --job
//	3  not found: no such checkpoint, savepoint, job or store directory,
//	   or no complete checkpoint for latest; for jobs status, --addr
//	   answers 404
package main
