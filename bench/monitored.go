package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/dashboard"
)

// watchInterval is how often the watchers of a monitored row scrape
// /metrics and poll the API, as Prometheus and an open dashboard would.
const watchInterval = time.Second

// monitoring is a monitored row's server and its watchers: a Prometheus
// scraper, a dashboard's polls of the API, and a dashboard's event stream.
type monitoring struct {
	srv    *dashboard.Server
	cancel context.CancelFunc
	done   sync.WaitGroup
	mu     sync.Mutex
	err    error // the watchers' first error
	polls  int   // successful scrapes and polls
	events int   // server-sent events read
}

// startMonitoring starts the server of a monitored row on a free loopback
// port; its Options go to actors.Start, then Attach and watch.
func startMonitoring(ctx context.Context) (*monitoring, error) {
	srv, err := dashboard.Start(ctx, dashboard.Config{Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	return &monitoring{srv: srv}, nil
}

// watch attaches job, polls every route once, and starts the watchers.
func (m *monitoring) watch(job *actors.Job) {
	m.srv.Attach(job)
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	base := m.srv.URL()
	poll := func() bool {
		for _, path := range []string{"/metrics", "/api/v1/job", "/api/v1/checkpoints?limit=20", "/api/v1/timeline?limit=20"} {
			if err := get(ctx, base+path); err != nil {
				m.fail(err)
				return false
			}
			m.mu.Lock()
			m.polls++
			m.mu.Unlock()
		}
		return true
	}
	if !poll() {
		return
	}
	m.done.Go(func() {
		t := time.NewTicker(watchInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if !poll() {
				return
			}
		}
	})
	m.done.Go(func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/events", nil)
		if err != nil {
			m.fail(err)
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			if ctx.Err() == nil { // not the row ending before the stream opened
				m.fail(err)
			}
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			if len(sc.Bytes()) > 5 && string(sc.Bytes()[:5]) == "data:" {
				m.mu.Lock()
				m.events++
				m.mu.Unlock()
			}
		}
	})
}

func get(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil && ctx.Err() == nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("bench: GET %s: %s", url, resp.Status)
	}
	return nil
}

func (m *monitoring) fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil {
		m.err = err
	}
}

// stop ends the watchers and the server, and returns an error when a
// watcher failed or none ever polled.
func (m *monitoring) stop() error {
	if m.cancel != nil {
		m.cancel()
	}
	cerr := m.srv.Close()
	m.done.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.err != nil:
		return fmt.Errorf("bench: monitored row: %w", m.err)
	case cerr != nil:
		return fmt.Errorf("bench: monitored row: %w", cerr)
	case m.polls == 0:
		return fmt.Errorf("bench: monitored row: the server was never polled")
	}
	return nil
}
