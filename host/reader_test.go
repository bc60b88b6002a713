package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

// readRowsInPieces reads every row of r with ReadRows into pieces of at
// most per rows, checking that each call gives whole rows.
func readRowsInPieces(t *testing.T, r *MatrixReader, per int) ([]float32, error) {
	t.Helper()
	var out []float32
	buf := make([]float32, per*r.Dim()+r.Dim()-1) // room for per rows, not per+1
	for {
		k, err := r.ReadRows(buf)
		if k < 0 || k > per {
			t.Fatalf("ReadRows into room for %d rows gave %d", per, k)
		}
		out = append(out, buf[:k*r.Dim()]...)
		if errors.Is(err, io.EOF) {
			require.Zero(t, k)
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		require.Positive(t, k, "no rows and no error")
	}
}

// TestMatrixReaderMatchesReadMatrixFile: for every format, row counts
// around the 1 MiB piece, and any number of rows per ReadRows, a
// MatrixReader gives the rows ReadMatrixFile gives, bit for bit, knows
// their count, and ends with io.EOF (again on every later call).
func TestMatrixReaderMatchesReadMatrixFile(t *testing.T) {
	rng := testkit.Rand(t)
	dir := t.TempDir()
	for _, dim := range []int{1, 7, 768} {
		for _, rows := range []int{0, 1, 5, (1<<20)/(4*dim) + 3} {
			m := wideMatrix(rng, rows, dim)
			files := map[string][]byte{}
			var npy, npy16 bytes.Buffer
			require.NoError(t, writeNPY(&npy, m, "<f4"))
			require.NoError(t, writeNPY(&npy16, m, "<f2"))
			files["f32.npy"], files["f16.npy"] = npy.Bytes(), npy16.Bytes()
			if rows > 0 {
				files["x.fvecs"] = fvecsBytes(dim, m.Data)
				vals := make([]uint8, len(m.Data))
				for i := range vals {
					vals[i] = uint8(rng.Uint32())
				}
				files["x.bvecs"] = vecsRecords(dim, vals, appendU8)
			}
			for name, b := range files {
				path := filepath.Join(dir, fmt.Sprintf("%d-%d-%s", dim, rows, name))
				require.NoError(t, os.WriteFile(path, b, 0o644))
				want, err := ReadMatrixFile(context.Background(), path)
				require.NoError(t, err)
				for _, per := range []int{1, 3, 1000} {
					r, err := OpenMatrixFile(context.Background(), path)
					require.NoError(t, err)
					require.Equal(t, dim, r.Dim())
					require.Equal(t, rows, r.Rows(), path)
					got, err := readRowsInPieces(t, r, per)
					require.NoError(t, err)
					assertSameBits(t, want.Data, got)
					k, err := r.ReadRows(make([]float32, dim))
					assert.Zero(t, k)
					assert.ErrorIs(t, err, io.EOF)
					require.NoError(t, r.Close())
					_, err = r.ReadRows(make([]float32, dim))
					assert.Error(t, err, "read after Close")
				}
			}
		}
	}
}

// TestMatrixReaderErrors: what ReadMatrixFile refuses, a MatrixReader
// refuses with the same error, at Open (a header, a lying shape) or from
// ReadRows (a short record, trailing bytes), which then repeats it; a
// dst with no room for a row is an error, not a silent zero.
func TestMatrixReaderErrors(t *testing.T) {
	rng := testkit.Rand(t)
	dir := t.TempDir()
	m := wideMatrix(rng, 40, 5)
	var npy bytes.Buffer
	require.NoError(t, writeNPY(&npy, m, "<f4"))
	good := npy.Bytes()
	vecs := fvecsBytes(5, m.Data)
	for _, c := range []struct {
		name   string
		b      []byte
		atOpen bool
	}{
		{"short.npy", good[:len(good)-3], true},
		{"lying.npy", append(numpyNPYBytes(1, "<f4", []int64{1 << 30, 5}), good[128:]...), true},
		{"big-endian.npy", append(numpyNPYBytes(1, ">f4", []int64{40, 5}), good[128:]...), true},
		{"3d.npy", append(numpyNPYBytes(1, "<f4", []int64{4, 2, 5}), good[128:]...), true},
		{"trailing.npy", append(append([]byte(nil), good...), 0), false},
		{"short.fvecs", vecs[:len(vecs)-1], false},
		{"dims.fvecs", append(append([]byte(nil), vecs...), fvecsBytes(4, m.Data[:4])...), false},
		{"empty.fvecs", nil, true},
		{"x.ivecs", vecs, true},
		{"x.txt", vecs, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name)
			require.NoError(t, os.WriteFile(path, c.b, 0o644))
			_, want := ReadMatrixFile(context.Background(), path)
			require.ErrorIs(t, want, ErrFormat)
			require.Contains(t, want.Error(), path)
			r, err := OpenMatrixFile(context.Background(), path)
			if c.atOpen {
				require.Equal(t, want, err)
				return
			}
			require.NoError(t, err)
			defer r.Close()
			_, err = readRowsInPieces(t, r, 7)
			require.Equal(t, want.Error(), err.Error())
			_, again := r.ReadRows(make([]float32, 5))
			require.Equal(t, err, again)
		})
	}
	path := filepath.Join(dir, "ok.npy")
	require.NoError(t, os.WriteFile(path, good, 0o644))
	r, err := OpenMatrixFile(context.Background(), path)
	require.NoError(t, err)
	defer r.Close()
	_, err = r.ReadRows(make([]float32, 4))
	require.ErrorContains(t, err, "room for one row")
	k, err := r.ReadRows(make([]float32, 5))
	require.NoError(t, err, "a refused call reads nothing")
	assert.Equal(t, 1, k)
}

// TestMatrixReaderCancel: a cancelled context stops a reader between
// pieces with the context's error, wrapped with the path.
func TestMatrixReaderCancel(t *testing.T) {
	rng := testkit.Rand(t)
	m := wideMatrix(rng, 3000, 256) // 3 MiB
	path := filepath.Join(t.TempDir(), "big.npy")
	require.NoError(t, WriteMatrixFile(path, m, ""))
	ctx, cancel := context.WithCancel(context.Background())
	r, err := OpenMatrixFile(ctx, path)
	require.NoError(t, err)
	defer r.Close()
	buf := make([]float32, 1500*256)
	_, err = r.ReadRows(buf)
	require.NoError(t, err)
	cancel()
	_, err = r.ReadRows(buf)
	require.ErrorIs(t, err, context.Canceled)
	require.Contains(t, err.Error(), path)
}
