package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// TestSessions runs the example as a user would: one injected failure, a
// restore, and sessions and late clicks committed exactly once.
func TestSessions(t *testing.T) {
	var out strings.Builder
	if err := run([]string{"-users", "200", "-sessions", "20", "-out", t.TempDir()}, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, re := range []string{
		`task sessionize#0 failed: .*injected failure`,
		`(?m)^restoring checkpoint \d+$`,
		`1 failure injected, 1 restore\(s\)`,
		`(?m)^sessions committed: 4000 \(want 4000\); late clicks: \d+ to the side output`,
		`(?m)^exactly-once: OK$`,
	} {
		if !regexp.MustCompile(re).MatchString(s) {
			t.Errorf("output lacks %s:\n%s", re, s)
		}
	}
}

func TestSessionsRefusesBadFlags(t *testing.T) {
	var out strings.Builder
	if err := run([]string{"-users", "0"}, &out); err == nil || !strings.Contains(err.Error(), "-users 0") {
		t.Fatalf("run -users 0 = %v", err)
	}
}
