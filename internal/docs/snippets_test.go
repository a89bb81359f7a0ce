package docs

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// importPaths are the packages a snippet may name, by the name it uses.
var importPaths = map[string]string{
	"actors":     "github.com/snapflow/snapflow/actors",
	"actorstest": "github.com/snapflow/snapflow/actors/actorstest",
	"binary":     "encoding/binary",
	"cluster":    "github.com/snapflow/snapflow/actors/cluster",
	"context":    "context",
	"errors":     "errors",
	"filesink":   "github.com/snapflow/snapflow/topology/filesink",
	"fmt":        "fmt",
	"http":       "net/http",
	"io":         "io",
	"kafka":      "github.com/snapflow/snapflow/topology/kafka",
	"log":        "log",
	"messages":   "github.com/snapflow/snapflow/messages",
	"monitor":    "github.com/snapflow/snapflow/actors/monitor",
	"os":         "os",
	"prometheus": "github.com/prometheus/client_golang/prometheus",
	"restart":    "github.com/snapflow/snapflow/actors/restart",
	"slog":       "log/slog",
	"snapshots":  "github.com/snapflow/snapflow/snapshots",
	"slices":     "slices",
	"strconv":    "strconv",
	"strings":    "strings",
	"sync":       "sync",
	"time":       "time",
	"topology":   "github.com/snapflow/snapflow/topology",
	"web":        "github.com/snapflow/snapflow/actors/web",
	"window":     "github.com/snapflow/snapflow/topology/window",
}

// snippet is one ```go block of a page.
type snippet struct {
	page string // relative to the module root
	line int    // of the block's first code line
	code string
	// given is the parameter list of a body snippet's function besides
	// ctx: the names a sketch assumes, declared by a comment on the line
	// before its block, <!-- given: g *topology.Graph, store snapshots.Store -->.
	given string
}

var (
	fence = regexp.MustCompile("^```(\\S*)\\s*$")
	given = regexp.MustCompile(`^<!-- given: (.*) -->$`)
)

// snippets returns the ```go blocks of the page at path.
func snippets(root, page string) ([]snippet, error) {
	b, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		return nil, err
	}
	var out []snippet
	var cur *snippet
	var code strings.Builder
	prev := ""
	for i, l := range strings.Split(string(b), "\n") {
		m := fence.FindStringSubmatch(strings.TrimSpace(l))
		switch {
		case cur == nil && m != nil && m[1] == "go":
			cur = &snippet{page: page, line: i + 2}
			if g := given.FindStringSubmatch(strings.TrimSpace(prev)); g != nil {
				cur.given = g[1]
			}
			code.Reset()
		case cur != nil && m != nil && m[1] == "":
			cur.code = code.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			code.WriteString(l)
			code.WriteByte('\n')
		}
		prev = l
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: a go block that never ends", page, cur.line-1)
	}
	return out, nil
}

var (
	qualified = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.[A-Za-z_]`)
	topLevel  = regexp.MustCompile(`^(func|type|var|const)\b`)
)

// source returns the Go file that holds s.
func (s snippet) source(root string) string {
	if strings.HasPrefix(firstCodeLine(s.code), "package ") {
		return s.code
	}
	var names []string
	for _, m := range qualified.FindAllStringSubmatch(s.given+"\n"+s.code, -1) {
		if _, ok := importPaths[m[1]]; ok && !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	body := !topLevel.MatchString(firstCodeLine(s.code))
	if body && !slices.Contains(names, "context") {
		names = append(names, "context")
	}
	slices.Sort(names)
	var b strings.Builder
	fmt.Fprintf(&b, "// Code extracted from %s:%d by TestSnippetsCompile. DO NOT EDIT.\n\npackage snippet\n\nimport (\n", s.page, s.line)
	for _, n := range names {
		fmt.Fprintf(&b, "\t%s %q\n", n, importPaths[n])
	}
	b.WriteString(")\n\n")
	if body {
		params := "ctx context.Context"
		if s.given != "" {
			params += ", " + s.given
		}
		fmt.Fprintf(&b, "func _(%s) error {\n//line %s:%d\n%s}\n", params, filepath.Join(root, s.page), s.line, s.code)
	} else {
		fmt.Fprintf(&b, "//line %s:%d\n%s", filepath.Join(root, s.page), s.line, s.code)
	}
	return b.String()
}

// firstCodeLine is the first line of code that is neither blank nor a
// comment.
func firstCodeLine(code string) string {
	for l := range strings.Lines(code) {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "//") {
			return l
		}
	}
	return ""
}

// moduleRoot is the directory of go.mod, two levels up.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	return root
}

// TestSnippetsCompile compiles every Go snippet of README.md and docs/*.md,
// each as a package of its own inside the module, with go vet.
func TestSnippetsCompile(t *testing.T) {
	root := moduleRoot(t)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"))
	var all []snippet
	for _, p := range pages {
		rel, _ := filepath.Rel(root, p)
		s, err := snippets(root, rel)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, s...)
	}
	if len(all) < 5 {
		t.Fatalf("found %d Go snippets in the docs; the pages have more", len(all))
	}
	// Inside the module, so that its packages and go.sum resolve; under
	// testdata, so that ./... never builds it.
	if err := os.MkdirAll(filepath.Join(root, "internal", "docs", "testdata"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(filepath.Join(root, "internal", "docs", "testdata"), "snippets-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var pkgs []string
	for i, s := range all {
		pkg := filepath.Join(dir, fmt.Sprintf("s%03d", i))
		if err := os.Mkdir(pkg, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, "snippet.go"), []byte(s.source(root)), 0o644); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, pkg)
	}
	cmd := exec.Command("go", append([]string{"vet"}, pkgs...)...)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("go vet of the %d snippets of the docs: %v\n%s", len(all), err, out.String())
	}
	t.Logf("%d snippets of %d pages compile", len(all), len(pages))
}
