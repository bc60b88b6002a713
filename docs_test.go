package umbra_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageMapComplete keeps docs/how-it-works.md's map of the code
// whole: every directory of Go files is named, in backquotes, in one of
// its table's rows (a package added without a row failed no check
// before: internal/growbuf and test/chroma were missing).
func TestPackageMapComplete(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("docs", "how-it-works.md"))
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| `") {
			table.WriteString(line + "\n")
		}
	}
	named := table.String()
	dirs := map[string]bool{}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			dirs[filepath.ToSlash(filepath.Dir(path))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir := range dirs {
		if dir == "." {
			continue // the module root has its own row, `umbra`
		}
		if !strings.Contains(named, "`"+dir+"`") && !strings.Contains(named, "`"+dir+"/`") {
			t.Errorf("docs/how-it-works.md's map of the code has no row naming `%s`", dir)
		}
	}
}
