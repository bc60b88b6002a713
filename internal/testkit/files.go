package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

// DirFiles is every file in dir (not below it), by name, with its bytes:
// what a test compares before and after an operation that must leave a
// directory as it was.
func DirFiles(t testing.TB, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}
