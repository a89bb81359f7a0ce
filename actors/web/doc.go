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
//	GET  /                            the dashboard (one page, embedded)
//	GET  /metrics                     Prometheus metrics of Config.Gatherer
//	GET  /api/v1/job                  monitor.JobStatus
//	GET  /api/v1/checkpoints?limit=N  CheckpointsResponse, newest first (no limit: every one kept)
//	GET  /api/v1/checkpoints/{id}     monitor.Checkpoint
//	GET  /api/v1/timeline?limit=N     TimelineResponse, newest first
//	GET  /api/v1/events               server-sent events: "data: <monitor.Update>"
//	POST /api/v1/checkpoints          trigger a checkpoint (empty body or {}): TriggerResponse once complete
//	POST /api/v1/savepoints           SavepointRequest: SavepointResponse once complete
//
// GET routes also answer HEAD. The event stream starts with the comment
// ": subscribed" (updates from then on reach the client) and sends a
// keep-alive comment every 15 s; a client that falls behind loses updates
// (see monitor.Monitor.Subscribe) and should reload the others.
//
// Errors are ErrorResponse, {"error": "..."}: 400 for a bad query or body
// (unknown fields included), 401 for a missing or wrong token, 403 for a
// control request to a read-only server or from a page of another origin,
// 404 for an unknown route or checkpoint, 405 for a wrong method (with
// Allow), 409 when the job cannot take the request (it ended; the
// savepoint exists), 413 for a body over 64 KiB, 415 for a body that is
// not JSON, 503 when a requested checkpoint failed or did not complete
// within Config.RequestTimeout (the job goes on), 500 only for a fault of
// the server itself, such as a panic in a handler. No request can stop or
// crash the job, except a savepoint with "stop": true.
//
// # Dashboard
//
// The page at / is dashboard/index.html with its style sheet and script
// inlined (embedded with embed; no library, no CDN: the charts are
// hand-written SVG). Its Content-Security-Policy allows those two by hash
// and requests to its own origin only. It shows the job's state and
// totals, the topology as a graph (operators with their parallelism and
// rates, coloured by the share of time their tasks spent without credit),
// a table of the tasks, charts of checkpoint duration, size and alignment
// over time, the recent checkpoints (a row expands to the per-task
// figures), a timeline of failures and restores, and buttons to trigger a
// checkpoint or take a savepoint. It follows /api/v1/events, and polls
// when the stream is unavailable.
//
// # Authentication
//
// With Config.Token set, every route needs "Authorization: Bearer TOKEN".
// A browser cannot send that header when it opens a page or an
// EventSource, so the dashboard (GET /) and the event stream
// (GET /api/v1/events) also take the token as "?token=TOKEN"; the page
// keeps it and sends it as a header on its API calls. Tokens are compared
// in constant time.
//
// The guide is docs/monitoring.md in the repository.
package web
