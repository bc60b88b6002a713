package umbra_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The public surface's budget: what the module's importable packages (all
// but internal/ ones, commands and tests) export. Identifiers are exported
// funcs, methods (an exported type's, an exported interface's included),
// types, consts and vars; fields are the exported fields of exported
// struct types (and of struct types nested in them). Every name here is
// one a user must read past.
//
// The budget is a ratchet: today's count, so that the surface cannot grow
// unnoticed; lower it whenever names leave. The target (issue 32) is 260
// identifiers and 380 with fields; raise the ratchet only with a reason a
// user would accept.
const (
	maxIdentifiers          = 260
	maxIdentifiersAndFields = 401

	targetIdentifiers          = 260
	targetIdentifiersAndFields = 380
)

// surface is one package's count.
type surface struct {
	funcs, methods, types, consts, vars, fields int
}

func (s surface) identifiers() int { return s.funcs + s.methods + s.types + s.consts + s.vars }

// TestPublicSurface counts the exported identifiers of every non-internal
// package with go/ast and fails when the budget is exceeded. Its log is
// the per-package table (go test -v -run TestPublicSurface .).
func TestPublicSurface(t *testing.T) {
	counts, err := countSurface(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) < 5 {
		t.Fatalf("counted %d packages; the walk from the module root missed some: %v", len(counts), counts)
	}
	var pkgs []string
	for p := range counts {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	ids, all := 0, 0
	for _, p := range pkgs {
		c := counts[p]
		t.Logf("%-16s %3d identifiers (%d funcs, %d methods, %d types, %d consts, %d vars) + %3d fields = %3d",
			p, c.identifiers(), c.funcs, c.methods, c.types, c.consts, c.vars, c.fields, c.identifiers()+c.fields)
		ids += c.identifiers()
		all += c.identifiers() + c.fields
	}
	t.Logf("total            %3d identifiers, %3d with fields (budget %d, %d; target %d, %d)",
		ids, all, maxIdentifiers, maxIdentifiersAndFields, targetIdentifiers, targetIdentifiersAndFields)
	if ids > maxIdentifiers {
		t.Errorf("the public packages export %d identifiers, over the budget of %d: move what users do not need under internal/", ids, maxIdentifiers)
	}
	if all > maxIdentifiersAndFields {
		t.Errorf("the public packages export %d identifiers and fields, over the budget of %d", all, maxIdentifiersAndFields)
	}
}

// countSurface walks root's packages, skipping internal/, testdata/,
// hidden directories, tests and package main.
func countSurface(root string) (map[string]surface, error) {
	counts := map[string]surface{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "internal" || name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" || hasIgnoreTag(f) {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if dir == "." {
			dir = "umbra"
		}
		c := counts[dir]
		countFile(f, &c)
		counts[dir] = c
		return nil
	})
	return counts, err
}

// hasIgnoreTag reports a file built by nobody (//go:build ignore).
func hasIgnoreTag(f *ast.File) bool {
	for _, cg := range f.Comments {
		if cg.Pos() >= f.Package {
			break
		}
		for _, c := range cg.List {
			if strings.HasPrefix(c.Text, "//go:build") && strings.Contains(c.Text, "ignore") {
				return true
			}
		}
	}
	return false
}

func countFile(f *ast.File, c *surface) {
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil {
				c.funcs++
			} else if receiverExported(d.Recv.List[0].Type) {
				c.methods++
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					c.types++
					countType(s.Type, c)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if !n.IsExported() {
							continue
						}
						if d.Tok == token.CONST {
							c.consts++
						} else {
							c.vars++
						}
					}
				}
			}
		}
	}
}

// countType counts an exported type's exported struct fields (nested
// struct types included) and its exported interface methods.
func countType(e ast.Expr, c *surface) {
	switch t := e.(type) {
	case *ast.StructType:
		for _, fld := range t.Fields.List {
			if len(fld.Names) == 0 { // embedded: named by its type
				if embeddedName(fld.Type).IsExported() {
					c.fields++
				}
			}
			for _, n := range fld.Names {
				if n.IsExported() {
					c.fields++
				}
			}
			countNested(fld.Type, c)
		}
	case *ast.InterfaceType:
		for _, m := range t.Methods.List {
			for _, n := range m.Names {
				if n.IsExported() {
					c.methods++
				}
			}
		}
	}
}

// countNested counts the fields of a struct type written inside a field's
// type (struct{...}, *struct{...}, []struct{...}).
func countNested(e ast.Expr, c *surface) {
	switch t := e.(type) {
	case *ast.StructType:
		countType(t, c)
	case *ast.StarExpr:
		countNested(t.X, c)
	case *ast.ArrayType:
		countNested(t.Elt, c)
	case *ast.MapType:
		countNested(t.Value, c)
	}
}

func embeddedName(e ast.Expr) *ast.Ident {
	switch t := e.(type) {
	case *ast.Ident:
		return t
	case *ast.StarExpr:
		return embeddedName(t.X)
	case *ast.SelectorExpr:
		return t.Sel
	case *ast.IndexExpr:
		return embeddedName(t.X)
	case *ast.IndexListExpr:
		return embeddedName(t.X)
	}
	return ast.NewIdent("_")
}

func receiverExported(e ast.Expr) bool {
	return embeddedName(e).IsExported()
}
