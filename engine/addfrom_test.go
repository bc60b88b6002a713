package engine_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/host"
	"github.com/umbravec/umbra/internal/testkit"
)

// importFormat writes a random matrix as one kind of vector file.
type importFormat struct {
	name, ext string
	write     func(t *testing.T, path string, m *host.Matrix)
}

var importFormats = []importFormat{
	{"npy-f32", ".npy", func(t *testing.T, path string, m *host.Matrix) {
		require.NoError(t, host.WriteMatrixFile(path, m, "<f4"))
	}},
	{"npy-f16", ".npy", func(t *testing.T, path string, m *host.Matrix) {
		require.NoError(t, host.WriteMatrixFile(path, m, "<f2"))
	}},
	{"fvecs", ".fvecs", func(t *testing.T, path string, m *host.Matrix) {
		require.NoError(t, host.WriteMatrixFile(path, m, ""))
	}},
	{"bvecs", ".bvecs", func(t *testing.T, path string, m *host.Matrix) {
		var b []byte
		for i := range m.Rows {
			b = binary.LittleEndian.AppendUint32(b, uint32(m.Dim))
			for _, v := range m.Row(i) {
				b = append(b, byte(int(math.Abs(float64(v))*255)))
			}
		}
		require.NoError(t, os.WriteFile(path, b, 0o644))
	}},
}

// randomMatrix is testkit's random matrix as a host.Matrix whose first
// column is at least 0.5, so that no row is zero even as bytes.
func randomMatrix(r *rand.Rand, n, dim int) *host.Matrix {
	m := &host.Matrix{Rows: n, Dim: dim, Data: testkit.Matrix(r, n, dim)}
	for i := range n {
		m.Data[i*dim] = 0.5 + r.Float32() // never a zero row, even as bytes
	}
	return m
}

// requireSameIndex requires a and b to hold the same IDs with bit-equal
// rows and to answer qs with the same hits.
func requireSameIndex(t *testing.T, a, b *engine.Index, qs [][]float32, what string) {
	t.Helper()
	ctx := context.Background()
	require.Equal(t, a.IDs(), b.IDs(), what)
	for _, id := range a.IDs() {
		va, err := a.Vector(id)
		require.NoError(t, err)
		vb, err := b.Vector(id)
		require.NoError(t, err)
		for j := range va {
			if math.Float32bits(va[j]) != math.Float32bits(vb[j]) {
				t.Fatalf("%s: ID %d component %d: %v vs %v", what, id, j, va[j], vb[j])
			}
		}
	}
	if len(qs) == 0 || a.Len() == 0 {
		return
	}
	k := min(10, a.Len())
	ha, err := a.SearchBatch(ctx, qs, k)
	require.NoError(t, err)
	hb, err := b.SearchBatch(ctx, qs, k)
	require.NoError(t, err)
	require.Equal(t, ha, hb, what)
}

// shyRows hides its source's row count (as a pipe would) and, with small
// set, gives at most 3 rows per ReadRows.
type shyRows struct {
	umbra.RowSource
	hide, small bool
}

func (s shyRows) Rows() int {
	if s.hide {
		return -1
	}
	return s.RowSource.Rows()
}

func (s shyRows) ReadRows(dst []float32) (int, error) {
	if s.small {
		dst = dst[:min(len(dst), 3*s.Dim())]
	}
	return s.RowSource.ReadRows(dst)
}

// TestAddFromEqualsAddFlat: a file streamed into an index with AddFrom
// leaves it exactly as ReadMatrixFile then AddFlat does (IDs, stored rows
// bit for bit, answers), for every format, dims with and without padding,
// row counts that are not whole pieces, into an empty index and one that
// holds rows, with one worker or several, whether the source tells its
// row count or not.
func TestAddFromEqualsAddFlat(t *testing.T) {
	testkit.RaceDeferred(t)
	r := testkit.Rand(t)
	ctx := context.Background()
	dir := t.TempDir()
	for _, dim := range []int{7, 13, 768} {
		// Past one piece (1 MiB of padded rows per packing worker), not a
		// whole number of them.
		piece := (1 << 20) / (4 * ((dim + 3) &^ 3))
		n := 2*piece + 1 + r.IntN(piece-1)
		for fi, f := range importFormats {
			m := randomMatrix(r, n, dim)
			path := filepath.Join(dir, fmt.Sprintf("%s-%d%s", f.name, dim, f.ext))
			f.write(t, path, m)
			want, err := host.ReadMatrixFile(ctx, path)
			require.NoError(t, err)
			qs := testkit.Vectors(r, 3, dim)
			for i, metric := range metrics {
				workers := []int{1, 2, 3}[i%3]
				modes := []shyRows{{}, {hide: true}, {small: true}}
				if !testkit.Full() {
					// The README's test command: one mode for each
					// metric, turning with the format, so each format
					// meets every mode and every metric; UMBRA_FULL=1
					// (CI) runs every mode with every metric.
					modes = modes[(i+fi)%3 : (i+fi)%3+1]
				}
				for _, mode := range modes {
					what := fmt.Sprintf("%s dim %d n %d %s workers %d hide %v small %v", f.name, dim, n, metric, workers, mode.hide, mode.small)
					cfg := engine.Config{Dim: dim, Metric: metric, Workers: workers}
					ref := open(t, backends[0], cfg)
					got := open(t, backends[0], cfg)
					// Half the time both already hold rows.
					if r.IntN(2) == 0 {
						pre := randomMatrix(r, 1+r.IntN(50), dim)
						_, err := ref.Add(ctx, umbra.Flat(pre.Data, ref.Dim()))
						require.NoError(t, err)
						_, err = got.Add(ctx, umbra.Flat(pre.Data, got.Dim()))
						require.NoError(t, err)
					}
					wantIDs, err := ref.Add(ctx, umbra.Flat(want.Data, ref.Dim()))
					require.NoError(t, err)
					src, err := host.OpenMatrixFile(ctx, path)
					require.NoError(t, err)
					require.Equal(t, dim, src.Dim())
					require.Equal(t, n, src.Rows())
					mode.RowSource = src
					gotIDs, err := got.Add(ctx, mode)
					require.NoError(t, err, what)
					require.NoError(t, src.Close())
					require.Equal(t, wantIDs, gotIDs, what)
					requireSameIndex(t, ref, got, qs, what)
					ref.Close()
					got.Close()
				}
			}
		}
	}
}

// TestAddFromRefusesBadRows: a NaN, an infinity, or (under cosine) a zero
// row in the middle of the file fails AddFrom naming the row and column as
// AddFlat does, and leaves the index and its store as they were, after a
// reopen too.
func TestAddFromRefusesBadRows(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	const dim = 13
	dir := t.TempDir()
	n := 70_000 + r.IntN(1000)
	for _, bad := range []string{"nan", "inf", "zero"} {
		t.Run(bad, func(t *testing.T) {
			m := randomMatrix(r, n, dim)
			row := n/2 + r.IntN(n/2)
			col := r.IntN(dim)
			var want string
			var sentinel error
			switch bad {
			case "nan", "inf":
				v := float32(math.NaN())
				if bad == "inf" {
					v = float32(math.Inf(1))
				}
				m.Data[row*dim+col] = v
				want, sentinel = fmt.Sprintf("vector %d, component %d is %v", row, col, v), umbra.ErrNonFinite
			case "zero":
				clear(m.Data[row*dim : (row+1)*dim])
				want, sentinel = fmt.Sprintf("vector %d has norm 0", row), umbra.ErrZeroVector
			}
			data := filepath.Join(dir, bad+".npy")
			require.NoError(t, host.WriteMatrixFile(data, m, ""))
			// The same error as AddFlat's.
			ref := open(t, backends[0], engine.Config{Dim: dim})
			_, flatErr := ref.Add(ctx, umbra.Flat(m.Data, ref.Dim()))
			require.ErrorIs(t, flatErr, sentinel)

			store := filepath.Join(dir, bad+".umbra")
			ix, err := engine.Open(ctx, store, engine.Config{Dim: dim, Device: engine.CPU})
			require.NoError(t, err)
			pre := randomMatrix(r, 20, dim)
			_, err = ix.Add(ctx, umbra.Flat(pre.Data, ix.Dim()))
			require.NoError(t, err)
			keep := open(t, backends[0], engine.Config{Dim: dim})
			_, err = keep.Add(ctx, umbra.Flat(pre.Data, keep.Dim()))
			require.NoError(t, err)

			src, err := host.OpenMatrixFile(ctx, data)
			require.NoError(t, err)
			defer src.Close()
			_, err = ix.Add(ctx, src)
			require.ErrorIs(t, err, sentinel)
			require.Contains(t, err.Error(), want)
			require.Equal(t, flatErr.Error(), err.Error())
			qs := testkit.Vectors(r, 2, dim)
			requireSameIndex(t, keep, ix, qs, "after the refused AddFrom")
			// Nothing was logged: the reopened store holds what it held.
			require.NoError(t, ix.Close())
			again, err := engine.Open(ctx, store, engine.Config{Device: engine.CPU})
			require.NoError(t, err)
			defer again.Close()
			requireSameIndex(t, keep, again, qs, "reopened")
		})
	}
}

// TestAddFromFileErrors: a truncated payload, a header that claims more
// rows than the file holds, a short last record and trailing bytes are
// errors naming the file, from OpenMatrixFile or from AddFrom, and the
// index holds nothing of them. A big-endian .npy is refused as
// ReadMatrixFile refuses it.
func TestAddFromFileErrors(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	const dim = 7
	dir := t.TempDir()
	n := 40_000 + r.IntN(1000)
	m := randomMatrix(r, n, dim)
	good := filepath.Join(dir, "good.npy")
	require.NoError(t, host.WriteMatrixFile(good, m, ""))
	raw, err := os.ReadFile(good)
	require.NoError(t, err)
	goodVecs := filepath.Join(dir, "good.fvecs")
	require.NoError(t, host.WriteMatrixFile(goodVecs, m, ""))
	rawVecs, err := os.ReadFile(goodVecs)
	require.NoError(t, err)
	header := len(raw) - n*dim*4
	hdr := string(raw[:header])
	claim := fmt.Sprintf("(%d, %d)", n, dim)
	require.Contains(t, hdr, claim)
	lyingHdr := replaceOnce(hdr, claim, fmt.Sprintf("(%d, %d)", n*1000, dim))
	require.Len(t, lyingHdr, header, "the bigger shape fits the header's padding")
	lying := append([]byte(lyingHdr), raw[header:]...)
	bigEndian := append([]byte(replaceOnce(hdr, "'<f4'", "'>f4'")), raw[header:]...)
	cases := []struct {
		name, ext string
		bytes     []byte
		want      string
	}{
		{"truncated", ".npy", raw[:len(raw)-4*dim-2], "payload truncated"},
		{"lying header", ".npy", lying, "payload truncated"},
		{"trailing bytes", ".npy", append(append([]byte(nil), raw...), 1, 2, 3), "3 bytes of trailing data"},
		{"big-endian", ".npy", bigEndian, "'>f4'"},
		{"short record", ".fvecs", rawVecs[:len(rawVecs)-3], fmt.Sprintf("vector %d truncated", n-1)},
		{"odd record", ".fvecs", append(append([]byte(nil), rawVecs...), 7, 0, 0, 0, 1), fmt.Sprintf("vector %d truncated", n)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "bad"+c.ext)
			require.NoError(t, os.WriteFile(path, c.bytes, 0o644))
			_, readErr := host.ReadMatrixFile(ctx, path)
			require.ErrorIs(t, readErr, host.ErrFormat)
			require.Contains(t, readErr.Error(), c.want)
			require.Contains(t, readErr.Error(), fmt.Sprintf("%q", path))
			ix := open(t, backends[0], engine.Config{Dim: dim})
			src, err := host.OpenMatrixFile(ctx, path)
			if err == nil {
				defer src.Close()
				_, err = ix.Add(ctx, src)
				require.ErrorIs(t, err, umbra.ErrSource)
			}
			require.ErrorIs(t, err, host.ErrFormat)
			require.Contains(t, err.Error(), readErr.Error())
			require.Equal(t, 0, ix.Len())
		})
	}
}

func replaceOnce(s, old, new string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			out := s[:i] + new + s[i+len(old):]
			// Keep the header's length: take spaces from its padding.
			for extra := len(new) - len(old); extra > 0; extra-- {
				j := len(out) - 2 // before the final '\n'
				if out[j] != ' ' {
					break
				}
				out = out[:j] + out[j+1:]
			}
			return out
		}
	}
	return s
}

// failingRows is a source that cancels a context or fails after some
// rows, or announces another row count than it gives.
type failingRows struct {
	dim, rows, announce int
	r                   *rand.Rand
	at                  int // rows given so far
	failAt              int // rows after which ReadRows fails (or cancels); -1 never
	err                 error
	cancel              context.CancelFunc
}

func (f *failingRows) Dim() int  { return f.dim }
func (f *failingRows) Rows() int { return f.announce }
func (f *failingRows) ReadRows(dst []float32) (int, error) {
	if f.failAt >= 0 && f.at >= f.failAt {
		if f.cancel != nil {
			f.cancel()
		} else {
			return 0, f.err
		}
	}
	k := min(len(dst)/f.dim, f.rows-f.at)
	if f.failAt >= 0 && f.failAt > f.at {
		k = min(k, f.failAt-f.at)
	}
	if k == 0 {
		return 0, io.EOF
	}
	for i := range dst[:k*f.dim] {
		dst[i] = f.r.Float32() + 0.1
	}
	f.at += k
	return k, nil
}

// TestAddFromFailingSource: a source that fails part-way, a context
// cancelled part-way, and a source that gives fewer or more rows than it
// announced leave the index (and its store) unchanged.
func TestAddFromFailingSource(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	const dim = 16
	boom := errors.New("disk on fire")
	n := 100_000 + r.IntN(1000)
	for _, c := range []struct {
		name     string
		announce int
		rows     int
		failAt   int
		cancel   bool
		want     []error
	}{
		{"fails", n, n, n/2 + r.IntN(n/2), false, []error{umbra.ErrSource, boom}},
		{"fails, count unknown", -1, n, n/2 + r.IntN(n/2), false, []error{umbra.ErrSource, boom}},
		{"cancelled", n, n, n / 2, true, []error{context.Canceled}},
		{"cancelled, count unknown", -1, n, n / 2, true, []error{context.Canceled}},
		{"fewer rows", n + 5, n, -1, false, []error{umbra.ErrSource}},
		{"more rows", n - 5, n, -1, false, []error{umbra.ErrSource}},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "s.umbra")
			ix, err := engine.Open(ctx, store, engine.Config{Dim: dim, Device: engine.CPU, Workers: 1 + r.IntN(3)})
			require.NoError(t, err)
			pre := randomMatrix(r, 10, dim)
			_, err = ix.Add(ctx, umbra.Flat(pre.Data, ix.Dim()))
			require.NoError(t, err)
			keep := open(t, backends[0], engine.Config{Dim: dim})
			_, err = keep.Add(ctx, umbra.Flat(pre.Data, keep.Dim()))
			require.NoError(t, err)
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			src := &failingRows{dim: dim, rows: c.rows, announce: c.announce, r: r, failAt: c.failAt, err: boom}
			if c.cancel {
				src.cancel = cancel
			}
			var reports [][2]int
			pctx := engine.WithProgress(cctx, func(stage string, done, total int) {
				reports = append(reports, [2]int{done, total})
			})
			_, err = ix.Add(pctx, src)
			require.Error(t, err)
			for _, w := range c.want {
				require.ErrorIs(t, err, w)
			}
			if c.failAt > 0 {
				require.NotEmpty(t, reports, "progress before the failure")
				require.Equal(t, c.announce, reports[0][1])
			}
			qs := testkit.Vectors(r, 2, dim)
			requireSameIndex(t, keep, ix, qs, c.name)
			require.NoError(t, ix.Close())
			again, err := engine.Open(ctx, store, engine.Config{Device: engine.CPU})
			require.NoError(t, err)
			defer again.Close()
			requireSameIndex(t, keep, again, qs, c.name+", reopened")
		})
	}
}

// TestAddFromStore: AddFrom into a store logs what AddFlat logs: after a
// reopen (log replayed) and after a checkpoint, the store holds what a
// store given AddFlat holds, and the progress reports count up to every
// row.
func TestAddFromStore(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	dir := t.TempDir()
	for _, dim := range []int{13, 64} {
		n := 20_000 + r.IntN(20_000)
		m := randomMatrix(r, n, dim)
		data := filepath.Join(dir, fmt.Sprintf("d%d.npy", dim))
		require.NoError(t, host.WriteMatrixFile(data, m, ""))
		a, b := filepath.Join(dir, fmt.Sprintf("a%d.umbra", dim)), filepath.Join(dir, fmt.Sprintf("b%d.umbra", dim))
		cfg := engine.Config{Dim: dim, Metric: umbra.Cosine, Device: engine.CPU}
		sa, err := engine.Open(ctx, a, cfg)
		require.NoError(t, err)
		sb, err := engine.Open(ctx, b, cfg)
		require.NoError(t, err)
		pre := randomMatrix(r, 30, dim)
		_, err = sa.Add(ctx, umbra.Flat(pre.Data, sa.Dim()))
		require.NoError(t, err)
		_, err = sb.Add(ctx, umbra.Flat(pre.Data, sb.Dim()))
		require.NoError(t, err)
		_, err = sa.Add(ctx, umbra.Flat(m.Data, sa.Dim()))
		require.NoError(t, err)
		src, err := host.OpenMatrixFile(ctx, data)
		require.NoError(t, err)
		var last [2]int
		calls := 0
		pctx := engine.WithProgress(ctx, func(stage string, done, total int) {
			require.Equal(t, "validate", stage)
			require.Greater(t, done, last[0])
			last, calls = [2]int{done, total}, calls+1
		})
		_, err = sb.Add(pctx, src)
		require.NoError(t, err)
		require.NoError(t, src.Close())
		require.Equal(t, [2]int{n, n}, last)
		require.Greater(t, calls, 1)
		qs := testkit.Vectors(r, 3, dim)
		requireSameIndex(t, sa, sb, qs, "open")
		require.NoError(t, sa.Close())
		require.NoError(t, sb.Close())
		for _, checkpoint := range []bool{false, true} {
			ra, err := engine.Open(ctx, a, engine.Config{Device: engine.CPU})
			require.NoError(t, err)
			rb, err := engine.Open(ctx, b, engine.Config{Device: engine.CPU})
			require.NoError(t, err)
			requireSameIndex(t, ra, rb, qs, fmt.Sprintf("reopened, checkpointed %v", checkpoint))
			if !checkpoint {
				require.NoError(t, ra.Checkpoint(ctx))
				require.NoError(t, rb.Checkpoint(ctx))
			}
			require.NoError(t, ra.Close())
			require.NoError(t, rb.Close())
		}
	}
}

// TestAddFromGPU: on each GPU backend an index given AddFrom answers
// exactly as a CPU index given AddFlat, with rows that need padding and
// rows that do not, across device chunks.
func TestAddFromGPU(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	dir := t.TempDir()
	for _, b := range backends[1:] {
		for _, dim := range []int{13, 768} {
			t.Run(fmt.Sprintf("%s/%d", b.name, dim), func(t *testing.T) {
				n := 3000 + r.IntN(1000)
				m := randomMatrix(r, n, dim)
				path := filepath.Join(dir, fmt.Sprintf("g%d.npy", dim))
				require.NoError(t, host.WriteMatrixFile(path, m, "<f2"))
				want, err := host.ReadMatrixFile(ctx, path)
				require.NoError(t, err)
				for _, metric := range metrics {
					cfg := engine.Config{Dim: dim, Metric: metric}
					ix := open(t, b, cfg, 1000)
					ref := open(t, backends[0], cfg)
					_, err = ref.Add(ctx, umbra.Flat(want.Data, ref.Dim()))
					require.NoError(t, err)
					src, err := host.OpenMatrixFile(ctx, path)
					require.NoError(t, err)
					_, err = ix.Add(ctx, src)
					require.NoError(t, err)
					require.NoError(t, src.Close())
					require.Equal(t, engine.GPU, ix.Info().Device)
					qs := testkit.Vectors(r, 4, dim)
					what := fmt.Sprintf("%s %s dim %d", b.name, metric, dim)
					if metric == umbra.L2 {
						requireSameAnswers(t, metric, ref, ix, qs, []int{1, 10, 100}, ref.IDs()[:n/2], 20, what)
						continue
					}
					for _, k := range []int{1, 10, 100} {
						want, err := ref.SearchBatch(ctx, qs, k)
						require.NoError(t, err)
						got, err := ix.SearchBatch(ctx, qs, k)
						require.NoError(t, err)
						for i := range qs {
							requireSameHits(t, metric, ref.Vector, qs[i], want[i], got[i], fmt.Sprintf("%s: k=%d query %d", what, k, i))
						}
					}
				}
			})
		}
	}
}

// TestAddFromCompressed: under F16 and Int8 the compressed copy is built
// from the streamed rows as from AddFlat's: the same answers.
func TestAddFromCompressed(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	dir := t.TempDir()
	const dim = 20
	n := 5000 + r.IntN(5000)
	m := randomMatrix(r, n, dim)
	path := filepath.Join(dir, "c.fvecs")
	require.NoError(t, host.WriteMatrixFile(path, m, ""))
	for _, prec := range []umbra.Precision{umbra.F16, umbra.Int8} {
		cfg := engine.Config{Dim: dim, Precision: prec, Metric: umbra.Dot}
		ref := open(t, backends[0], cfg)
		_, err := ref.Add(ctx, umbra.Flat(m.Data, ref.Dim()))
		require.NoError(t, err)
		got := open(t, backends[0], cfg)
		src, err := host.OpenMatrixFile(ctx, path)
		require.NoError(t, err)
		_, err = got.Add(ctx, src)
		require.NoError(t, err)
		require.NoError(t, src.Close())
		requireSameIndex(t, ref, got, testkit.Vectors(r, 5, dim), prec.String())
	}
}

// TestAddFromWithIDs: a file streamed in under the caller's IDs leaves the
// index as AddWithIDs of the same rows does, with the source's row count
// told or hidden; repeated, stored or miscounted IDs fail the call with
// its sentinel and store nothing, and with a store the refused call logs
// nothing either.
func TestAddFromWithIDs(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	const dim = 13
	n := 3_000 + r.IntN(3_000)
	dir, rows, qs, open := streamFixture(t, r, n, dim)
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(i)*7 + 1_000_000 // increasing
	}
	shuffled := slices.Clone(ids)
	r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for _, hide := range []bool{false, true} {
		for _, given := range [][]uint64{ids, shuffled} {
			want, err := engine.New(ctx, engine.Config{Dim: dim, Device: engine.CPU})
			require.NoError(t, err)
			require.NoError(t, testkit.ErrOf(want.Add(ctx, umbra.Vectors(rows), umbra.WithIDs(given...))))
			got, err := engine.New(ctx, engine.Config{Dim: dim, Device: engine.CPU})
			require.NoError(t, err)
			require.NoError(t, testkit.ErrOf(got.Add(ctx, shyRows{RowSource: open(t), hide: hide}, umbra.WithIDs(given...))))
			requireSameIndex(t, want, got, qs, fmt.Sprintf("hidden count %v", hide))

			// Stored already, repeated, too few, too many: refused, the
			// index unchanged.
			fresh := make([]uint64, n)
			for i := range fresh {
				fresh[i] = uint64(i) + 1
			}
			dup := slices.Clone(fresh)
			dup[n-1] = dup[0]
			for _, bad := range []struct {
				ids  []uint64
				want error
			}{
				{given, umbra.ErrIDExists},
				{dup, umbra.ErrDuplicateID},
				{fresh[:n-1], umbra.ErrIDCount},
				{append(slices.Clone(fresh), 1<<40), umbra.ErrIDCount},
			} {
				_, err := got.Add(ctx, shyRows{RowSource: open(t), hide: hide}, umbra.WithIDs(bad.ids...))
				require.ErrorIs(t, err, bad.want, "hidden count %v", hide)
				requireSameIndex(t, want, got, qs, fmt.Sprintf("after a refused call (%v)", bad.want))
			}
			require.NoError(t, want.Close())
			require.NoError(t, got.Close())
		}
	}

	// With a store: the refused call logs nothing, the good one is there
	// after reopening.
	path := filepath.Join(dir, "s.umbra")
	st, err := engine.Open(ctx, path, engine.Config{Dim: dim, Device: engine.CPU})
	require.NoError(t, err)
	require.ErrorIs(t, testkit.ErrOf(st.Add(ctx, shyRows{RowSource: open(t), hide: true}, umbra.WithIDs(ids[:n-1]...))), umbra.ErrIDCount)
	require.Zero(t, st.Len())
	require.NoError(t, testkit.ErrOf(st.Add(ctx, open(t), umbra.WithIDs(ids...))))
	require.NoError(t, st.Close())
	back, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
	require.NoError(t, err)
	defer back.Close()
	require.Equal(t, ids, back.IDs())
}

// TestAddFromWithKeys: a file streamed in under string keys leaves the
// index as AddKeys of the same rows does (IDs, rows, keys), with the
// source's row count told or hidden; repeated, stored or miscounted keys
// fail the call with its sentinel and store nothing; with a store the keys
// come back after reopening, from the log and after a checkpoint.
func TestAddFromWithKeys(t *testing.T) {
	r := testkit.Rand(t)
	ctx := context.Background()
	const dim = 9
	n := 2_000 + r.IntN(2_000)
	dir, rows, qs, open := streamFixture(t, r, n, dim)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("doc-%x-%d", r.Uint32(), i)
	}
	for _, hide := range []bool{false, true} {
		want, err := engine.New(ctx, engine.Config{Dim: dim, Device: engine.CPU})
		require.NoError(t, err)
		wantIDs, err := want.Add(ctx, umbra.Vectors(rows), umbra.WithKeys(keys...))
		require.NoError(t, err)
		got, err := engine.New(ctx, engine.Config{Dim: dim, Device: engine.CPU})
		require.NoError(t, err)
		gotIDs, err := got.Add(ctx, shyRows{RowSource: open(t), hide: hide}, umbra.WithKeys(keys...))
		require.NoError(t, err)
		require.Equal(t, wantIDs, gotIDs)
		requireSameIndex(t, want, got, qs, fmt.Sprintf("hidden count %v", hide))
		for _, i := range []int{0, n / 2, n - 1} {
			id, ok := got.Lookup(keys[i])
			require.True(t, ok, keys[i])
			require.Equal(t, gotIDs[i], id)
		}

		fresh := make([]string, n)
		for i := range fresh {
			fresh[i] = fmt.Sprintf("other-%d", i)
		}
		dup := slices.Clone(fresh)
		dup[n-1] = dup[0]
		for _, bad := range []struct {
			keys []string
			want error
		}{
			{keys, umbra.ErrKeyExists},
			{dup, umbra.ErrDuplicateID},
			{fresh[:n-1], umbra.ErrIDCount},
			{append(slices.Clone(fresh), "one-more"), umbra.ErrIDCount},
		} {
			_, err := got.Add(ctx, shyRows{RowSource: open(t), hide: hide}, umbra.WithKeys(bad.keys...))
			require.ErrorIs(t, err, bad.want, "hidden count %v", hide)
			requireSameIndex(t, want, got, qs, fmt.Sprintf("after a refused call (%v)", bad.want))
			_, ok := got.Lookup(fresh[0])
			require.False(t, ok, "a refused call named a row")
		}
		require.NoError(t, want.Close())
		require.NoError(t, got.Close())
	}

	path := filepath.Join(dir, "s.umbra")
	st, err := engine.Open(ctx, path, engine.Config{Dim: dim, Device: engine.CPU})
	require.NoError(t, err)
	_, err = st.Add(ctx, shyRows{RowSource: open(t), hide: true}, umbra.WithKeys(keys[:n-1]...))
	require.ErrorIs(t, err, umbra.ErrIDCount)
	ids, err := st.Add(ctx, open(t), umbra.WithKeys(keys...))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	for _, checkpoint := range []bool{false, true} {
		back, err := engine.Open(ctx, path, engine.Config{Device: engine.CPU})
		require.NoError(t, err)
		require.Equal(t, n, back.Len())
		for _, i := range []int{0, n / 3, n - 1} {
			id, ok := back.Lookup(keys[i])
			require.True(t, ok, "checkpointed %v: %s", checkpoint, keys[i])
			require.Equal(t, ids[i], id)
		}
		if !checkpoint {
			require.NoError(t, back.Checkpoint(ctx))
		}
		require.NoError(t, back.Close())
	}
}

// streamFixture writes n random rows of dim to a .npy in a temporary
// directory and returns the directory, the rows, three queries, and a
// function that opens the file as a RowSource closed when t ends.
func streamFixture(t *testing.T, r *rand.Rand, n, dim int) (string, [][]float32, [][]float32, func(*testing.T) umbra.RowSource) {
	t.Helper()
	dir := t.TempDir()
	m := randomMatrix(r, n, dim)
	data := filepath.Join(dir, "d.npy")
	require.NoError(t, host.WriteMatrixFile(data, m, ""))
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = m.Row(i)
	}
	open := func(t *testing.T) umbra.RowSource {
		src, err := host.OpenMatrixFile(context.Background(), data)
		require.NoError(t, err)
		t.Cleanup(func() { src.Close() })
		return src
	}
	return dir, rows, testkit.Vectors(r, 3, dim), open
}
