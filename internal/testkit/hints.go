package testkit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// HintCodes returns the value of every Hint… constant the module's root
// package declares (hint.go), read from its source, so that a test that
// checks every code has words sees a new code without being told.
func HintCodes(t testing.TB) []string {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	file := filepath.Join(filepath.Dir(self), "..", "..", "hint.go")
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatalf("reading the hint codes: %v", err)
	}
	var codes []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			for i, n := range v.Names {
				if !strings.HasPrefix(n.Name, "Hint") || i >= len(v.Values) {
					continue
				}
				if lit, ok := v.Values[i].(*ast.BasicLit); ok {
					code, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatalf("hint constant %s: %v", n.Name, err)
					}
					codes = append(codes, code)
				}
			}
		}
	}
	if len(codes) == 0 {
		t.Fatalf("no Hint… constants in %s", file)
	}
	return codes
}
