package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMonitoringSweepSmoke: -sweep monitoring runs each row with and
// without the server, and a monitored row reports its ratio to the
// unmonitored one; the watchers must have polled the server (or the row
// fails).
func TestMonitoringSweepSmoke(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "rows.json")
	var out, stderr bytes.Buffer
	err := run(context.Background(), []string{"-sweep", "monitoring", "-records", "20000", "-repeat", "1", "-json", jsonPath}, &out, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4 (off and 100ms, with and without monitoring)", len(rows))
	}
	monitored := 0
	for _, r := range rows {
		if r["records"].(float64) < 20000 {
			t.Errorf("row %v: %v records", r["interval"], r["records"])
		}
		ratio, hasRatio := r["ratio_to_unmonitored"].(float64)
		if m, _ := r["monitored"].(bool); m {
			monitored++
			if !hasRatio || ratio <= 0 {
				t.Errorf("monitored row %v: ratio_to_unmonitored %v", r["interval"], r["ratio_to_unmonitored"])
			}
		} else if hasRatio {
			t.Errorf("unmonitored row %v has ratio_to_unmonitored %v", r["interval"], ratio)
		}
	}
	if monitored != 2 {
		t.Errorf("%d monitored rows, want 2", monitored)
	}
	if !strings.Contains(out.String(), "abs+mon") || !strings.Contains(out.String(), "% of unmonitored") {
		t.Errorf("table:\n%s", out.String())
	}
}
