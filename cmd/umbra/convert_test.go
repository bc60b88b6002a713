package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/host"
	"github.com/umbravec/umbra/internal/float16"
	"github.com/umbravec/umbra/internal/testkit"
)

func readMatrix(t *testing.T, path string) *host.Matrix {
	t.Helper()
	m, err := host.ReadMatrixFile(context.Background(), path)
	require.NoError(t, err)
	return m
}

func convert(t *testing.T, args ...string) {
	t.Helper()
	r := runUmbra(t, append([]string{"convert"}, args...)...)
	require.Equal(t, exitOK, r.code, "%s", r)
	assert.Empty(t, r.stderr)
	assert.Contains(t, r.stdout, "wrote ")
}

func TestConvertRoundTrips(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	dir := t.TempDir()
	m := randomMatrix(rng, 53, 11)
	m.Data[7] = float32(math.NaN()) // convert copies values, it does not judge them
	m.Data[8] = float32(math.Inf(1))
	orig := writeMatrix(t, dir, "orig.npy", m, "")
	p := func(name string) string { return filepath.Join(dir, name) }

	t.Run("f32 npy to fvecs and back is byte-identical", func(t *testing.T) {
		convert(t, orig, p("a.fvecs"))
		convert(t, p("a.fvecs"), p("a.npy"), "--dtype", "f32")
		want, err := os.ReadFile(orig)
		require.NoError(t, err)
		got, err := os.ReadFile(p("a.npy"))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, got), "round trip changed the file")
		fv := readMatrix(t, p("a.fvecs"))
		assert.Equal(t, m.Rows, fv.Rows)
		assert.Equal(t, m.Dim, fv.Dim)
	})

	// f16 holds each value rounded to nearest even; every later conversion
	// keeps exactly those values.
	rounded := make([]float32, len(m.Data))
	for i, x := range m.Data {
		rounded[i] = float16.ToFloat32(float16.Bits(x))
	}
	sameBits := func(t *testing.T, want, got []float32) {
		t.Helper()
		require.Len(t, got, len(want))
		for i := range want {
			if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
				t.Fatalf("value %d: got %v, want %v", i, got[i], want[i])
			}
		}
	}
	t.Run("f32 npy to f16 npy", func(t *testing.T) {
		convert(t, orig, p("h.npy"), "--dtype", "f16")
		raw, err := os.ReadFile(p("h.npy"))
		require.NoError(t, err)
		assert.Contains(t, string(raw[:128]), "'<f2'")
		sameBits(t, rounded, readMatrix(t, p("h.npy")).Data)
	})
	t.Run("f16 npy to fvecs to f16 npy", func(t *testing.T) {
		convert(t, p("h.npy"), p("h.fvecs"))
		sameBits(t, rounded, readMatrix(t, p("h.fvecs")).Data)
		convert(t, "--dtype", "f16", p("h.fvecs"), p("h2.npy"))
		want, err := os.ReadFile(p("h.npy"))
		require.NoError(t, err)
		got, err := os.ReadFile(p("h2.npy"))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, got), "f16 round trip changed the file")
	})
	t.Run("in place", func(t *testing.T) {
		inPlace := writeMatrix(t, dir, "inplace.npy", m, "")
		convert(t, inPlace, inPlace, "--dtype", "f16")
		sameBits(t, rounded, readMatrix(t, inPlace).Data)
	})
	t.Run("upper-case extension", func(t *testing.T) {
		convert(t, orig, p("UP.FVECS"))
		sameBits(t, m.Data, readMatrix(t, p("UP.FVECS")).Data)
	})
}

func TestConvertFailures(t *testing.T) {
	t.Parallel()
	rng := testkit.Rand(t)
	dir := t.TempDir()
	m := randomMatrix(rng, 10, 4)
	m.Data[2*4+3] = 1e5
	big := writeMatrix(t, dir, "big.npy", m, "")

	r := runUmbra(t, "convert", big, filepath.Join(dir, "big16.npy"), "--dtype", "f16")
	require.Equal(t, exitFailure, r.code, "%s", r)
	line := requireErrorLine(t, r)
	assert.Contains(t, line, "row 2, column 3")
	assert.Contains(t, line, "65504")
	assert.NoFileExists(t, filepath.Join(dir, "big16.npy"))

	trunc := writeFile(t, dir, "trunc.npy", testkit.NPY("<f4", "(4, 4)", float32Bytes(m.Data[:10])))
	r = runUmbra(t, "convert", trunc, filepath.Join(dir, "out.fvecs"))
	require.Equal(t, exitFailure, r.code, "%s", r)
	assert.Contains(t, requireErrorLine(t, r), "trunc.npy")
	assert.NoFileExists(t, filepath.Join(dir, "out.fvecs"))

	r = runUmbra(t, "convert", big, filepath.Join(dir, "no-such-dir", "out.npy"))
	require.Equal(t, exitFailure, r.code, "%s", r)
	assert.Contains(t, requireErrorLine(t, r), "no-such-dir")
}

// TestConvertOutput: bvecs comes in; OUT keeps a 0600 mode, a symlink OUT
// keeps being a link to the new data, and no temporary file is left.
func TestConvertOutput(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("Unix modes and symlinks")
	}
	rng := testkit.Rand(t)
	dir := t.TempDir()
	const rows, dim = 9, 6
	var bvecs []byte
	want := make([]float32, 0, rows*dim)
	for range rows {
		bvecs = binary.LittleEndian.AppendUint32(bvecs, dim)
		for range dim {
			v := uint8(rng.Uint32())
			bvecs = append(bvecs, v)
			want = append(want, float32(v))
		}
	}
	in := writeFile(t, dir, "in.bvecs", bvecs)

	secret := filepath.Join(dir, "secret.npy")
	require.NoError(t, os.WriteFile(secret, []byte("old"), 0o600))
	link := filepath.Join(dir, "link.fvecs")
	require.NoError(t, os.Symlink("real.fvecs", link))

	convert(t, in, secret)
	fi, err := os.Stat(secret)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	assert.Equal(t, want, readMatrix(t, secret).Data)

	convert(t, in, link)
	fi, err = os.Lstat(link)
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&os.ModeSymlink, "OUT's symlink was replaced")
	assert.Equal(t, want, readMatrix(t, filepath.Join(dir, "real.fvecs")).Data)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"in.bvecs", "secret.npy", "link.fvecs", "real.fvecs"}, names)
}
