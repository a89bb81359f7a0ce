package miniotest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// Bounds of waiting for a server to be live.
const (
	liveTimeout = 60 * time.Second
	livePoll    = 50 * time.Millisecond
	liveRequest = 2 * time.Second
)

// statusHeader is "offline" in health answers while MinIO's object layer
// is not initialised: /minio/health/live already answers 200 then, but S3
// requests get 503 XMinioServerNotInitialized.
const statusHeader = "X-Minio-Server-Status"

// waitLive polls GET /minio/health/live until it answers 200 without
// statusHeader offline, the process exits (done closes) or liveTimeout
// passes.
func (s *Server) waitLive(done <-chan struct{}) error {
	tr, err := s.transport()
	if err != nil {
		return err
	}
	tr.DisableKeepAlives = true
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	url := s.scheme() + "://" + s.addr + "/minio/health/live"
	deadline := time.NewTimer(liveTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(livePoll)
	defer tick.Stop()
	var last error
	for {
		if last = live(client, url); last == nil {
			return nil
		}
		select {
		case <-done:
			return errors.New("the server exited")
		case <-deadline.C:
			return fmt.Errorf("not live after %v: %w", liveTimeout, last)
		case <-tick.C:
		}
	}
}

func live(client *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), liveRequest)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, rerr := io.Copy(io.Discard, resp.Body)
	if err := errors.Join(rerr, resp.Body.Close()); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if st := resp.Header.Get(statusHeader); st == "offline" {
		return fmt.Errorf("GET %s: %s: %s (not initialised yet)", url, statusHeader, st)
	}
	return nil
}

func (s *Server) scheme() string {
	if s.caFile != "" {
		return "https"
	}
	return "http"
}

// transport returns an HTTP transport that trusts the server.
func (s *Server) transport() (*http.Transport, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	if s.caFile == "" {
		return tr, nil
	}
	pem, err := os.ReadFile(s.caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no certificate", s.caFile)
	}
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return tr, nil
}
