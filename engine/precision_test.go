package engine_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/testkit"
)

// sameHitBits requires identical IDs and identical score bits.
func sameHitBits(t *testing.T, want, got []umbra.Hit, format string, args ...any) {
	t.Helper()
	ok := len(want) == len(got)
	for i := 0; ok && i < len(want); i++ {
		ok = want[i].ID == got[i].ID && math.Float32bits(want[i].Score) == math.Float32bits(got[i].Score)
	}
	if !ok {
		t.Fatalf("%s:\nwant %v\n got %v", fmt.Sprintf(format, args...), want, got)
	}
}

// precisionVectors makes rows of one stressful kind: norms over six orders
// of magnitude, a tight cluster, or duplicates.
func precisionVectors(r *rand.Rand, kind, n, dim int, center []float32) [][]float32 {
	vs := testkit.Vectors(r, n, dim)
	for i, v := range vs {
		switch kind {
		case 1:
			s := float32(math.Pow(10, 6*r.Float64()-3))
			for j := range v {
				v[j] *= s
			}
		case 2:
			for j := range v {
				v[j] = center[j] + 1e-3*v[j]
			}
		case 3:
			if i > 0 && r.IntN(3) == 0 {
				vs[i] = vs[r.IntN(i)]
			}
		}
	}
	return vs
}

// A compressed index and a float32 twin (on the CPU) go through the same
// random writes; after each step every kind of search returns the same IDs
// and the same score bits on both, for all three metrics and both
// compressed precisions, through Save and Open too — with the compressed
// index on the CPU path and on each software adapter, whose device holds
// the codes in chunks of 64 rows.
func TestPrecisionMatchesFloat32(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	for _, b := range backends {
		for _, prec := range []umbra.Precision{umbra.F16, umbra.Int8} {
			for _, m := range []umbra.Metric{umbra.Cosine, umbra.Dot, umbra.L2} {
				t.Run(fmt.Sprintf("%s/%v/%v", b.name, prec, m), func(t *testing.T) {
					dim := 8 + r.IntN(90)
					kind := r.IntN(4)
					center := testkit.Vectors(r, 1, dim)[0]
					f32, err := engine.New(ctx, engine.Config{Dim: dim, Metric: m, Device: engine.CPU})
					require.NoError(t, err)
					defer f32.Close()
					cfg := engine.Config{Dim: dim, Metric: m, Precision: prec}
					cmp := open(t, b, cfg, 64)
					defer func() { cmp.Close() }()
					require.Equal(t, prec, cmp.Info().Precision)

					check := func(step string) {
						t.Helper()
						n := f32.Len()
						qs := precisionVectors(r, kind, 3, dim, center)
						if n > 0 && kind >= 2 {
							ids := f32.IDs()
							v, err := f32.Vector(ids[r.IntN(len(ids))])
							require.NoError(t, err)
							qs[0] = v // on top of the data: ties and near-ties
						}
						ids := f32.IDs()
						allow := []umbra.SearchOption{}
						if len(ids) > 0 && r.IntN(2) == 0 {
							keep := ids[:1+r.IntN(len(ids))]
							allow = append(allow, umbra.Allow(keep...))
						}
						for _, k := range []int{1, 1 + r.IntN(12), max(1, n), n + 2} {
							want, err := f32.SearchBatch(ctx, qs, k, allow...)
							require.NoError(t, err)
							var tr diag.Trace
							got, err := cmp.SearchBatch(diag.WithTrace(ctx, &tr), qs, k, allow...)
							require.NoError(t, err)
							for j := range qs {
								sameHitBits(t, want[j], got[j], "%s: batch k %d query %d (rescored %d)", step, k, j, tr.Rescored)
							}
							if b.device == engine.GPU && n > 0 {
								require.Equal(t, "gpu", tr.Device, "%s: the device scanned the codes", step)
							}
							one, err := cmp.Search(ctx, qs[0], k, allow...)
							require.NoError(t, err)
							sameHitBits(t, want[0], one, "%s: single k %d", step, k)
							require.Equal(t, len(qs), tr.Searches)
							require.LessOrEqual(t, tr.MaxRescored, n, "only live rows are rescored")
						}
						if n > 0 {
							all, err := f32.Search(ctx, qs[1], n)
							require.NoError(t, err)
							th := all[r.IntN(len(all))].Score
							want, err := f32.SearchRange(ctx, qs[1], th, allow...)
							require.NoError(t, err)
							got, err := cmp.SearchRange(ctx, qs[1], th, allow...)
							require.NoError(t, err)
							sameHitBits(t, want, got, "%s: range %g", step, th)
						}
					}
					both := func(f func(ix *engine.Index) error) {
						t.Helper()
						require.NoError(t, f(f32))
						require.NoError(t, f(cmp))
					}
					for step := range 8 {
						switch op := r.IntN(5); {
						case op <= 1 || f32.Len() < 4:
							vs := precisionVectors(r, kind, 1+r.IntN(60), dim, center)
							both(func(ix *engine.Index) error { _, err := ix.Add(ctx, umbra.Vectors(vs)); return err })
						case op == 2:
							ids := f32.IDs()
							up := []uint64{ids[r.IntN(len(ids))], 1 << 40}
							if f32.Has(up[1]) {
								up = up[:1]
							}
							vs := precisionVectors(r, kind, len(up), dim, center)
							both(func(ix *engine.Index) error {
								return testkit.ErrOf(ix.Upsert(ctx, umbra.Vectors(vs), umbra.WithIDs(up...)))
							})
						case op == 3:
							ids := f32.IDs()
							del := ids[:1+r.IntN(len(ids)/2)]
							both(func(ix *engine.Index) error { return ix.Delete(ctx, umbra.WithIDs(del...)) })
						default:
							both(func(ix *engine.Index) error { return ix.Compact(ctx) })
						}
						check(fmt.Sprintf("step %d", step))
					}
					// Save and Open keep the precision and the answers.
					path := filepath.Join(t.TempDir(), "store.umbra")
					require.NoError(t, cmp.Save(ctx, path))
					require.NoError(t, cmp.Close())
					cmp, err = engine.Open(ctx, path, engine.Config{Device: b.device, Adapters: []engine.AdapterSelect{b.adapter}})
					require.NoError(t, err)
					require.Equal(t, prec, cmp.Info().Precision)
					require.Equal(t, b.device == engine.GPU, cmp.Info().Device == engine.GPU)
					check("reopened")
					// The log replays upserts into the compressed copy too.
					vs := precisionVectors(r, kind, 5, dim, center)
					ids := []uint64{1 << 41, 1<<41 + 1, 1<<41 + 2, 1<<41 + 3, 1<<41 + 4}
					both(func(ix *engine.Index) error {
						return testkit.ErrOf(ix.Add(ctx, umbra.Vectors(vs), umbra.WithIDs(ids...)))
					})
					require.NoError(t, cmp.Close())
					cmp, err = engine.Open(ctx, path, engine.Config{Device: b.device, Adapters: []engine.AdapterSelect{b.adapter}})
					require.NoError(t, err)
					check("replayed")
				})
			}
		}
	}
}

// Approximate skips the rescore: no row rescored, k hits, most of them the
// exact ones on spread-out data; under F32 it changes nothing.
func TestApproximateOption(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	dim := 48
	vs := testkit.Vectors(r, 3000, dim)
	q := testkit.Vectors(r, 1, dim)[0]
	f32, err := engine.New(ctx, engine.Config{Dim: dim, Device: engine.CPU})
	require.NoError(t, err)
	defer f32.Close()
	_, err = f32.Add(ctx, umbra.Vectors(vs))
	require.NoError(t, err)
	want, err := f32.Search(ctx, q, 10)
	require.NoError(t, err)
	same, err := f32.Search(ctx, q, 10, umbra.Approximate())
	require.NoError(t, err)
	sameHitBits(t, want, same, "F32 ignores Approximate")
	for _, prec := range []umbra.Precision{umbra.F16, umbra.Int8} {
		ix, err := engine.New(ctx, engine.Config{Dim: dim, Device: engine.CPU, Precision: prec})
		require.NoError(t, err)
		_, err = ix.Add(ctx, umbra.Vectors(vs))
		require.NoError(t, err)
		var tr diag.Trace
		got, err := ix.Search(diag.WithTrace(ctx, &tr), q, 10, umbra.Approximate())
		require.NoError(t, err)
		require.Len(t, got, 10)
		require.Zero(t, tr.Rescored, "%v", prec)
		in := map[uint64]bool{}
		for _, h := range want {
			in[h.ID] = true
		}
		found := 0
		for _, h := range got {
			if in[h.ID] {
				found++
			}
		}
		require.GreaterOrEqual(t, found, 7, "%v: approximate recall@10", prec)
		tr = diag.Trace{}
		exact, err := ix.Search(diag.WithTrace(ctx, &tr), q, 10)
		require.NoError(t, err)
		sameHitBits(t, want, exact, "%v exact", prec)
		require.Positive(t, tr.Rescored)
		require.Less(t, tr.Rescored, int64(len(vs)), "%v: the bounds rule rows out", prec)
		require.Positive(t, tr.BytesRead)
		require.NoError(t, ix.Close())
	}
}

func TestPrecisionConfig(t *testing.T) {
	ctx := context.Background()
	for _, s := range []string{"f32", "F16", "int8", "fp16", "i8"} {
		_, err := umbra.ParsePrecision(s)
		require.NoError(t, err, s)
	}
	_, err := umbra.ParsePrecision("int4")
	require.ErrorIs(t, err, umbra.ErrInvalidConfig)
	_, err = engine.New(ctx, engine.Config{Dim: 8, Precision: 9, Device: engine.CPU})
	require.ErrorIs(t, err, umbra.ErrInvalidConfig)
	_, err = engine.New(ctx, engine.Config{Dim: 1 << 17, Precision: umbra.Int8, Device: engine.CPU})
	require.ErrorIs(t, err, umbra.ErrInvalidConfig)
	ix, err := engine.New(ctx, engine.Config{Dim: 8, Precision: umbra.Int8, Device: engine.CPU})
	require.NoError(t, err)
	defer ix.Close()
	info := ix.Info()
	require.Equal(t, engine.CPU, info.Device)
	require.True(t, strings.Contains(info.String(), "int8"), info.String())
	require.NotEmpty(t, info.QuantKernel)
}

// Concurrent searches of a compressed index are coalesced into batches
// like any others, and each still gets the float32 index's exact answer.
func TestPrecisionCoalescedSearches(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	dim := 32
	vs := testkit.Vectors(r, 2000, dim)
	f32, err := engine.New(ctx, engine.Config{Dim: dim, Device: engine.CPU, Coalesce: engine.Coalesce{MaxQueries: 1}})
	require.NoError(t, err)
	defer f32.Close()
	ix, err := engine.New(ctx, engine.Config{Dim: dim, Device: engine.CPU, Precision: umbra.Int8})
	require.NoError(t, err)
	defer ix.Close()
	_, err = f32.Add(ctx, umbra.Vectors(vs))
	require.NoError(t, err)
	_, err = ix.Add(ctx, umbra.Vectors(vs))
	require.NoError(t, err)
	qs := testkit.Vectors(r, 16, dim)
	want, err := f32.SearchBatch(ctx, qs, 7)
	require.NoError(t, err)
	errs := make(chan error, len(qs))
	for j := range qs {
		go func() {
			got, err := ix.Search(ctx, qs[j], 7)
			if err == nil && fmt.Sprint(got) != fmt.Sprint(want[j]) {
				err = fmt.Errorf("query %d: %v, want %v", j, got, want[j])
			}
			errs <- err
		}()
	}
	for range qs {
		require.NoError(t, <-errs)
	}
}
