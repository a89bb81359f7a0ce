// Package serve wires snapflow's optional monitoring HTTP server into the
// example programs behind their -http flag: a Prometheus registry of its
// own (never the global one), an actors/monitor Monitor fed by the job's
// events, and an actors/web server for the dashboard, /metrics and the
// JSON API.
//
// A program starts it before its job and attaches every job it starts, so
// that one server and one history span a program that stops and starts
// its job again (a restart, a rescale):
//
//	srv, err := serve.Start(ctx, addr, stdout, logger) // addr "": srv is nil, and does nothing
//	...
//	defer srv.Close()
//	job, err := actors.Start(ctx, g, append(srv.Options(), actors.WithStore(store))...)
//	...
//	srv.Attach(job)
//
// Start prints the dashboard's URL, "dashboard: http://127.0.0.1:8080/".
// With SNAPFLOW_TOKEN set in the environment the server requires it as a
// bearer token (the same variable that snapflow jobs status reads), so
// that an address other than loopback is not left open.
package serve
