package umbra_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestFuzzTargetsListed keeps CI's fuzz step equal to the repository's
// fuzz targets: a Fuzz function .ci/run does not name is never fuzzed,
// and a name it keeps after the function moved fails CI's run (go test
// -fuzz finds no target in that package).
func TestFuzzTargetsListed(t *testing.T) {
	ci, err := os.ReadFile(filepath.Join(".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)\nfuzz_targets='([^']*)'`).FindSubmatch(ci)
	if m == nil {
		t.Fatal(".ci/run sets no fuzz_targets='…' list")
	}
	var listed []string
	for _, spec := range strings.Fields(string(m[1])) {
		parts := strings.Split(spec, ":")
		if len(parts) != 3 {
			t.Fatalf(".ci/run's fuzz target %q is not package:Target:count", spec)
		}
		listed = append(listed, parts[0]+":"+parts[1])
	}
	slices.Sort(listed)

	fuzzFunc := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(`)
	var found []string
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, f := range fuzzFunc.FindAllSubmatch(src, -1) {
			found = append(found, filepath.ToSlash(filepath.Dir(path))+":"+string(f[1]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(found)
	if !slices.Equal(listed, found) {
		t.Fatalf(".ci/run fuzzes %v; the repository's fuzz targets are %v", listed, found)
	}
}
