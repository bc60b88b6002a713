package testkit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestRaceDeferredListed keeps CI honest about the tests its race run
// skips: every test in the module that calls RaceDeferred is named under
// its package in .ci/run's race_deferred, which the step after the race
// run runs without -race, and every name there is such a test. A test
// skipped in one step and missing from the other would count as covered
// while running nowhere.
func TestRaceDeferredListed(t *testing.T) {
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(self), "..", "..")
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^race_deferred='([^']*)'`).FindSubmatch(ci)
	if m == nil {
		t.Fatal(".ci/run sets no race_deferred='…' list")
	}
	var listed []string
	for _, spec := range strings.Fields(string(m[1])) {
		pkg, tests, ok := strings.Cut(spec, ":")
		if !ok || pkg == "" || tests == "" {
			t.Fatalf(".ci/run race_deferred: %q is not PACKAGE:TestA|TestB", spec)
		}
		for _, name := range strings.Split(tests, "|") {
			listed = append(listed, pkg+":"+name)
		}
	}
	slices.Sort(listed)

	var callers []string
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				c, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "RaceDeferred" {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "testkit" {
						callers = append(callers, filepath.ToSlash(rel)+":"+fn.Name.Name)
						return false
					}
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(callers)
	callers = slices.Compact(callers)
	if len(callers) == 0 {
		t.Fatal("no test calls testkit.RaceDeferred: the scan found nothing (wrong root?)")
	}
	if !slices.Equal(listed, callers) {
		t.Fatalf(".ci/run's race_deferred lists %v; the tests calling testkit.RaceDeferred are %v", listed, callers)
	}
}
