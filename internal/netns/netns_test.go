package netns_test

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/netns"
)

// need skips the test when namespaces cannot be created, and fails it
// under CI, where they must be.
func need(t *testing.T) {
	t.Helper()
	if err := netns.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: %v", err)
		}
		t.Skip(err)
	}
}

// dial tries a TCP connection from node i of n to addr, inside the node's
// namespace, by running this test binary there.
func dial(t *testing.T, n *netns.Net, i int, addr string) error {
	t.Helper()
	exe, args := n.Command(i, os.Args[0], "-test.run=^TestDialHelper$")
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "NETNS_DIAL="+addr)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return &dialError{string(out)}
	}
	return nil
}

type dialError struct{ out string }

func (e *dialError) Error() string { return e.out }

// TestDialHelper is run by dial inside a namespace.
func TestDialHelper(t *testing.T) {
	addr := os.Getenv("NETNS_DIAL")
	if addr == "" {
		t.Skip("a helper of dial")
	}
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestCutAndHeal(t *testing.T) {
	need(t)
	n, err := netns.New(2)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	// A listener in node 1's namespace: run as a child in it.
	exe, args := n.Command(1, os.Args[0], "-test.run=^TestListenHelper$")
	srv := exec.Command(exe, args...)
	srv.Env = append(os.Environ(), "NETNS_LISTEN="+n.Node(1).IP+":7001")
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	buf := make([]byte, 64)
	if k, err := out.Read(buf); err != nil || !strings.Contains(string(buf[:k]), "listening") {
		t.Fatalf("the listener: %q, %v", buf[:k], err)
	}
	addr := n.Node(1).IP + ":7001"
	if err := dial(t, n, 0, addr); err != nil {
		t.Fatalf("before the cut: %v", err)
	}
	if err := n.Cut(0, 1); err != nil {
		t.Fatal(err)
	}
	if err := dial(t, n, 0, addr); err == nil {
		t.Fatal("dialled across the cut")
	}
	if err := n.Heal(0, 1); err != nil {
		t.Fatal(err)
	}
	if err := dial(t, n, 0, addr); err != nil {
		t.Fatalf("after healing: %v", err)
	}
	if err := n.Isolate(1, true); err != nil {
		t.Fatal(err)
	}
	if err := dial(t, n, 0, addr); err == nil {
		t.Fatal("dialled an isolated node")
	}
}

// TestListenHelper is the listener of TestCutAndHeal, run in a namespace.
func TestListenHelper(t *testing.T) {
	addr := os.Getenv("NETNS_LISTEN")
	if addr == "" {
		t.Skip("a helper of TestCutAndHeal")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("listening\n")
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}
