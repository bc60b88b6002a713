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

// TestRaceDeferredListed keeps CI honest about what its race run leaves
// out: every test in the module that calls RaceDeferred (skipped there) is
// named under its package in .ci/run's race_deferred, and every test that
// calls Whole (trimmed there) in race_trimmed; the step after the race run
// runs both lists whole without -race, and every name in them is such a
// test. A test skipped or trimmed in one step and missing from the other
// would count as covered while running nowhere, or nowhere whole.
func TestRaceDeferredListed(t *testing.T) {
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(self), "..", "..")
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	callers, err := testsCalling(root, "RaceDeferred", "Whole")
	if err != nil {
		t.Fatal(err)
	}
	for list, fn := range map[string]string{"race_deferred": "RaceDeferred", "race_trimmed": "Whole"} {
		listed := ciList(t, ci, list)
		if len(callers[fn]) == 0 {
			t.Fatalf("no test calls testkit.%s: the scan found nothing (wrong root?)", fn)
		}
		if !slices.Equal(listed, callers[fn]) {
			t.Errorf(".ci/run's %s lists %v; the tests calling testkit.%s are %v", list, listed, fn, callers[fn])
		}
	}
}

// ciList reads the list name='PACKAGE:TestA|TestB …' that .ci/run sets,
// as sorted PACKAGE:Test names.
func ciList(t *testing.T, ci []byte, name string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `='([^']*)'`).FindSubmatch(ci)
	if m == nil {
		t.Fatalf(".ci/run sets no %s='…' list", name)
	}
	var listed []string
	for _, spec := range strings.Fields(string(m[1])) {
		pkg, tests, ok := strings.Cut(spec, ":")
		if !ok || pkg == "" || tests == "" {
			t.Fatalf(".ci/run %s: %q is not PACKAGE:TestA|TestB", name, spec)
		}
		for _, test := range strings.Split(tests, "|") {
			listed = append(listed, pkg+":"+test)
		}
	}
	slices.Sort(listed)
	return listed
}

// testsCalling returns, for each of fns, the sorted PACKAGE:Test names of
// the module's test functions (under root) whose bodies call testkit.fn.
func testsCalling(root string, fns ...string) (map[string][]string, error) {
	callers := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
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
				if sel, ok := c.Fun.(*ast.SelectorExpr); ok && slices.Contains(fns, sel.Sel.Name) {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "testkit" {
						callers[sel.Sel.Name] = append(callers[sel.Sel.Name], filepath.ToSlash(rel)+":"+fn.Name.Name)
					}
				}
				return true
			})
		}
		return nil
	})
	for fn := range callers {
		slices.Sort(callers[fn])
		callers[fn] = slices.Compact(callers[fn])
	}
	return callers, err
}
