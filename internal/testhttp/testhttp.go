// Package testhttp holds the HTTP helpers the tests of the examples share
// to read a job's monitoring server: a GET that wants a 200 answer, and the
// same decoding its JSON.
package testhttp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// Get GETs url and returns the body of a 200 answer; any other status is
// an error that carries the body.
func Get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return body, nil
}

// GetJSON GETs url and decodes its 200 answer into v.
func GetJSON(ctx context.Context, url string, v any) error {
	body, err := Get(ctx, url)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %w: %s", url, err, body)
	}
	return nil
}
