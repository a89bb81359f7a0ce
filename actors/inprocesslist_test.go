package actors_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestInProcessClusterTestsListed checks that every test that skips under
// the race detector through inProcessCluster is listed in the Makefile's
// IN_PROCESS_CLUSTER_TESTS, which `make test` runs without it: a test
// missing there would run in no CI run at all.
func TestInProcessClusterTestsListed(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var calling []string
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "inProcessCluster" {
						calling = append(calling, fn.Name.Name)
						return false
					}
				}
				return true
			})
		}
	}
	if len(calling) == 0 {
		t.Fatal("no test calls inProcessCluster: the parse found nothing")
	}
	mk, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^IN_PROCESS_CLUSTER_TESTS := (.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile has no IN_PROCESS_CLUSTER_TESTS")
	}
	listed := strings.Split(strings.TrimSpace(string(m[1])), "|")
	for _, name := range calling {
		if !slices.Contains(listed, name) {
			t.Errorf("%s skips under -race (inProcessCluster) but is not in the Makefile's IN_PROCESS_CLUSTER_TESTS", name)
		}
	}
}
