package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// benchRows runs the bench program with args and returns its JSON rows and
// table.
func benchRows(t *testing.T, args ...string) ([]map[string]any, string) {
	t.Helper()
	jsonPath := filepath.Join(t.TempDir(), "rows.json")
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), append(args, "-json", jsonPath), &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	return rows, stdout.String()
}
