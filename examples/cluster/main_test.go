package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/snapflow/snapflow/internal/leaktest"
	"github.com/snapflow/snapflow/internal/racedetect"
)

// exe is this example built once for the process tests: every
// coordinator, worker and demo they start is a process of it.
var exe string

// TestMain builds the binary, with the race detector when the tests run
// with it: the cluster is tested under the race detector as separate
// processes (several nodes in one process trip races inside protoactor-go's
// remote package, see internal/racedetect), and the tests' pacing keeps the
// slower race build's runs about as long as the others.
func TestMain(m *testing.M) {
	// Every node the tests start, and every bare node they forge messages
	// from, inherits the cluster's secret.
	os.Setenv(envSecret, newSecret())
	dir, err := os.MkdirTemp("", "snapflow-cluster-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster tests:", err)
		os.Exit(1)
	}
	exe = filepath.Join(dir, "cluster")
	args := []string{"build", "-o", exe}
	if racedetect.Enabled {
		args = append(args, "-race")
	}
	cmd := exec.Command(goTool(), append(args, ".")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "cluster tests: go", args, ":", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		code := m.Run()
		if code == 0 {
			if err := leaktest.Find(); err != nil {
				fmt.Fprintln(os.Stderr, "leaktest: goroutines left after a successful run:", err)
				code = 1
			}
		}
		return code
	}()
	os.Exit(code)
}

// goTool is the go command that runs the tests: go test puts its GOROOT's
// bin first on the PATH of test binaries.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}
