package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/host"
	"github.com/umbravec/umbra/internal/testkit"
)

// storeModel is what a store should hold: each ID's vector as added.
type storeModel map[uint64][]float32

func (m storeModel) ids() []uint64 {
	ids := make([]uint64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// matrix returns the model's vectors in ascending ID order, restricted to
// keep when it is not nil, and the ID of each row.
func (m storeModel) matrix(dim int, keep map[uint64]bool) (*host.Matrix, []uint64) {
	out := &host.Matrix{Dim: dim}
	var ids []uint64
	for _, id := range m.ids() {
		if keep != nil && !keep[id] {
			continue
		}
		out.Data = append(out.Data, m[id]...)
		ids = append(ids, id)
	}
	out.Rows = len(ids)
	return out, ids
}

// checkStoreSearch compares search --json results over a store with the
// float64 reference over the model (restricted to allow when not nil).
func checkStoreSearch(t *testing.T, s searchJSON, model storeModel, queries *host.Matrix, k int, metric string, allow map[uint64]bool) {
	t.Helper()
	data, rowIDs := model.matrix(queries.Dim, allow)
	rowOf := map[uint64]uint64{}
	for row, id := range rowIDs {
		rowOf[id] = uint64(row)
	}
	require.Len(t, s.Results, queries.Rows)
	for i := range queries.Rows {
		ranked, byRow := reference(data, queries.Row(i), metric)
		hits := make([]hitJSON, len(s.Results[i].Hits))
		for j, h := range s.Results[i].Hits {
			row, ok := rowOf[h.ID]
			require.True(t, ok, "query %d rank %d: ID %d is not in the store (or not allowed)", i, j, h.ID)
			hits[j] = hitJSON{ID: row, Score: h.Score}
		}
		checkHits(t, ranked, byRow, k, hits, metric)
	}
}

func writeIDsText(t *testing.T, dir, name string, ids []uint64) string {
	t.Helper()
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "%d\n", id)
	}
	return writeFile(t, dir, name, []byte(b.String()))
}

func writeIDsNPYFile(t *testing.T, dir, name string, ids []uint64) string {
	t.Helper()
	payload := make([]byte, 0, 8*len(ids))
	for _, id := range ids {
		payload = binary.LittleEndian.AppendUint64(payload, id)
	}
	return writeFile(t, dir, name, testkit.NPY("<i8", fmt.Sprintf("(%d,)", len(ids)), payload))
}

// distinctIDs draws n distinct IDs below limit that are not in taken.
func distinctIDs(rng *rand.Rand, n int, limit uint64, taken storeModel) []uint64 {
	seen := map[uint64]bool{}
	var ids []uint64
	for len(ids) < n {
		id := rng.Uint64N(limit)
		if _, ok := taken[id]; ok || seen[id] {
			continue
		}
		seen[id] = true
		ids = append(ids, id)
	}
	return ids
}

func decodeInfo(t *testing.T, r result) infoJSON {
	t.Helper()
	require.Equal(t, exitOK, r.code, "%s", r)
	var info infoJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &info), r.stdout)
	return info
}

func ok(t *testing.T, r result) result {
	t.Helper()
	require.Equal(t, exitOK, r.code, "%s", r)
	return r
}

// TestStoreLifecycle drives every store command over one store and checks
// each answer against a model of what the store must hold.
func TestStoreLifecycle(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	const dim, n, nq, k = 12, 150, 5, 6
	for _, metric := range []string{"cosine", "l2"} {
		t.Run(metric, func(t *testing.T) {
			dir := t.TempDir()
			store := filepath.Join(dir, "vectors.umbra")
			model := storeModel{}
			add := func(ids []uint64, m *host.Matrix) {
				for i, id := range ids {
					model[id] = slices.Clone(m.Row(i))
				}
			}
			data := randomMatrix(rng, n, dim)
			dataPath := writeMatrix(t, dir, "data.npy", data, "")
			ids := distinctIDs(rng, n, 1<<40, nil)
			idsPath := writeIDsText(t, dir, "ids.txt", ids)
			if metric == "l2" {
				idsPath = writeIDsNPYFile(t, dir, "ids.npy", ids)
			}
			queries := randomMatrix(rng, nq, dim)
			qPath := writeMatrix(t, dir, "q.npy", queries, "")

			// build
			r := ok(t, runUmbra(t, "build", "--data", dataPath, "--ids", idsPath, "--metric", metric, "--out", store))
			assert.Contains(t, r.stdout, fmt.Sprintf("%d vectors of dimension %d", n, dim))
			add(ids, data)

			// info
			info := decodeInfo(t, runUmbra(t, "info", store, "--json"))
			assert.Equal(t, store, info.Path)
			assert.Equal(t, dim, info.Dim)
			assert.Equal(t, metric, info.Metric)
			assert.Equal(t, n, info.Count)
			require.NotNil(t, info.MinID)
			assert.Equal(t, model.ids()[0], *info.MinID)
			assert.Equal(t, model.ids()[n-1], *info.MaxID)
			assert.Zero(t, info.Keys)
			assert.Positive(t, info.BaseBytes)
			text := ok(t, runUmbra(t, "info", store))
			assert.Regexp(t, `count\s+150\n`, text.stdout)

			search := func(extra ...string) searchJSON {
				t.Helper()
				args := append([]string{"search", "--store", store, "--queries", qPath, "--device", "cpu", "--json"}, extra...)
				s := decodeSearch(t, runUmbra(t, args...))
				assert.Equal(t, store, s.Store)
				assert.Empty(t, s.Data)
				assert.Equal(t, metric, s.Metric)
				assert.Equal(t, len(model), s.Rows)
				return s
			}
			checkStoreSearch(t, search("--k", strconv.Itoa(k)), model, queries, k, metric, nil)

			// add without IDs: the store assigns new ones, above all before.
			more := randomMatrix(rng, 20, dim)
			r = ok(t, runUmbra(t, "add", store, "--data", writeMatrix(t, dir, "more.fvecs", more, "")))
			m := regexp.MustCompile(`as IDs (\d+) to (\d+)`).FindStringSubmatch(r.stdout)
			require.NotNil(t, m, r.stdout)
			lo, _ := strconv.ParseUint(m[1], 10, 64)
			hi, _ := strconv.ParseUint(m[2], 10, 64)
			require.Equal(t, uint64(19), hi-lo)
			assert.Greater(t, lo, model.ids()[len(model)-1])
			var assigned []uint64
			for id := lo; id <= hi; id++ {
				assigned = append(assigned, id)
			}
			add(assigned, more)

			// add with IDs; flags after or before the store.
			withIDs := randomMatrix(rng, 10, dim)
			newIDs := distinctIDs(rng, 10, 1<<40, model)
			ok(t, runUmbra(t, "add", "--ids", writeIDsText(t, dir, "new.txt", newIDs), store, "--data", writeMatrix(t, dir, "new.npy", withIDs, "")))
			add(newIDs, withIDs)

			// upsert: 6 stored IDs replaced, 4 new ones added.
			up := randomMatrix(rng, 10, dim)
			upIDs := append(slices.Clone(ids[:3]), assigned[:3]...)
			upIDs = append(upIDs, distinctIDs(rng, 4, 1<<40, model)...)
			upPath := writeMatrix(t, dir, "up.npy", up, "")
			upIDsPath := writeIDsNPYFile(t, dir, "up-ids.npy", upIDs)
			r = runUmbra(t, "add", store, "--data", upPath, "--ids", upIDsPath)
			require.Equal(t, exitFailure, r.code, "stored IDs without --upsert\n%s", r)
			line := requireErrorLine(t, r)
			assert.Contains(t, line, "already stored")
			assert.Contains(t, line, "--upsert")
			r = ok(t, runUmbra(t, "add", store, "--data", upPath, "--ids", upIDsPath, "--upsert"))
			assert.Contains(t, r.stdout, "6 replaced, 4 added")
			add(upIDs, up)

			// delete, by list and by file.
			gone := []uint64{ids[10], assigned[5], newIDs[0]}
			ok(t, runUmbra(t, "delete", store, "--ids", fmt.Sprintf("%d,%d,%d", gone[0], gone[1], gone[2])))
			goneFile := []uint64{ids[20], ids[21]}
			ok(t, runUmbra(t, "delete", store, "--ids-file", writeIDsText(t, dir, "gone.txt", goneFile)))
			for _, id := range append(gone, goneFile...) {
				delete(model, id)
			}

			info = decodeInfo(t, runUmbra(t, "info", store, "--json"))
			assert.Equal(t, len(model), info.Count)
			assert.Positive(t, info.LogBytes, "the changes are in the log")
			checkStoreSearch(t, search("--k", strconv.Itoa(k)), model, queries, k, metric, nil)

			// --allow: a subset, with an ID that is not stored and one deleted.
			allowIDs := append(model.ids()[:40:40], 1<<50, gone[0])
			allow := map[uint64]bool{}
			for _, id := range allowIDs {
				if _, ok := model[id]; ok {
					allow[id] = true
				}
			}
			allowPath := writeIDsText(t, dir, "allow.txt", allowIDs)
			s := search("--k", strconv.Itoa(k), "--allow", allowPath)
			assert.Equal(t, allowPath, s.Allow)
			checkStoreSearch(t, s, model, queries, k, metric, allow)

			// A threshold: every vector within it, best first; --k caps.
			flag := "--min-score"
			if metric == "l2" {
				flag = "--max-distance"
			}
			all, rowIDs := model.matrix(dim, nil)
			ranked, _ := reference(all, queries.Row(0), metric)
			bound := (ranked[11].score + ranked[12].score) / 2
			s = search(flag, strconv.FormatFloat(bound, 'g', -1, 64))
			assert.Zero(t, s.K)
			if metric == "l2" {
				require.NotNil(t, s.MaxDistance)
				assert.Nil(t, s.MinScore)
			} else {
				require.NotNil(t, s.MinScore)
			}
			for i := range nq {
				ranked, _ := reference(all, queries.Row(i), metric)
				want := []uint64{}
				nearBound := false
				for _, h := range ranked {
					inside := h.score >= bound
					if metric == "l2" {
						inside = h.score <= bound
					}
					nearBound = nearBound || math.Abs(h.score-bound) <= h.tol
					if inside {
						want = append(want, rowIDs[h.id])
					}
				}
				if nearBound {
					// Rounding may put that row on either side; the set is
					// checked for the other queries.
					t.Logf("query %d: a score within rounding of the threshold, set not compared", i)
					continue
				}
				got := make([]uint64, len(s.Results[i].Hits))
				for j, h := range s.Results[i].Hits {
					got[j] = h.ID
				}
				slices.Sort(got)
				slices.Sort(want)
				assert.Equal(t, want, got, "query %d: the vectors within %s %g", i, flag, bound)
				if i == 0 {
					assert.Len(t, got, 12)
				}
			}
			capped := search(flag, strconv.FormatFloat(bound, 'g', -1, 64), "--k", "3")
			assert.Equal(t, 3, capped.K)
			for i := range nq {
				assert.Equal(t, s.Results[i].Hits[:min(3, len(s.Results[i].Hits))], capped.Results[i].Hits, "query %d: --k keeps the best", i)
			}
			// A threshold and --allow together.
			within := search(flag, strconv.FormatFloat(bound, 'g', -1, 64), "--allow", allowPath)
			for i := range nq {
				for _, h := range within.Results[i].Hits {
					assert.True(t, allow[h.ID], "query %d: ID %d is not allowed", i, h.ID)
				}
			}

			// export, then read both files back.
			out, idsOut := filepath.Join(dir, "export.npy"), filepath.Join(dir, "export-ids.npy")
			r = ok(t, runUmbra(t, "export", store, "--out", out, "--ids-out", idsOut))
			if metric == "cosine" {
				assert.Contains(t, r.stdout, "unit length")
			}
			got, err := host.ReadMatrixFile(context.Background(), out)
			require.NoError(t, err)
			gotIDs, err := host.ReadIDsFile(context.Background(), idsOut)
			require.NoError(t, err)
			require.Equal(t, model.ids(), gotIDs)
			require.Equal(t, len(model), got.Rows)
			require.Equal(t, dim, got.Dim)
			for i, id := range gotIDs {
				want := slices.Clone(model[id])
				if metric == "cosine" {
					var norm float64
					for _, x := range want {
						norm += float64(x) * float64(x)
					}
					for j := range want {
						want[j] = float32(float64(want[j]) / math.Sqrt(norm))
					}
				}
				assert.InDeltaSlice(t, want, got.Row(i), 1e-6, "ID %d", id)
			}
			raw, err := os.ReadFile(idsOut)
			require.NoError(t, err)
			assert.Contains(t, string(raw[:128]), "'descr': '<u8'")

			// The export builds the same store again.
			again := filepath.Join(dir, "again.umbra")
			ok(t, runUmbra(t, "build", "--data", out, "--ids", idsOut, "--metric", metric, "--out", again))
			a := decodeSearch(t, runUmbra(t, "search", "--store", again, "--queries", qPath, "--k", strconv.Itoa(k), "--device", "cpu", "--json"))
			b := search("--k", strconv.Itoa(k))
			for i := range nq {
				for j := range b.Results[i].Hits {
					assert.Equal(t, b.Results[i].Hits[j].ID, a.Results[i].Hits[j].ID, "query %d rank %d", i, j)
					assert.InDelta(t, float64(b.Results[i].Hits[j].Score), float64(a.Results[i].Hits[j].Score), 1e-5)
				}
			}
		})
	}
}

func TestBuildWithKeysAndDefaults(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	dir := t.TempDir()
	const n, dim = 25, 7
	data := writeMatrix(t, dir, "data.fvecs", randomMatrix(rng, n, dim), "")
	var keys strings.Builder
	for i := range n {
		fmt.Fprintf(&keys, "doc-%d\r\n", i)
	}
	store := filepath.Join(dir, "keyed.umbra")
	ok(t, runUmbra(t, "build", "--data", data, "--keys", writeFile(t, dir, "keys.txt", []byte(keys.String())), "--out", store))
	info := decodeInfo(t, runUmbra(t, "info", store, "--json"))
	assert.Equal(t, n, info.Keys)
	assert.Equal(t, "cosine", info.Metric)

	ix, err := engine.Open(context.Background(), store, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	id, found := ix.Lookup("doc-7")
	assert.True(t, found, "keys are stored without their line ends")
	recs := stored(t, ix, umbra.Selection{IDs: []uint64{id}})
	require.Len(t, recs, 1)
	assert.Equal(t, "doc-7", recs[0].Key)
	require.NoError(t, ix.Close())

	plain := filepath.Join(dir, "plain.umbra")
	ok(t, runUmbra(t, "build", "--data", data, "--out", plain))
	info = decodeInfo(t, runUmbra(t, "info", plain, "--json"))
	assert.Equal(t, uint64(0), *info.MinID)
	assert.Equal(t, uint64(n-1), *info.MaxID, "IDs are row numbers")
}

func TestBuildReplacesAStore(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "s.umbra")
	ok(t, runUmbra(t, "build", "--data", writeMatrix(t, dir, "a.npy", randomMatrix(rng, 40, 5), ""), "--out", store))
	ok(t, runUmbra(t, "add", store, "--data", writeMatrix(t, dir, "b.npy", randomMatrix(rng, 7, 5), "")))
	before := decodeInfo(t, runUmbra(t, "info", store, "--json"))
	require.Equal(t, 47, before.Count)

	// A different dimension and metric: nothing of the old store survives,
	// its log included.
	ok(t, runUmbra(t, "build", "--data", writeMatrix(t, dir, "c.npy", randomMatrix(rng, 9, 3), ""), "--metric", "dot", "--out", store))
	after := decodeInfo(t, runUmbra(t, "info", store, "--json"))
	assert.Equal(t, 9, after.Count)
	assert.Equal(t, 3, after.Dim)
	assert.Equal(t, "dot", after.Metric)
	assert.Less(t, after.LogBytes, before.LogBytes, "the old log is gone")
	assert.Equal(t, uint64(8), *after.MaxID)
	assert.Equal(t, "f32", after.Precision)
}

// A compressed store keeps its precision, and searching it gives the
// float32 store's answers exactly.
func TestBuildPrecision(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	dir := t.TempDir()
	data := writeMatrix(t, dir, "a.npy", randomMatrix(rng, 300, 24), "")
	queries := writeMatrix(t, dir, "q.npy", randomMatrix(rng, 3, 24), "")
	f32 := filepath.Join(dir, "f32.umbra")
	ok(t, runUmbra(t, "build", "--data", data, "--out", f32))
	want := decodeSearch(t, runUmbra(t, "search", "--store", f32, "--queries", queries, "--k", "7", "--device", "cpu", "--json"))
	for _, p := range []string{"f16", "int8"} {
		store := filepath.Join(dir, p+".umbra")
		r := ok(t, runUmbra(t, "build", "--data", data, "--precision", p, "--out", store))
		assert.Contains(t, r.stdout, "precision "+p)
		info := decodeInfo(t, runUmbra(t, "info", store, "--json"))
		assert.Equal(t, p, info.Precision)
		assert.Contains(t, runUmbra(t, "info", store).stdout, p)
		got := decodeSearch(t, runUmbra(t, "search", "--store", store, "--queries", queries, "--k", "7", "--device", "cpu", "--json"))
		assert.Equal(t, want.Results, got.Results, p)
	}
	r := runUmbra(t, "build", "--data", data, "--precision", "int4", "--out", filepath.Join(dir, "x.umbra"))
	assert.Equal(t, exitUsage, r.code, "%s", r)
}

func TestStoreErrors(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	dir := t.TempDir()
	const n, dim = 30, 6
	data := writeMatrix(t, dir, "data.npy", randomMatrix(rng, n, dim), "")
	queries := writeMatrix(t, dir, "q.npy", randomMatrix(rng, 2, dim), "")
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(1000 + i)
	}
	idsPath := writeIDsText(t, dir, "ids.txt", ids)
	store := filepath.Join(dir, "s.umbra")
	ok(t, runUmbra(t, "build", "--data", data, "--ids", idsPath, "--out", store))
	l2store := filepath.Join(dir, "l2.umbra")
	ok(t, runUmbra(t, "build", "--data", data, "--metric", "l2", "--out", l2store))

	dup := slices.Clone(ids)
	dup[17] = dup[4]
	var dup2 []uint64
	for i := range n - 1 {
		dup2 = append(dup2, uint64(2000+i))
	}
	dup2 = append(dup2, 2003)
	negative := strings.Replace(string(mustRead(t, idsPath)), "1002\n", "-5\n", 1)
	notNumber := strings.Replace(string(mustRead(t, idsPath)), "1001\n", "ten\n", 1)
	notAStore := writeFile(t, dir, "notes.txt", []byte("precious\n"))
	damaged := filepath.Join(dir, "damaged.umbra")
	raw := mustRead(t, store)
	writeFile(t, dir, "damaged.umbra", raw[:len(raw)/2])
	out := func(name string) string { return filepath.Join(dir, name) }
	// Files the streamed import meets mid-way: a bad row, a short last
	// record, bytes past the payload.
	nanRows := randomMatrix(rng, 40, dim)
	nanRows.Data[17*dim+2] = float32(math.NaN())
	zeroRows := randomMatrix(rng, 40, dim)
	clear(zeroRows.Data[33*dim : 34*dim])
	goodNPY := mustRead(t, data)
	goodFvecs := mustRead(t, writeMatrix(t, dir, "good.fvecs", randomMatrix(rng, n, dim), ""))

	tests := []struct {
		name string
		args []string
		code int
		want []string // all in the error line
	}{
		{"build ids and keys, counts differ", []string{"build", "--data", data, "--ids", idsPath, "--keys", writeFile(t, dir, "k31.txt", []byte(strings.Repeat("k\n", 31))), "--out", out("x.umbra")}, exitFailure, []string{"--keys", "k31.txt", "31 keys", "30 vectors"}},
		{"build without out", []string{"build", "--data", data}, exitUsage, []string{"missing required flag --out"}},
		{"build without data", []string{"build", "--out", out("x.umbra")}, exitUsage, []string{"missing required flag --data"}},
		{"build id count", []string{"build", "--data", data, "--ids", writeIDsText(t, dir, "short.txt", ids[:29]), "--out", out("x.umbra")}, exitFailure, []string{"--ids", "short.txt", "29 IDs", "30 vectors"}},
		{"build duplicate ids", []string{"build", "--data", data, "--ids", writeIDsText(t, dir, "dup.txt", dup), "--out", out("x.umbra")}, exitFailure, []string{"--ids", "dup.txt", "duplicate ID", "1004"}},
		{"build negative id", []string{"build", "--data", data, "--ids", writeFile(t, dir, "neg.txt", []byte(negative)), "--out", out("x.umbra")}, exitFailure, []string{"--ids", "neg.txt", "line 3", "-5 is negative"}},
		{"build non-numeric id", []string{"build", "--data", data, "--ids", writeFile(t, dir, "word.txt", []byte(notNumber)), "--out", out("x.umbra")}, exitFailure, []string{"--ids", "word.txt", "line 2", `"ten" is not an ID`}},
		{"build float npy as ids", []string{"build", "--data", data, "--ids", data, "--out", out("x.umbra")}, exitFailure, []string{"--ids", "data.npy", "int64/uint64"}},
		{"build negative npy id", []string{"build", "--data", data, "--ids", writeFile(t, dir, "neg.npy", testkit.NPY("<i8", "(1,)", binary.LittleEndian.AppendUint64(nil, math.MaxUint64))), "--out", out("x.umbra")}, exitFailure, []string{"--ids", "neg.npy", "negative"}},
		{"build binary ids", []string{"build", "--data", data, "--ids", writeMatrix(t, dir, "ids.fvecs", randomMatrix(rng, n, 1), ""), "--out", out("x.umbra")}, exitFailure, []string{"--ids", "ids.fvecs", "line 1", "binary data"}},
		{"build keys count", []string{"build", "--data", data, "--keys", writeFile(t, dir, "keys.txt", []byte("a\nb\n")), "--out", out("x.umbra")}, exitFailure, []string{"--keys", "keys.txt", "2 keys", "30 vectors"}},
		{"build over a file that is not a store", []string{"build", "--data", data, "--out", notAStore}, exitFailure, []string{"notes.txt", "not an umbra store"}},
		{"add without store", []string{"add", "--data", data}, exitUsage, []string{"missing STORE"}},
		{"add upsert without ids", []string{"add", store, "--data", data, "--upsert"}, exitUsage, []string{"--upsert needs --ids"}},
		{"add to no store", []string{"add", out("none.umbra"), "--data", data}, exitFailure, []string{"no store at", "none.umbra", "umbra build"}},
		{"add stored ids", []string{"add", store, "--data", data, "--ids", idsPath}, exitFailure, []string{"--ids", "30 IDs (1000, 1001", "already stored", "--upsert"}},
		{"add dimension mismatch", []string{"add", store, "--data", writeMatrix(t, dir, "d5.npy", randomMatrix(rng, 3, 5), "")}, exitFailure, []string{"dimension mismatch", "d5.npy", "dimension 5", "s.umbra", "dimension 6"}},
		{"add id count", []string{"add", store, "--data", data, "--ids", writeIDsText(t, dir, "one.txt", []uint64{5})}, exitFailure, []string{"--ids", "1 ID,", "30 vectors"}},
		{"add duplicate ids", []string{"add", store, "--data", data, "--ids", writeIDsText(t, dir, "dup2.txt", dup2)}, exitFailure, []string{"--ids", "dup2.txt", "duplicate ID", "2003"}},
		{"add to a damaged store", []string{"add", damaged, "--data", data}, exitFailure, []string{"damaged.umbra is damaged", "truncated"}},
		{"add a NaN row", []string{"add", store, "--data", writeMatrix(t, dir, "nan.npy", nanRows, "")}, exitFailure, []string{"--data", "nan.npy", "vector 17, component 2 is NaN"}},
		{"add a zero row", []string{"add", store, "--data", writeMatrix(t, dir, "zero.fvecs", zeroRows, "")}, exitFailure, []string{"--data", "zero.fvecs", "vector 33 has norm 0"}},
		{"add trailing bytes", []string{"add", store, "--data", writeFile(t, dir, "trail.npy", append(slices.Clone(goodNPY), 1, 2))}, exitFailure, []string{"--data", "trail.npy", "2 bytes of trailing data"}},
		{"add short record", []string{"add", store, "--data", writeFile(t, dir, "short.fvecs", goodFvecs[:len(goodFvecs)-5])}, exitFailure, []string{"--data", "short.fvecs", "vector 29 truncated"}},
		{"build truncated npy", []string{"build", "--data", writeFile(t, dir, "cut.npy", goodNPY[:len(goodNPY)-9]), "--out", out("x.umbra")}, exitFailure, []string{"--data", "cut.npy", "payload truncated"}},
		{"build a NaN row", []string{"build", "--data", filepath.Join(dir, "nan.npy"), "--out", out("x.umbra")}, exitFailure, []string{"--data", "nan.npy", "vector 17, component 2 is NaN"}},
		{"delete unknown ids", []string{"delete", store, "--ids", "1000,77,78"}, exitFailure, []string{"--ids", "2 IDs (77, 78) are not stored", "nothing was deleted"}},
		{"delete both", []string{"delete", store, "--ids", "1", "--ids-file", idsPath}, exitUsage, []string{"--ids and --ids-file"}},
		{"delete neither", []string{"delete", store}, exitUsage, []string{"--ids 1,2,3 or --ids-file"}},
		{"delete bad list", []string{"delete", store, "--ids", "4,x"}, exitUsage, []string{"--ids", "entry 2", `"x" is not an ID`}},
		{"delete negative", []string{"delete", store, "--ids", "4,-1"}, exitUsage, []string{"entry 2", "-1 is negative"}},
		{"delete repeated", []string{"delete", store, "--ids", "1003,1003"}, exitFailure, []string{"--ids", "duplicate ID", "1003"}},
		{"info no store", []string{"info"}, exitUsage, []string{"missing STORE"}},
		{"info damaged", []string{"info", damaged}, exitFailure, []string{"damaged.umbra", "damaged"}},
		{"info directory", []string{"info", dir}, exitFailure, []string{"is a directory"}},
		{"search data and store", []string{"search", "--data", data, "--store", store, "--queries", queries, "--k", "2"}, exitUsage, []string{"--data and --store"}},
		{"search no k nor threshold", []string{"search", "--store", store, "--queries", queries}, exitUsage, []string{"missing required flag --k", "--min-score"}},
		{"search min-score on l2 store", []string{"search", "--store", l2store, "--queries", queries, "--min-score", "0.5"}, exitUsage, []string{"--min-score", "l2", "--max-distance"}},
		{"search max-distance on cosine store", []string{"search", "--store", store, "--queries", queries, "--max-distance", "0.5"}, exitUsage, []string{"--max-distance", "cosine", "--min-score"}},
		{"search max-distance on dot data", []string{"search", "--data", data, "--metric", "dot", "--queries", queries, "--max-distance", "1"}, exitUsage, []string{"--max-distance", "dot"}},
		{"search both thresholds", []string{"search", "--data", data, "--queries", queries, "--max-distance", "1", "--min-score", "1"}, exitUsage, []string{"exclude each other"}},
		{"search bad threshold", []string{"search", "--store", store, "--queries", queries, "--min-score", "high"}, exitUsage, []string{"--min-score", "finite number"}},
		{"search store metric", []string{"search", "--store", store, "--queries", queries, "--k", "2", "--metric", "l2"}, exitUsage, []string{"--metric l2", "cosine"}},
		{"search store dimension", []string{"search", "--store", store, "--queries", writeMatrix(t, dir, "q5.npy", randomMatrix(rng, 2, 5), ""), "--k", "2", "--device", "cpu"}, exitFailure, []string{"dimension mismatch", "q5.npy", "s.umbra"}},
		{"search bad allow", []string{"search", "--store", store, "--queries", queries, "--k", "2", "--allow", writeFile(t, dir, "allow.txt", []byte("1\n2\nthree\n"))}, exitFailure, []string{"--allow", "allow.txt", "line 3"}},
		{"search no store", []string{"search", "--store", out("none.umbra"), "--queries", queries, "--k", "2"}, exitFailure, []string{"no store at"}},
		{"search damaged", []string{"search", "--store", damaged, "--queries", queries, "--k", "2", "--device", "cpu"}, exitFailure, []string{"damaged"}},
		{"export without out", []string{"export", store}, exitUsage, []string{"missing required flag --out"}},
		{"export fvecs", []string{"export", store, "--out", out("e.fvecs")}, exitUsage, []string{"--out", ".npy"}},
		{"export damaged", []string{"export", damaged, "--out", out("e.npy")}, exitFailure, []string{"damaged"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runUmbra(t, tc.args...)
			require.Equal(t, tc.code, r.code, "%s", r)
			line := requireErrorLine(t, r)
			for _, w := range tc.want {
				assert.Contains(t, line, w)
			}
			assert.NotContains(t, line, "umbra: umbra:")
		})
	}
	assert.NoFileExists(t, out("x.umbra"))
	assert.NoFileExists(t, out("none.umbra"), "a failed command creates no store")
	assert.Equal(t, "precious\n", string(mustRead(t, notAStore)))
	info := decodeInfo(t, runUmbra(t, "info", store, "--json"))
	assert.Equal(t, n, info.Count, "the refused writes changed nothing")
}

// TestLockedStore holds a store open in this process, as a writer would:
// the commands that write (build, add, delete) say the store is locked,
// naming the lock, and change nothing; the ones that only read (info,
// search, export) open it read-only and see what the writer has
// acknowledged, including a write made after it opened the store.
func TestLockedStore(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	dir := t.TempDir()
	data := writeMatrix(t, dir, "data.npy", randomMatrix(rng, 20, 4), "")
	queries := writeMatrix(t, dir, "q.npy", randomMatrix(rng, 2, 4), "")
	store := filepath.Join(dir, "s.umbra")
	ok(t, runUmbra(t, "build", "--data", data, "--out", store))

	ix, err := engine.Open(context.Background(), store, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	extra := randomMatrix(rng, 3, 4)
	added, err := ix.Add(context.Background(), umbra.Flat(extra.Data, ix.Dim()))
	require.NoError(t, err)
	for _, args := range [][]string{
		{"build", "--data", data, "--out", store},
		{"add", store, "--data", data},
		{"delete", store, "--ids", "1"},
	} {
		t.Run(args[0], func(t *testing.T) {
			r := runUmbra(t, args...)
			require.Equal(t, exitFailure, r.code, "%s", r)
			line := requireErrorLine(t, r)
			assert.Contains(t, line, "locked")
			assert.Contains(t, line, store+".lock")
		})
	}
	info := decodeInfo(t, runUmbra(t, "info", store, "--json"))
	assert.Equal(t, 23, info.Count, "info beside the writer sees its add")
	assert.Equal(t, added[2], *info.MaxID)
	s := decodeSearch(t, runUmbra(t, "search", "--store", store, "--queries", queries, "--k", "23", "--device", "cpu", "--json"))
	require.Len(t, s.Results, 2)
	assert.Len(t, s.Results[0].Hits, 23, "search beside the writer sees every acknowledged vector")
	out := filepath.Join(dir, "e.npy")
	ok(t, runUmbra(t, "export", store, "--out", out))
	m, err := host.ReadMatrixFile(context.Background(), out)
	require.NoError(t, err)
	assert.Equal(t, 23, m.Rows)
	require.NoError(t, ix.Close())
	assert.Equal(t, 23, decodeInfo(t, runUmbra(t, "info", store, "--json")).Count)
}

// TestAddWithKeys: add --keys names new vectors by key (IDs assigned past
// the stored ones), refuses a stored key without --upsert changing
// nothing, and with --upsert replaces a stored key's vector in place and
// adds the new keys.
func TestAddWithKeys(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	dir := t.TempDir()
	const dim = 5
	store := filepath.Join(dir, "k.umbra")
	ok(t, runUmbra(t, "build", "--data", writeMatrix(t, dir, "a.npy", randomMatrix(rng, 10, dim), ""), "--out", store))
	keys := func(name string, ks ...string) string {
		return writeFile(t, dir, name, []byte(strings.Join(ks, "\n")+"\n"))
	}
	first := randomMatrix(rng, 3, dim)
	r := ok(t, runUmbra(t, "add", store, "--data", writeMatrix(t, dir, "b.npy", first, ""), "--keys", keys("b.txt", "a/x.md", "a/y.md", "b/z.md")))
	assert.Contains(t, r.stdout, "added 3 keyed vectors")
	assert.Contains(t, r.stdout, "as IDs 10 to 12")

	// A stored key without --upsert: refused, nothing written.
	r = runUmbra(t, "add", store, "--data", writeMatrix(t, dir, "c.npy", randomMatrix(rng, 2, dim), ""), "--keys", keys("c.txt", "new.md", "a/y.md"))
	require.Equal(t, exitFailure, r.code, "%s", r)
	line := requireErrorLine(t, r)
	assert.Contains(t, line, `key "a/y.md" is already stored`)
	assert.Contains(t, line, "--upsert")
	assert.Equal(t, 13, decodeInfo(t, runUmbra(t, "info", store, "--json")).Count)
	// A key count that is not the vector count.
	r = runUmbra(t, "add", store, "--data", writeMatrix(t, dir, "d.npy", randomMatrix(rng, 2, dim), ""), "--keys", keys("d.txt", "only-one"))
	require.Equal(t, exitFailure, r.code, "%s", r)
	assert.Contains(t, requireErrorLine(t, r), "holds 1 key")
	r = runUmbra(t, "add", store, "--data", writeMatrix(t, dir, "e.npy", randomMatrix(rng, 1, dim), ""), "--keys", keys("e.txt", "z"), "--ids", writeIDsText(t, dir, "e-ids.txt", []uint64{99}))
	require.Equal(t, exitUsage, r.code, "%s", r)

	up := randomMatrix(rng, 2, dim)
	r = ok(t, runUmbra(t, "add", store, "--data", writeMatrix(t, dir, "f.npy", up, ""), "--keys", keys("f.txt", "a/y.md", "c/w.md"), "--upsert"))
	assert.Contains(t, r.stdout, "1 replaced, 1 added")
	ix, err := engine.Open(context.Background(), store, engine.Config{Device: engine.CPU, ReadOnly: true})
	require.NoError(t, err)
	defer ix.Close()
	assert.Equal(t, 14, ix.Len())
	id, found := ix.Lookup("a/y.md")
	require.True(t, found)
	assert.Equal(t, uint64(11), id, "an upsert by key keeps the key's ID")
	recs := stored(t, ix, umbra.Selection{IDs: []uint64{id}, Vectors: true})
	require.Len(t, recs, 1)
	got := recs[0].Vector
	want := up.Row(0)
	var n float64
	for _, x := range want {
		n += float64(x) * float64(x)
	}
	n = math.Sqrt(n)
	for j := range want {
		assert.InDelta(t, float64(want[j])/n, got[j], 1e-6, "the replaced vector (cosine: unit)")
	}
	_, found = ix.Lookup("c/w.md")
	assert.True(t, found)
	for _, k := range []string{"a/x.md", "b/z.md"} {
		_, found := ix.Lookup(k)
		assert.True(t, found, k)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}
