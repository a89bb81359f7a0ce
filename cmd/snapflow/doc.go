// Command snapflow inspects and manages the checkpoints that snapflow jobs
// keep in a snapshot store, which it opens with snapshots.Open: a directory
// path, file:///PATH, mem://NAME or s3://BUCKET/PREFIX?endpoint=HOST:PORT.
//
// Usage:
//
//	snapflow checkpoints list   --store URL [--job NAME]
//	snapflow checkpoints show   --store URL [--job NAME] [--json] ID
//	snapflow checkpoints verify --store URL [--job NAME] ID
//	snapflow checkpoints delete --store URL [--job NAME] [--force] ID
//	snapflow help
//
// Flags come before positional arguments; a flag after the ID is a usage
// error. --job may be left out when the store holds the checkpoints of
// exactly one job (the jobs are the first path segments of the keys
// JOB/checkpoints/...). ID is a number, or chk-<number> as in the keys.
//
// list prints one checkpoint per line in ascending id order, as
// "ID TIME TASKS BYTES STATUS": TIME is RFC 3339 in UTC and STATUS is
// complete, incomplete (no manifest; TIME and BYTES are "-" and TASKS
// counts the objects written so far) or corrupt (the manifest does not
// verify). show prints the manifest and the state object of each task, or,
// with --json, the manifest as protojson. verify re-reads every object of a
// checkpoint and checks sizes and CRC-32C checksums, printing "ok KEY ..."
// or "FAIL KEY ..." per object. delete refuses the newest complete
// checkpoint, the one recovery would restore, unless --force is given.
//
// Errors go to standard error, prefixed "snapflow: ". The exit codes are:
//
//	0  success
//	1  the operation failed: verification found problems, the checkpoint
//	   is incomplete, deletion was refused, or the store failed
//	2  usage error: bad command, flags, arguments or store URL, or a
//	   store with several jobs and no --job
//	3  not found: no such checkpoint, job or store directory
package main
