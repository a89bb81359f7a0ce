package docs

import (
	"go/ast"
	"go/token"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// members returns the exported fields of struct type name, or the methods
// of interface type name, declared in files; ok is false when files do not
// declare name.
func members(files []*ast.File, name string) (names []string, ok bool) {
	for _, f := range files {
		for _, d := range f.Decls {
			gd, isGen := d.(*ast.GenDecl)
			if !isGen || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				if ts.Name.Name != name {
					continue
				}
				var fields *ast.FieldList
				switch t := ts.Type.(type) {
				case *ast.StructType:
					fields = t.Fields
				case *ast.InterfaceType:
					fields = t.Methods
				default:
					return nil, true
				}
				for _, fl := range fields.List {
					for _, n := range fl.Names {
						if n.IsExported() {
							names = append(names, n.Name)
						}
					}
				}
				return names, true
			}
		}
	}
	return nil, false
}

// aliasTarget returns the import path and type name an alias refers to
// (q.Name or q.Name[...]), or "" when it is not of an imported type.
func aliasTarget(f *ast.File, e ast.Expr) (string, string) {
	switch x := e.(type) {
	case *ast.IndexExpr:
		e = x.X
	case *ast.IndexListExpr:
		e = x.X
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return "", ""
	}
	q, ok := sel.X.(*ast.Ident)
	if !ok {
		return "", ""
	}
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		if (im.Name != nil && im.Name.Name == q.Name) || (im.Name == nil && path.Base(p) == q.Name) {
			return p, sel.Sel.Name
		}
	}
	return "", ""
}

// TestAliasesNameTheirMembers: go doc shows an alias of an internal type
// without its fields or methods, so users would read internal/ (go doc
// ./topology WatermarkStrategy showed no field): the doc comment of every
// alias of an internal struct lists each of its exported fields, and of an
// internal interface each of its methods, one list item each ("  - Name
// type: what it is") or one line of a code block (a method's signature).
func TestAliasesNameTheirMembers(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	internal := map[string][]*ast.File{}             // parsed internal packages, by import path
	for _, dir := range packageDirs(t, root, true) { // the packages a user imports
		for _, f := range parseDir(t, fset, filepath.Join(root, dir)) {
			for _, a := range aliases(f) {
				p, name := aliasTarget(f, a.Type)
				if !strings.HasPrefix(p, module) || !strings.Contains(p, "/internal/") {
					continue
				}
				if _, ok := internal[p]; !ok {
					internal[p] = parseDir(t, fset, filepath.Join(root, strings.TrimPrefix(p, module)))
				}
				names, ok := members(internal[p], name)
				if !ok {
					t.Errorf("%s: alias %s: %s.%s not found", fset.Position(a.Pos()), a.Name.Name, p, name)
				} else if missing := unlisted(a.doc, names); len(missing) > 0 {
					t.Errorf("%s: the doc of alias %s does not list %s", fset.Position(a.Pos()), a.Name.Name, strings.Join(missing, ", "))
				}
			}
		}
	}
}

// module is the prefix of the module's import paths.
const module = "github.com/snapflow/snapflow/"

// alias is an exported type alias with its doc comment.
type alias struct {
	*ast.TypeSpec
	doc string
}

// aliases returns the exported type aliases f declares.
func aliases(f *ast.File) []alias {
	var out []alias
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, s := range gd.Specs {
			ts := s.(*ast.TypeSpec)
			if !ts.Assign.IsValid() || !ts.Name.IsExported() {
				continue
			}
			doc := ts.Doc.Text()
			if ts.Doc == nil && len(gd.Specs) == 1 {
				doc = gd.Doc.Text()
			}
			out = append(out, alias{ts, doc})
		}
	}
	return out
}

// unlisted returns the names that doc lists neither as a list item nor as
// a line of a code block, sorted.
func unlisted(doc string, names []string) []string {
	var missing []string
	for _, n := range names {
		if !regexp.MustCompile(`(?m)^(\t| *- )` + n + `\b`).MatchString(doc) {
			missing = append(missing, n)
		}
	}
	slices.Sort(missing)
	return missing
}
