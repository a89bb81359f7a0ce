// Package web is snapflow's optional HTTP server for a running job: the
// Prometheus metrics, a versioned JSON API and a live dashboard, all on one
// listener that binds to loopback unless told otherwise.
//
// Start serves a monitor.Monitor (what the job did: its plan, counters,
// checkpoint history and timeline) and, when given one, a Controller (what
// a client may ask of the job: a checkpoint or a savepoint). The server
// uses its own http.ServeMux; it never touches http.DefaultServeMux or the
// global Prometheus registry.
//
// # Routes
//
//	GET  /                          the dashboard (one page, embedded)
//	GET  /metrics                   Prometheus metrics of Config.Gatherer
//	GET  /api/v1/job                monitor.JobStatus
//	GET  /api/v1/checkpoints?limit=N  {"checkpoints": [monitor.Checkpoint...]}, newest first
//	GET  /api/v1/checkpoints/{id}   monitor.Checkpoint
//	GET  /api/v1/timeline?limit=N   {"timeline": [monitor.TimelineEntry...]}, newest first
//	GET  /api/v1/events             server-sent events, one monitor.Update per "data:" line
//	POST /api/v1/checkpoints        trigger a checkpoint: {"id": N} once it is complete
//	POST /api/v1/savepoints         {"name": "...", "stop": false}: {"id": N, "name": "...", "stopped": false}
//
// Errors are JSON objects {"error": "..."}: 400 for a bad query or body,
// 401 for a missing or wrong token, 403 for a control request to a
// read-only server or from another origin, 404 for an unknown route or
// checkpoint, 405 for a wrong method (with Allow), 409 when the job cannot
// take the request (it ended; the savepoint exists), 413 for a body over
// 64 KiB, 503 when a requested checkpoint failed or timed out (the job goes
// on), 500 only for a fault of the server itself. No request can stop or
// crash the job, except a savepoint with "stop": true.
//
// # Authentication
//
// With Config.Token set, every route needs "Authorization: Bearer TOKEN".
// A browser cannot send that header when it opens a page or an
// EventSource, so the dashboard (GET /) and the event stream
// (GET /api/v1/events) also take the token as "?token=TOKEN"; the page
// keeps it and sends it as a header on its API calls. Tokens are compared
// in constant time.
package web
