package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

// TestSearchEmptyAllowFileAdmitsNothing: an allow file that names no IDs
// (empty, or blank lines only) filters every vector out; before, it was
// read as no filter and the unfiltered top k came back under a header
// that said "only IDs in" the file.
func TestSearchEmptyAllowFileAdmitsNothing(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	dir := t.TempDir()
	data := writeMatrix(t, dir, "data.npy", randomMatrix(rng, 30, 8), "")
	queries := writeMatrix(t, dir, "q.npy", randomMatrix(rng, 2, 8), "")
	store := filepath.Join(dir, "s.umbra")
	ok(t, runUmbra(t, "build", "--data", data, "--out", store))
	for _, body := range []string{"", "\n\n  \n"} {
		allow := writeFile(t, dir, "allow.txt", []byte(body))
		for _, source := range [][]string{{"--store", store}, {"--data", data}} {
			args := append([]string{"search", "--queries", queries, "--k", "5", "--allow", allow, "--json"}, source...)
			s := decodeSearch(t, ok(t, runUmbra(t, args...)))
			require.Len(t, s.Results, 2)
			for _, res := range s.Results {
				require.Empty(t, res.Hits, "%v with an allow file of %q", source, body)
			}
		}
	}
}

// TestExportRefusesTheStoreItself: --out naming the store's own base
// file (a store may be named *.npy), directly or through a link, is
// refused, and the store is left as it was.
func TestExportRefusesTheStoreItself(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	dir := t.TempDir()
	data := writeMatrix(t, dir, "data.npy", randomMatrix(rng, 10, 4), "")
	store := filepath.Join(dir, "store.npy")
	ok(t, runUmbra(t, "build", "--data", data, "--out", store))
	before := mustRead(t, store)
	link := filepath.Join(dir, "link.npy")
	require.NoError(t, os.Symlink(store, link))
	for _, out := range []string{store, link} {
		r := runUmbra(t, "export", store, "--out", out)
		require.Equal(t, exitFailure, r.code, "%s", r)
		require.Contains(t, requireErrorLine(t, r), "the store's own file")
		r = runUmbra(t, "export", store, "--out", filepath.Join(dir, "fine.npy"), "--ids-out", out)
		require.Equal(t, exitFailure, r.code, "%s", r)
	}
	require.Equal(t, before, mustRead(t, store))
	ok(t, runUmbra(t, "info", store))
}

// TestTooManyIDsRefusedEarly: a text --ids file with far more IDs than
// --data has vectors is refused after reading one past the count, naming
// the line, not after reading it whole.
func TestTooManyIDsRefusedEarly(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	dir := t.TempDir()
	data := writeMatrix(t, dir, "data.npy", randomMatrix(rng, 20, 4), "")
	var b strings.Builder
	for i := range 1000 {
		b.WriteString(strings.Repeat(" ", i%3))
		b.WriteString("1")
		b.WriteString(strings.Repeat("0", i%5))
		b.WriteString("\n")
	}
	// Past line 21 the file is not even IDs: a reader that stopped at
	// the count never sees it.
	b.WriteString("garbage\n")
	ids := writeFile(t, dir, "ids.txt", []byte(b.String()))
	store := filepath.Join(dir, "s.umbra")
	for _, args := range [][]string{
		{"build", "--data", data, "--ids", ids, "--out", store},
		{"add", store, "--data", data, "--ids", ids},
		{"add", store, "--data", data, "--ids", ids, "--upsert"},
	} {
		if args[0] == "add" {
			if _, err := os.Stat(store); err != nil {
				ok(t, runUmbra(t, "build", "--data", data, "--out", store))
			}
		}
		r := runUmbra(t, args...)
		require.Equal(t, exitFailure, r.code, "%v: %s", args, r)
		line := requireErrorLine(t, r)
		require.Contains(t, line, "more than 20 IDs", "%v", args)
		require.Contains(t, line, "line 21", "%v", args)
	}
}
