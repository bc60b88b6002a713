package engine_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/host"
	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/meta"
)

// The README's library snippets, as they are printed there: TestReadme
// checks that the README holds exactly these lines and runs them, so a
// snippet that stops compiling, or fails when pasted into a program, fails
// the build.

// readmeIndex is the README's first snippet.
func readmeIndex(ctx context.Context, vectors [][]float32, rows []float32, myIDs []uint64, keys []string, query []float32, mine []uint64) error {
	// README:begin
	ix, err := engine.New(ctx, engine.Config{Dim: 768}) // Metric: Cosine, Device: Auto
	if err != nil {
		return err
	}
	defer ix.Close()
	// [][]float32, all or nothing; IDs assigned
	if _, err := ix.Add(ctx, umbra.Vectors(vectors)); err != nil {
		return err
	}
	// row-major, the caller's IDs
	if _, err := ix.Add(ctx, umbra.Flat(rows, 768), umbra.WithIDs(myIDs...)); err != nil {
		return err
	}
	src, err := host.OpenMatrixFile(ctx, "base.npy") // a file read a piece at a time
	if err != nil {
		return err
	}
	defer src.Close()
	if _, err := ix.Add(ctx, src, umbra.WithKeys(keys...)); err != nil { // streamed, named by keys
		return err
	}
	hits, err := ix.Search(ctx, query, 10) // []Hit{ID, Score, Key}, best first, ties by lower ID
	if err != nil {
		return err
	}
	mineOnly, err := ix.Search(ctx, query, 10, umbra.Allow(mine...)) // exactly the top 10 of a subset
	if err != nil {
		return err
	}
	fmt.Println(hits, mineOnly, ix.Info()) // Info: device, adapter, and why a fallback
	// README:end
	return nil
}

// readmeStore is the README's store snippet.
func readmeStore(ctx context.Context, vectors, v [][]float32, query []float32, now time.Time) error {
	// README:begin
	st, err := engine.Open(ctx, "memory.umbra", engine.Config{Dim: 768})
	if err != nil {
		return err
	}
	defer st.Close()
	// two memories named by keys, logged before the call returns
	if _, err := st.Upsert(ctx, umbra.Vectors(vectors), umbra.WithKeys("alice/m1", "alice/m2")); err != nil {
		return err
	}
	if err := st.Delete(ctx, umbra.WithKeys("alice/m2")); err != nil {
		return err
	}
	// a memory: metadata and a payload with the vector
	if _, err := st.Add(ctx, umbra.Vectors(v), umbra.WithKeys("alice/m3"),
		umbra.WithMeta(meta.Fields{"user": meta.KeywordOf("alice"), "ts": meta.TimeOf(now), "tags": meta.TagsOf("work")}),
		umbra.WithPayloads([]byte(`{"text": "the meeting moved to Friday"}`))); err != nil {
		return err
	}
	// the exact top 10 of alice's work memories
	hits, err := st.Search(ctx, query, 10, umbra.WithPayload(),
		umbra.Where(meta.And(meta.Eq("user", meta.KeywordOf("alice")), meta.Contains("tags", "work"))))
	if err != nil {
		return err
	}
	fmt.Println(hits)
	if err := st.Checkpoint(ctx); err != nil { // fold the log into the base file
		return err
	}
	ro, err := engine.Open(ctx, "memory.umbra", engine.Config{ReadOnly: true}) // a reader beside the writer
	if err != nil {
		return err
	}
	defer ro.Close()
	// README:end
	return nil
}

// TestReadme: the README's Go blocks hold the snippets above, line for
// line (after the imports), and each runs to the end on data of its shapes in an empty
// directory.
func TestReadme(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1) {
		blocks = append(blocks, m[1])
	}
	src, err := os.ReadFile("readme_test.go")
	require.NoError(t, err)
	var snippets []string
	for _, m := range regexp.MustCompile(`(?s)// README:begin\n(.*?)\t// README:end`).FindAllStringSubmatch(string(src), -1) {
		lines := strings.SplitAfter(m[1], "\n")
		for i, l := range lines {
			lines[i] = strings.TrimPrefix(l, "\t")
		}
		snippets = append(snippets, strings.Join(lines, ""))
	}
	require.Len(t, snippets, 2)
	for i, s := range snippets {
		in := slices.ContainsFunc(blocks, func(b string) bool { return strings.HasPrefix(b, s) || strings.Contains(b, "\n\n"+s) })
		require.True(t, in, "README.md holds no Go block with snippet %d of readme_test.go, line for line:\n%s", i, s)
	}

	r := testkit.Rand(t)
	t.Chdir(t.TempDir())
	ctx := context.Background()
	base := testkit.Vectors(r, 20, 768)
	m := &host.Matrix{Rows: len(base), Dim: 768}
	for _, row := range base {
		m.Data = append(m.Data, row...)
	}
	require.NoError(t, host.WriteMatrixFile("base.npy", m, "<f4"))
	keys := make([]string, len(base))
	for i := range keys {
		keys[i] = fmt.Sprintf("doc/%d", i)
	}
	rows := testkit.Vectors(r, 3, 768)
	flat := slices.Concat(rows...)
	query := testkit.Vectors(r, 1, 768)[0]
	require.NoError(t, readmeIndex(ctx, testkit.Vectors(r, 5, 768), flat, []uint64{100, 101, 102}, keys, query, []uint64{0, 2, 101}))
	require.NoError(t, readmeStore(ctx, testkit.Vectors(r, 2, 768), testkit.Vectors(r, 1, 768), query, time.Now()))
}
