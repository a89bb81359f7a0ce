// Package dashboard serves one program's jobs: their Prometheus metrics,
// the JSON API and the dashboard of packages actors/monitor and actors/web
// on one listener, with a registry of its own (never the global one).
//
// A program starts it before its job and attaches every job it starts, so
// that one server and one history span a program that stops and starts
// its job again (a restart, a rescale):
//
//	srv, err := dashboard.Start(ctx, dashboard.Config{Addr: "127.0.0.1:8080", Token: os.Getenv(dashboard.TokenEnv)})
//	if err != nil {
//		return err
//	}
//	defer srv.Close()
//	fmt.Println(srv.Banner()) // dashboard: http://127.0.0.1:8080/
//	job, err := actors.Start(ctx, g, append(srv.Options(), actors.WithStore(store))...)
//	if err != nil {
//		return err
//	}
//	srv.Attach(job)
//
// For a finer setup (several jobs on one server, a registry shared with the
// program's own metrics), use actors/monitor and actors/web directly: the
// package is a few lines over them.
//
// The guide is docs/operations.md and docs/monitoring.md in the repository.
package dashboard
