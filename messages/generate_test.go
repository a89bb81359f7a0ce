package messages

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedCodeIsCurrent regenerates snapflow.pb.go with protoc and the
// protoc-gen-go pinned in go.mod, and compares it with the committed file.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		t.Skip("protoc is not installed (apt-get install protobuf-compiler); the committed code is not checked")
	}
	plugin, err := exec.Command("go", "tool", "-n", "protoc-gen-go").Output()
	if err != nil {
		t.Fatalf("locate protoc-gen-go: %v", err)
	}
	out := t.TempDir()
	cmd := exec.Command(protoc, "--plugin=protoc-gen-go="+strings.TrimSpace(string(plugin)),
		"--go_out="+out, "--go_opt=paths=source_relative", "messages/snapflow.proto")
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, b)
	}
	want, err := os.ReadFile(filepath.Join(out, "messages", "snapflow.pb.go"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("snapflow.pb.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("messages/snapflow.pb.go is out of date: run make proto")
	}
}
