package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/host"
	"github.com/umbravec/umbra/internal/testkit"
)

// refHit is one row's score in the float64 reference.
type refHit struct {
	id    int
	score float64
	tol   float64 // how far a float32 computation may land from score
}

// reference scores every row of data against query q in float64 and returns
// the rows best first (ties by lower id), and the same scores indexed by row.
func reference(data *host.Matrix, q []float32, metric string) (ranked, byRow []refHit) {
	var qn float64
	for _, x := range q {
		qn += float64(x) * float64(x)
	}
	byRow = make([]refHit, data.Rows)
	for i := range byRow {
		r := data.Row(i)
		var dot, abs, rn, l2 float64
		for j, x := range r {
			a, b := float64(q[j]), float64(x)
			dot += a * b
			abs += math.Abs(a * b)
			rn += b * b
			l2 += (a - b) * (a - b)
		}
		h := refHit{id: i}
		switch metric {
		case "cosine":
			h.score = dot / math.Sqrt(qn*rn)
			h.tol = 2e-5 * (1 + abs/math.Sqrt(qn*rn))
		case "dot":
			h.score = dot
			h.tol = 2e-5 * (1 + abs)
		case "l2":
			h.score = l2
			h.tol = 2e-5 * (1 + qn + rn)
		}
		byRow[i] = h
	}
	ranked = slices.Clone(byRow)
	slices.SortStableFunc(ranked, func(a, b refHit) int {
		if metric == "l2" {
			return cmpFloat(a.score, b.score)
		}
		return cmpFloat(b.score, a.score)
	})
	return ranked, byRow
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkHits compares one query's hits with the reference: each hit's score
// is its row's true score, and at every rank the ID is the reference's or
// one whose true score is a near-tie with it (testkit.NearTie).
func checkHits(t *testing.T, ranked, byRow []refHit, k int, hits []hitJSON, metric string) {
	t.Helper()
	require.Len(t, hits, min(k, len(ranked)))
	seen := map[uint64]bool{}
	for j, h := range hits {
		require.Less(t, h.ID, uint64(len(byRow)), "hit %d", j)
		assert.False(t, seen[h.ID], "row %d returned twice", h.ID)
		seen[h.ID] = true
		got := float64(h.Score)
		want := byRow[h.ID]
		assert.InDelta(t, want.score, got, want.tol, "rank %d: score of row %d", j, h.ID)
		if r := ranked[j]; uint64(r.id) != h.ID {
			assert.True(t, testkit.NearTie(testkit.Ref{ID: uint64(r.id), Score: r.score, Tol: r.tol}, testkit.Ref{ID: h.ID, Score: want.score, Tol: want.tol}),
				"rank %d is row %d (%v), the reference's row %d (%v): not a near-tie", j, h.ID, want.score, r.id, r.score)
		}
		if j > 0 {
			prev := hits[j-1]
			better := float64(prev.Score) > got
			if metric == "l2" {
				better = float64(prev.Score) < got
			}
			assert.True(t, better || prev.Score == h.Score && prev.ID < h.ID,
				"rank %d (row %d, %v) does not follow rank %d (row %d, %v)", j, h.ID, h.Score, j-1, prev.ID, prev.Score)
		}
	}
}

func decodeSearch(t *testing.T, r result) searchJSON {
	t.Helper()
	require.Equal(t, exitOK, r.code, "%s", r)
	var s searchJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), r.stdout)
	return s
}

// parseSearchText reads the text table back into per-query hits: lines
// "query rank id score [key]", and "query (no hits)" for a query without.
func parseSearchText(t *testing.T, out string, queries int) [][]hitJSON {
	t.Helper()
	all := make([][]hitJSON, queries)
	seen := make([]bool, queries)
	header, keyed := false, false
	hit := regexp.MustCompile(`^(\d+)\s+(\d+)\s+(\d+)\s+(\S+)(?:\s+(.*))?$`)
	none := regexp.MustCompile(`^(\d+)\s+\(no hits\)$`)
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		if !header {
			f := strings.Fields(line)
			keyed = len(f) == 5
			want := []string{"query", "rank", "id", "score"}
			if keyed {
				want = append(want, "key")
			}
			require.Equal(t, want, f)
			header = true
			continue
		}
		if m := none.FindStringSubmatch(line); m != nil {
			q, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			require.False(t, seen[q], "query %d has hits and a no-hits line", q)
			seen[q] = true
			all[q] = []hitJSON{}
			continue
		}
		m := hit.FindStringSubmatch(line)
		require.NotNil(t, m, "line %q", line)
		q, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		rank, err := strconv.Atoi(m[2])
		require.NoError(t, err)
		id, err := strconv.ParseUint(m[3], 10, 64)
		require.NoError(t, err)
		s, err := strconv.ParseFloat(m[4], 32)
		require.NoError(t, err)
		require.Equal(t, len(all[q])+1, rank, "line %q", line)
		require.True(t, keyed || m[5] == "", "a key without a key column: %q", line)
		seen[q] = true
		all[q] = append(all[q], hitJSON{ID: id, Key: m[5], Score: score(s)})
	}
	require.True(t, header, "no table header in\n%s", out)
	for q, ok := range seen {
		require.True(t, ok, "query %d has no line in\n%s", q, out)
	}
	return all
}

func TestSearchMatchesFloat64Reference(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	const rows, dim, nq, k = 300, 37, 6, 7
	tests := []struct {
		metric           string // "" leaves --metric out: cosine
		dataFile, qFile  string
		dataType, qDtype string
	}{
		{"", "data.npy", "q.fvecs", "<f4", ""},
		{"cosine", "data.npy", "q.npy", "<f2", "<f2"},
		{"dot", "data.fvecs", "q.npy", "", "<f2"},
		{"l2", "data.npy", "q.npy", "<f2", "<f4"},
		{"l2", "data.fvecs", "q.fvecs", "", ""},
	}
	for _, tc := range tests {
		metric := tc.metric
		if metric == "" {
			metric = "cosine"
		}
		t.Run(metric+"/"+tc.dataFile+tc.dataType+"/"+tc.qFile+tc.qDtype, func(t *testing.T) {
			dir := t.TempDir()
			dataPath := writeMatrix(t, dir, tc.dataFile, randomMatrix(rng, rows, dim), tc.dataType)
			qPath := writeMatrix(t, dir, tc.qFile, randomMatrix(rng, nq, dim), tc.qDtype)
			// The reference uses the values as stored (float16 rounding included).
			data, err := host.ReadMatrixFile(context.Background(), dataPath)
			require.NoError(t, err)
			queries, err := host.ReadMatrixFile(context.Background(), qPath)
			require.NoError(t, err)

			args := []string{"search", "--data", dataPath, "--queries", qPath, "--k", strconv.Itoa(k), "--device", "cpu"}
			if tc.metric != "" {
				args = append(args, "--metric", tc.metric)
			}
			s := decodeSearch(t, runUmbra(t, append(args, "--json")...))
			assert.Equal(t, "cpu", s.Backend)
			assert.Nil(t, s.Adapter)
			assert.Empty(t, s.Reason, "--device cpu is no fallback")
			assert.Equal(t, metric, s.Metric)
			assert.Equal(t, k, s.K)
			assert.Equal(t, dim, s.Dim)
			assert.Equal(t, rows, s.Rows)
			require.Len(t, s.Results, nq)
			for i := range nq {
				ranked, byRow := reference(data, queries.Row(i), metric)
				checkHits(t, ranked, byRow, k, s.Results[i].Hits, metric)
			}

			text := runUmbra(t, args...)
			require.Equal(t, exitOK, text.code, "%s", text)
			assert.Empty(t, text.stderr)
			assert.Contains(t, text.stdout, "# backend cpu")
			got := parseSearchText(t, text.stdout, nq)
			for i := range nq {
				assert.Equal(t, s.Results[i].Hits, got[i], "query %d: text and JSON agree", i)
			}
		})
	}
}

// TestSearchJSONShape checks the documented field names and types, which
// scripts depend on, rather than this package's Go struct.
func TestSearchJSONShape(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	dir := t.TempDir()
	data := writeMatrix(t, dir, "data.npy", randomMatrix(rng, 40, 8), "")
	queries := writeMatrix(t, dir, "q.npy", randomMatrix(rng, 3, 8), "")
	r := runUmbra(t, "search", "--data", data, "--queries", queries, "--k", "4", "--json")
	require.Equal(t, exitOK, r.code, "%s", r)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	for _, key := range []string{"backend", "adapter", "cpu_kernel", "reason", "hint", "metric", "k", "dim", "rows", "data", "queries", "results"} {
		assert.Contains(t, doc, key)
	}
	backend := doc["backend"].(string)
	require.Contains(t, []string{"gpu", "cpu"}, backend)
	if backend == "gpu" {
		a := doc["adapter"].(map[string]any)
		for _, key := range []string{"name", "vendor", "vendor_id", "device_id", "backend", "type", "driver"} {
			assert.Contains(t, a, key)
		}
	} else {
		assert.Nil(t, doc["adapter"])
		assert.NotEmpty(t, doc["reason"], "--device auto on the CPU says why")
	}
	assert.Equal(t, "cosine", doc["metric"])
	assert.Equal(t, 4.0, doc["k"])
	results := doc["results"].([]any)
	require.Len(t, results, 3)
	for _, res := range results {
		hits := res.(map[string]any)["hits"].([]any)
		require.Len(t, hits, 4)
		for _, h := range hits {
			hit := h.(map[string]any)
			require.Len(t, hit, 2)
			assert.IsType(t, 0.0, hit["id"])
			assert.IsType(t, 0.0, hit["score"])
		}
	}
}

func TestSearchTiesAndSmallInputs(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	dir := t.TempDir()
	m := randomMatrix(rng, 30, 9)
	copy(m.Row(17), m.Row(3))
	data := writeMatrix(t, dir, "data.npy", m, "")
	q := &host.Matrix{Rows: 1, Dim: 9, Data: slices.Clone(m.Row(3))}
	queries := writeMatrix(t, dir, "q.npy", q, "")

	t.Run("equal rows rank by lower id", func(t *testing.T) {
		for _, metric := range []string{"cosine", "l2"} {
			s := decodeSearch(t, runUmbra(t, "search", "--data", data, "--queries", queries, "--k", "3", "--metric", metric, "--device", "cpu", "--json"))
			hits := s.Results[0].Hits
			assert.Equal(t, []uint64{3, 17}, []uint64{hits[0].ID, hits[1].ID}, metric)
			assert.Equal(t, hits[0].Score, hits[1].Score, metric)
		}
	})
	t.Run("k above rows returns every row", func(t *testing.T) {
		s := decodeSearch(t, runUmbra(t, "search", "--data", data, "--queries", queries, "--k", "1000", "--device", "cpu", "--json"))
		assert.Len(t, s.Results[0].Hits, 30)
	})
	t.Run("an empty file is an error naming it", func(t *testing.T) {
		empty := writeMatrix(t, dir, "empty.npy", &host.Matrix{Rows: 0, Dim: 9}, "")
		emptyFvecs := writeFile(t, dir, "empty.fvecs", nil)
		tests := []struct {
			data, queries string
			flag, file    string // named in the error
		}{
			{data, empty, "--queries", empty},
			{empty, queries, "--data", empty},
			{emptyFvecs, queries, "--data", emptyFvecs},
		}
		for _, tc := range tests {
			r := runUmbra(t, "search", "--data", tc.data, "--queries", tc.queries, "--k", "2", "--device", "cpu", "--json")
			require.Equal(t, exitFailure, r.code, "%s", r)
			assert.Empty(t, r.stdout)
			line := requireErrorLine(t, r)
			assert.Contains(t, line, tc.flag)
			assert.Contains(t, line, tc.file)
			assert.Contains(t, line, "no vectors")
		}
	})
	t.Run("flags in any order and with =", func(t *testing.T) {
		s := decodeSearch(t, runUmbra(t, "search", "--json", "-k=2", "--queries="+queries, "-data", data, "--device=CPU"))
		assert.Len(t, s.Results[0].Hits, 2)
	})
}

func TestSearchRejectsBadInput(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	dir := t.TempDir()
	const dim = 6
	good := randomMatrix(rng, 20, dim)
	goodData := writeMatrix(t, dir, "good.npy", good, "")
	goodQ := writeMatrix(t, dir, "goodq.npy", randomMatrix(rng, 3, dim), "")

	valid := testkit.NPY("<f4", "(20, 6)", float32Bytes(good.Data))
	withValue := func(name string, row, col int, v float32) string {
		m := &host.Matrix{Rows: good.Rows, Dim: dim, Data: slices.Clone(good.Data)}
		m.Data[row*dim+col] = v
		return writeMatrix(t, dir, name, m, "")
	}
	zeroRow := func(name string, row int) string {
		m := &host.Matrix{Rows: good.Rows, Dim: dim, Data: slices.Clone(good.Data)}
		clear(m.Row(row))
		return writeMatrix(t, dir, name, m, "")
	}
	fvecs, err := os.ReadFile(writeMatrix(t, dir, "good.fvecs", good, ""))
	require.NoError(t, err)

	tests := []struct {
		name          string
		data, queries string
		metric        string
		want          []string // all in the error line
	}{
		{"missing file", filepath.Join(dir, "nope.npy"), goodQ, "", []string{"--data", "nope.npy", "no such file"}},
		{"truncated npy", writeFile(t, dir, "trunc.npy", valid[:len(valid)-10]), goodQ, "", []string{"--data", "trunc.npy", "truncated"}},
		{"truncated header", writeFile(t, dir, "head.npy", valid[:40]), goodQ, "", []string{"--data", "head.npy", "truncated"}},
		{"empty npy", writeFile(t, dir, "empty.npy", nil), goodQ, "", []string{"--data", "empty.npy"}},
		{"bad magic", writeFile(t, dir, "magic.npy", append([]byte("NUMPY!!!"), valid[8:]...)), goodQ, "", []string{"--data", "magic.npy", "magic"}},
		{"float64 dtype", writeFile(t, dir, "f8.npy", testkit.NPY("<f8", "(20, 3)", float32Bytes(good.Data))), goodQ, "", []string{"--data", "f8.npy", "<f8"}},
		{"int32 dtype", writeFile(t, dir, "i4.npy", testkit.NPY("<i4", "(20, 6)", float32Bytes(good.Data))), goodQ, "", []string{"--data", "i4.npy", "<i4"}},
		{"big-endian dtype", writeFile(t, dir, "be.npy", testkit.NPY(">f4", "(20, 6)", float32Bytes(good.Data))), goodQ, "", []string{"--data", "be.npy", ">f4"}},
		{"1-D array", writeFile(t, dir, "flat.npy", testkit.NPY("<f4", "(120,)", float32Bytes(good.Data))), goodQ, "", []string{"--data", "flat.npy", "(120,)"}},
		{"3-D array", writeFile(t, dir, "cube.npy", testkit.NPY("<f4", "(2, 10, 6)", float32Bytes(good.Data))), goodQ, "", []string{"--data", "cube.npy"}},
		{"truncated fvecs", writeFile(t, dir, "trunc.fvecs", fvecs[:len(fvecs)-3]), goodQ, "", []string{"--data", "trunc.fvecs", "truncated"}},
		{"unknown extension", writeFile(t, dir, "data.csv", []byte("1,2,3\n")), goodQ, "", []string{"--data", "data.csv", "extension"}},
		{"directory", mkdir(t, dir, "vectors"), goodQ, "", []string{"--data", "vectors is a directory", "want a .npy or .fvecs file"}},
		{"directory named like a file", mkdir(t, dir, "dir.npy"), goodQ, "", []string{"--data", "dir.npy is a directory"}},
		{"directory as queries", goodData, mkdir(t, dir, "qdir.fvecs"), "", []string{"--queries", "qdir.fvecs is a directory"}},
		{"malformed queries", goodData, writeFile(t, dir, "q8.npy", testkit.NPY("<f8", "(1, 3)", float32Bytes(good.Data[:6]))), "", []string{"--queries", "q8.npy"}},
		{"dimension mismatch", goodData, writeMatrix(t, dir, "q5.npy", randomMatrix(rng, 2, 5), ""), "", []string{"dimension mismatch", "q5.npy", "dimension 5", "good.npy", "dimension 6"}},
		{"NaN in data", withValue("nan.npy", 5, 2, float32(math.NaN())), goodQ, "", []string{"--data", "nan.npy", "vector 5", "component 2", "NaN"}},
		{"Inf in data", withValue("inf.npy", 11, 0, float32(math.Inf(-1))), goodQ, "dot", []string{"--data", "inf.npy", "vector 11", "-Inf"}},
		{"zero row under cosine", zeroRow("zero.npy", 7), goodQ, "cosine", []string{"--data", "zero.npy", "vector 7", "norm 0"}},
		{"NaN in queries", goodData, writeMatrix(t, dir, "qnan.npy", &host.Matrix{Rows: 3, Dim: dim, Data: append(slices.Clone(good.Data[:2*dim]), float32(math.NaN()), 0, 0, 0, 0, 0)}, ""), "l2", []string{"--queries", "qnan.npy", "query 2", "NaN"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"search", "--data", tc.data, "--queries", tc.queries, "--k", "3", "--device", "cpu"}
			if tc.metric != "" {
				args = append(args, "--metric", tc.metric)
			}
			r := runUmbra(t, args...)
			require.Equal(t, exitFailure, r.code, "%s", r)
			assert.Empty(t, r.stdout)
			line := requireErrorLine(t, r)
			for _, w := range tc.want {
				assert.Contains(t, line, w)
			}
			assert.NotContains(t, line, "umbra: umbra:")
			assert.NotContains(t, line, "host: ")
			for _, p := range []string{tc.data, tc.queries} {
				assert.LessOrEqual(t, strings.Count(line, filepath.Base(p)), 2, "the message says it once: %s", line)
			}
		})
	}

	t.Run("zero row under dot is fine", func(t *testing.T) {
		r := runUmbra(t, "search", "--data", zeroRow("zero-dot.npy", 7), "--queries", goodQ, "--k", "3", "--metric", "dot", "--device", "cpu")
		require.Equal(t, exitOK, r.code, "%s", r)
	})
}

func mkdir(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.Mkdir(p, 0o755))
	return p
}

// TestSearchOnSoftwareAdapters forces the real shader path onto each
// software adapter the machine has (lavapipe on Vulkan, llvmpipe on GL) and
// checks it agrees with the CPU path. Each GPU search is a process that
// probes its adapter (every scoring variant compiled and timed: seconds on
// a software adapter), so the README's test command searches one metric
// per adapter, drawn from the test's seed; UMBRA_FULL=1 (CI) searches
// every metric on both. The engine's tests hold each metric to the
// reference on every adapter; here the point is the command line's path
// to the shaders and what it reports.
func TestSearchOnSoftwareAdapters(t *testing.T) {
	t.Parallel()
	if !engine.GPUSupport() {
		t.Skip("built without the wgpu backend")
	}
	rng := testkit.Rand(t)
	dir := t.TempDir()
	data := writeMatrix(t, dir, "data.npy", randomMatrix(rng, 700, 19), "")
	queries := writeMatrix(t, dir, "q.fvecs", randomMatrix(rng, 4, 19), "")
	metrics := []string{"cosine", "dot", "l2"}
	for _, backend := range []string{"vulkan", "gl"} {
		run := metrics
		if !testkit.Full() {
			run = []string{metrics[rng.IntN(len(metrics))]}
		}
		t.Run(backend, func(t *testing.T) {
			for i, metric := range run {
				args := []string{"search", "--data", data, "--queries", queries, "--k", "10", "--metric", metric, "--json"}
				r := runUmbra(t, append(args, "--device", "gpu", "--backend", backend)...)
				if i == 0 && r.code != exitOK {
					// No working adapter skips (fails under
					// UMBRA_REQUIRE_GPU=1); a working one that failed the
					// search fails the test. The probe, run only here,
					// says which.
					skipWithoutAdapter(t, backend, r)
				}
				gpu := decodeSearch(t, r)
				cpu := decodeSearch(t, runUmbra(t, append(args, "--device", "cpu")...))
				require.Equal(t, "gpu", gpu.Backend, metric)
				require.NotNil(t, gpu.Adapter)
				assert.Equal(t, backend, gpu.Adapter.Backend)
				assert.NotEmpty(t, gpu.Adapter.Name)
				require.Len(t, gpu.Results, len(cpu.Results))
				for i := range cpu.Results {
					g, c := gpu.Results[i].Hits, cpu.Results[i].Hits
					require.Len(t, g, len(c))
					for j := range c {
						tol := 1e-5 * (1 + math.Abs(float64(c[j].Score)))
						assert.InDelta(t, float64(c[j].Score), float64(g[j].Score), tol, "%s query %d rank %d", metric, i, j)
						if j+1 < len(c) && math.Abs(float64(c[j+1].Score-c[j].Score)) > 2*tol &&
							(j == 0 || math.Abs(float64(c[j].Score-c[j-1].Score)) > 2*tol) {
							assert.Equal(t, c[j].ID, g[j].ID, "%s query %d rank %d", metric, i, j)
						}
					}
				}
			}
		})
	}
}

// skipWithoutAdapter is called after `search --device gpu --backend
// backend` failed (r): it probes the backend and skips when no adapter
// there works (fails under UMBRA_REQUIRE_GPU=1), and fails the test when
// one does, since the search should then have run.
func skipWithoutAdapter(t *testing.T, backend string, r result) {
	t.Helper()
	pr := runUmbra(t, "probe", "--json", "--backend", backend)
	var p probeJSON
	require.NoError(t, json.Unmarshal([]byte(pr.stdout), &p), "%s", pr)
	for _, a := range p.Adapters {
		if a.Works {
			t.Fatalf("a %s adapter works (%s) but search --device gpu failed: %s", backend, a.Name, r)
		}
	}
	testkit.NoGPU(t, "no working %s adapter: %s", backend, p.Why)
}

func TestServedByFollowsTheTrace(t *testing.T) {
	t.Parallel()
	// Under Auto routing a GPU index may serve a small search on the CPU:
	// the engine's trace says which path ran; Info is the fallback.
	gpu := engine.Info{Device: engine.GPU}
	assert.Equal(t, "cpu", servedBy(gpu, diag.Trace{Device: "cpu"}))
	assert.Equal(t, "gpu", servedBy(gpu, diag.Trace{Device: "gpu"}))
	assert.Equal(t, "gpu", servedBy(gpu, diag.Trace{}), "an untraced call (empty index) falls back to Info")
}
