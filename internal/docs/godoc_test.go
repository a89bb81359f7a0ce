package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// packageDirs returns the module's package directories (relative to root)
// that hold Go files other than tests, examples' and commands' excepted
// when public is set: the packages a user imports.
func packageDirs(t *testing.T, root string, public bool) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		base := d.Name()
		if rel != "." && (strings.HasPrefix(base, ".") || base == "testdata") {
			return filepath.SkipDir
		}
		if public && (base == "internal" || strings.HasPrefix(rel, "examples") || strings.HasPrefix(rel, "cmd") || strings.HasPrefix(rel, "bench")) {
			return filepath.SkipDir
		}
		if m, _ := filepath.Glob(filepath.Join(path, "*.go")); len(m) > 0 {
			dirs = append(dirs, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// parseDir parses the non-test Go files of dir.
func parseDir(t *testing.T, fset *token.FileSet, dir string) []*ast.File {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	var out []*ast.File
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, af)
	}
	return out
}

// undocumented returns the exported identifiers of files without a doc
// comment: a declaration's own, or its group's for a const, var or type
// group. Methods count when their receiver type is exported; generated
// protobuf files are skipped.
func undocumented(fset *token.FileSet, files []*ast.File) []string {
	var out []string
	miss := func(pos token.Pos, name string) {
		p := fset.Position(pos)
		out = append(out, filepathBase(p.Filename)+":"+itoa(p.Line)+": "+name)
	}
	for _, f := range files {
		if ast.IsGenerated(f) {
			continue
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || d.Doc != nil {
					continue
				}
				if d.Recv != nil {
					recv := receiverName(d.Recv.List[0].Type)
					if !ast.IsExported(recv) {
						continue
					}
					miss(d.Pos(), recv+"."+d.Name.Name)
					continue
				}
				miss(d.Pos(), d.Name.Name)
			case *ast.GenDecl:
				if d.Tok == token.IMPORT {
					continue
				}
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() && s.Doc == nil && d.Doc == nil {
							miss(s.Pos(), s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && s.Doc == nil && s.Comment == nil && d.Doc == nil {
								miss(n.Pos(), n.Name)
							}
						}
					}
				}
			}
		}
	}
	return out
}

func receiverName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverName(e.X)
	case *ast.IndexExpr:
		return receiverName(e.X)
	case *ast.IndexListExpr:
		return receiverName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

func filepathBase(p string) string { return filepath.Base(p) }

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// TestEveryExportedIdentifierHasADoc checks every package of the module,
// internal ones included: an exported identifier without a doc comment
// fails the test, named with its file and line.
func TestEveryExportedIdentifierHasADoc(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	n := 0
	for _, dir := range packageDirs(t, root, false) {
		files := parseDir(t, fset, filepath.Join(root, dir))
		for _, m := range undocumented(fset, files) {
			t.Errorf("%s/%s has no doc comment", dir, m)
			n++
		}
	}
	if n > 0 {
		t.Logf("%d exported identifiers without a doc comment", n)
	}
}

// TestPackageDocsPointToTheirPage checks that the package comment of every
// package a user imports names its page in docs/.
func TestPackageDocsPointToTheirPage(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	for _, dir := range packageDirs(t, root, true) {
		if dir == "." {
			continue
		}
		var doc string
		for _, f := range parseDir(t, fset, filepath.Join(root, dir)) {
			if f.Doc != nil {
				doc += f.Doc.Text()
			}
		}
		switch {
		case doc == "":
			t.Errorf("package %s has no package comment", dir)
		case !strings.Contains(doc, "docs/"):
			t.Errorf("the package comment of %s names no page of docs/", dir)
		}
	}
}
