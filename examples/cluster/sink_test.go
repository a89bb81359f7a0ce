package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sinkLines returns the sink's lines of a run of p that saw the records
// in index order: a key's running sums.
func sinkLines(p jobParams) []string {
	sums := map[int64]int64{}
	var lines []string
	for i := range p.records {
		k := i % p.keys
		sums[k] += i + 1
		lines = append(lines, formatTotal(total{Key: k, Sum: sums[k]}))
	}
	return lines
}

// writeParts writes parts as the committed part files of dir, and an
// in-progress file that checkSink must ignore.
func writeParts(t *testing.T, parts ...[]string) string {
	t.Helper()
	dir := t.TempDir()
	for i, p := range parts {
		name := filepath.Join(dir, "part-00000-000000000"+string(rune('0'+i)))
		if err := os.WriteFile(name, []byte(strings.Join(p, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".part-00000-0000000009.e3.inprogress"), []byte("not a line\n0 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCheckSink: checkSink accepts every record's line once, in any part
// files and with any order of a key's records, and reports a line
// committed twice, a line missing, a key's sums that no order of its
// records gives, a key out of range and a malformed line.
func TestCheckSink(t *testing.T) {
	p := jobParams{records: 100, keys: 7}
	lines := sinkLines(p)
	if res, err := checkSink(writeParts(t, lines[:40], lines[40:]), p); err != nil || res.parts != 2 || res.records != 100 {
		t.Errorf("exact output: %+v, %v; want 2 parts, 100 records, no error", res, err)
	}
	// Key 0's first two records, values 1 and 8, arriving the other way
	// round: sums 8, 9 instead of 1, 9.
	swapped := append([]string(nil), lines...)
	if swapped[0] != "0 1" || swapped[7] != "0 9" {
		t.Fatalf("lines %q, %q: want key 0's first two sums, 1 and 9", swapped[0], swapped[7])
	}
	swapped[0] = "0 8"
	if _, err := checkSink(writeParts(t, swapped), p); err != nil {
		t.Errorf("another order of key 0's records: %v", err)
	}

	for _, tc := range []struct {
		name  string
		parts [][]string
		want  string
	}{
		{"twice", [][]string{lines, lines[50:51]}, "committed twice"},
		{"missing", [][]string{append(append([]string(nil), lines[:50]...), lines[51:]...)}, "want one per record"},
		{"wrong sum", [][]string{append([]string{"0 2"}, lines[1:]...)}, "step by"},
		{"unknown key", [][]string{append(append([]string(nil), lines...), "7 8")}, "not one of the 7 keys"},
		{"malformed", [][]string{append(append([]string(nil), lines...), "x")}, "is not \"key sum\""},
	} {
		_, err := checkSink(writeParts(t, tc.parts...), p)
		if err == nil || !errors.Is(err, errResult) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error wrapping errResult that says %q", tc.name, err, tc.want)
		}
	}
}
