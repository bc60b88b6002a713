package engine_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/diag"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/host"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestWriteTrace: a traced write records its stages — Pack, Assign and
// Compress making up Marshal exactly, Upload on a GPU, Log with a store,
// Publish — and the rows it stored, for Add, AddFlat and Upsert (new and
// replaced rows), with and without a store and a compressed precision.
func TestWriteTrace(t *testing.T) {
	r := testkit.Rand(t)
	const dim, n = 24, 300
	flat := make([]float32, n*dim)
	for i := range flat {
		flat[i] = r.Float32()*2 - 1
	}
	vectors := make([][]float32, n)
	for i := range vectors {
		vectors[i] = flat[i*dim : (i+1)*dim]
	}
	for _, b := range backends {
		for _, prec := range []umbra.Precision{umbra.F32, umbra.Int8} {
			t.Run(b.name+"/"+prec.String(), func(t *testing.T) {
				ctx := context.Background()
				ix := open(t, b, engine.Config{Dim: dim, Precision: prec})
				stages := func(tr *diag.Trace, rows int, what string) {
					t.Helper()
					require.Equal(t, int64(rows), tr.Rows, what)
					require.Positive(t, tr.Pack, what)
					require.Equal(t, tr.Pack+tr.Assign+tr.Compress, tr.Marshal, "%s: Marshal is its stages", what)
					require.Positive(t, tr.Publish, what)
					if prec != umbra.F32 {
						require.Positive(t, tr.Compress, what)
					} else {
						require.Zero(t, tr.Compress, what)
					}
					if b.device == engine.GPU {
						require.Positive(t, tr.Upload, what)
					} else {
						require.Zero(t, tr.Upload, what)
					}
				}
				var tr diag.Trace
				_, err := ix.Add(diag.WithTrace(ctx, &tr), umbra.Flat(flat[:100*dim], ix.Dim()))
				require.NoError(t, err)
				stages(&tr, 100, "AddFlat")
				require.Zero(t, tr.Log, "no store, no log")

				tr = diag.Trace{}
				_, err = ix.Add(diag.WithTrace(ctx, &tr), umbra.Vectors(vectors[100:200]))
				require.NoError(t, err)
				stages(&tr, 100, "Add")

				// A streamed import: reading the source is part of Pack.
				npy := filepath.Join(t.TempDir(), "rows.npy")
				require.NoError(t, host.WriteMatrixFile(npy, &host.Matrix{Rows: 50, Dim: dim, Data: flat[200*dim : 250*dim]}, ""))
				src, err := host.OpenMatrixFile(ctx, npy)
				require.NoError(t, err)
				tr = diag.Trace{}
				_, err = ix.Add(diag.WithTrace(ctx, &tr), src)
				require.NoError(t, err)
				require.NoError(t, src.Close())
				stages(&tr, 50, "AddFrom")

				path := filepath.Join(t.TempDir(), "s.umbra")
				require.NoError(t, ix.Save(ctx, path))
				require.NoError(t, ix.Close())
				st, err := engine.Open(ctx, path, engine.Config{Device: b.device, Adapters: []engine.AdapterSelect{b.adapter}})
				require.NoError(t, err)
				defer st.Close()

				// Upsert: 100 stored IDs replaced, 50 new.
				ids := make([]uint64, 150)
				for i := range ids {
					ids[i] = uint64(150 + i)
				}
				tr = diag.Trace{}
				require.NoError(t, testkit.ErrOf(st.Upsert(diag.WithTrace(ctx, &tr), umbra.Vectors(vectors[150:300]), umbra.WithIDs(ids...))))
				stages(&tr, 150, "Upsert")
				require.Positive(t, tr.Log, "Upsert with a store")

				tr = diag.Trace{}
				_, err = st.Add(diag.WithTrace(ctx, &tr), umbra.Flat(flat[:dim], st.Dim()))
				require.NoError(t, err)
				stages(&tr, 1, "AddFlat with a store")
				require.Positive(t, tr.Log, "AddFlat with a store")
				require.Equal(t, 301, st.Len())
			})
		}
	}
}
