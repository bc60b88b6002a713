package engine_test

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

// TestRaceDeferredListed keeps CI honest about the tests its race run
// skips: every test that calls raceDeferred is named in .ci/run's
// race_deferred, which the step after the race run runs without -race,
// and every name there is such a test. A test skipped in one step and
// missing from the other would count as covered while running nowhere.
func TestRaceDeferredListed(t *testing.T) {
	ci, err := os.ReadFile(filepath.Join("..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^race_deferred='([^']*)'`).FindSubmatch(ci)
	if m == nil {
		t.Fatal(".ci/run sets no race_deferred='…' list")
	}
	listed := strings.Split(string(m[1]), "|")
	slices.Sort(listed)

	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var callers []string
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "raceDeferred" {
						callers = append(callers, fn.Name.Name)
						return false
					}
				}
				return true
			})
		}
	}
	slices.Sort(callers)
	callers = slices.Compact(callers)
	if !slices.Equal(listed, callers) {
		t.Fatalf(".ci/run's race_deferred lists %v; the tests calling raceDeferred are %v", listed, callers)
	}
}
