package exact

import (
	"context"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/fallback"
	"github.com/umbravec/umbra/internal/gpuplan"
	"github.com/umbravec/umbra/internal/parallel"
	"github.com/umbravec/umbra/internal/topk"
)

// Compressed rows scanned by a device. A GPU holds only the codes (the
// words below) and returns, for every row and query, the raw sum the CPU
// kernels would compute: for Int8 the very same integer (an exact int32
// sum, without the offset of 128 the VNNI layout adds), for F16 a float32
// sum of the same products in some other order. The host then runs the
// scan's bounds and rescore on those sums, so a device's answer is
// certified by the same argument as the CPU's (quant_bounds.go), with two
// widenings for F16 sums a device computes:
//
//   - WGSL and Vulkan round float32 additions and multiplications
//     correctly, so Higham's γ bound holds for the device's order as for
//     any, but they may flush subnormal inputs, products and partial sums
//     to zero: at most 2^-112 a step for a flushed query component (times a
//     code below 2^14) and 2^-126 a step otherwise, covered by
//     (m+1)·2^-110 in raw units.
//   - unpack2x16float may flush subnormal halves (below 2^-14) to zero:
//     |q·(x̂ − x̂')| ≤ ‖q‖·√m·2^-14 in raw units.
//
// Both are added to the absolute term of the float16 half-width (abs16,
// which the row's scale multiplies).

// Words returns c's codes as the words a device reads, four bytes each,
// as float32 elements carrying their bits (no arithmetic may touch them):
// Int8 four codes a word, F16 two halves a word, Stride/4 or Stride/2
// words a row. The slice aliases c's storage.
func (c *Compressed) Words() []float32 {
	n := c.Rows * c.WordsPerRow()
	if n == 0 {
		return nil
	}
	if c.Prec == core.Int8 {
		return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(c.U8))), n)
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(c.F16))), n)
}

// WordsPerRow is how many four-byte words one compressed row takes.
func (c *Compressed) WordsPerRow() int {
	if c.Prec == core.Int8 {
		return c.Stride / 4
	}
	return c.Stride / 2
}

// DeviceQuery returns what a device's scan of c's codes reads for query q
// (as ExactSearchBatch takes it: Dim or the slab's stride long), as
// float32 elements: F16, the float32 query padded to c.Stride; Int8, the
// query's int8 codes (those the CPU scan uses), four a word, Stride/4
// words.
func DeviceQuery(c *Compressed, q []float32) []float32 {
	qq := newQuantQuery(c, q, core.Dot)
	if c.Prec != core.Int8 {
		return qq.qf
	}
	out := make([]float32, c.Stride/4)
	for w := range out {
		var u uint32
		for b := range 4 {
			u |= uint32(uint8(qq.q8[4*w+b])) << (8 * b)
		}
		out[w] = math.Float32frombits(u)
	}
	return out
}

// DeviceSums are the raw sums a device computed for the first Rows rows of
// a Compressed, for every query: query j's sum for row i at Sums[j*Rows+i],
// an F16 float32 or an Int8 int32 by its bits. Rows past Rows (the rows a
// device does not hold) are summed on the CPU.
type DeviceSums struct {
	Sums []float32
	Rows int
}

func (d DeviceSums) check(s fallback.Slab, nq int) error {
	if d.Rows < 0 || d.Rows > s.Rows || len(d.Sums) != nq*d.Rows {
		return fmt.Errorf("%w: %d device sums of %d rows for %d queries over %d rows", fallback.ErrSlabShape, len(d.Sums), d.Rows, nq, s.Rows)
	}
	return nil
}

// forDevice widens qq's float16 bound for sums a device computed (above).
func (qq *quantQuery) forDevice(c *Compressed) {
	if c.Prec == core.F16 {
		qq.abs16 += float64(c.Stride+1)*0x1p-110 + math.Sqrt(float64(c.Stride))*0x1p-14*qq.qn
	}
}

// sums fills raw with query j's raw sums for rows [lo, lo+len(raw)): the
// device's below d.Rows, the CPU kernels' from there on.
func (d DeviceSums) sums(qq *quantQuery, c *Compressed, j, lo int, raw []float64) {
	n := len(raw)
	dev := max(0, min(n, d.Rows-lo))
	src := d.Sums[j*d.Rows:]
	for i := range dev {
		v := src[lo+i]
		if c.Prec == core.Int8 {
			raw[i] = float64(int32(math.Float32bits(v))) + float64(qq.off)
		} else {
			raw[i] = float64(v)
		}
	}
	if dev == n {
		return
	}
	from := lo + dev
	rest := raw[dev:]
	if c.Prec == core.Int8 {
		buf := make([]int32, len(rest))
		activeQuant.Load().i8Rows(buf, qq.q8, c.U8[from*c.Stride:(from+len(rest))*c.Stride], c.Stride)
		for i, v := range buf {
			rest[i] = float64(v)
		}
		return
	}
	buf := make([]float32, len(rest))
	activeQuant.Load().f16Rows(buf, qq.qf, c.F16[from*c.Stride:(from+len(rest))*c.Stride], c.Stride)
	for i, v := range buf {
		rest[i] = float64(v)
	}
}

// sums32 is sums for Int8 rows as the CPU kernel's int32 sums (the
// offset of 128 included: below 65,536 × 127 × 255 < 2^31).
func (d DeviceSums) sums32(qq *quantQuery, c *Compressed, j, lo int, dst []int32) {
	n := len(dst)
	dev := max(0, min(n, d.Rows-lo))
	src := d.Sums[j*d.Rows:]
	off := int32(qq.off)
	for i := range dev {
		dst[i] = int32(math.Float32bits(src[lo+i])) + off
	}
	if dev < n {
		from := lo + dev
		activeQuant.Load().i8Rows(dst[dev:], qq.q8, c.U8[from*c.Stride:(from+n-dev)*c.Stride], c.Stride)
	}
}

// sumsF16 is sums for F16 rows as float32 sums.
func (d DeviceSums) sumsF16(qq *quantQuery, c *Compressed, j, lo int, dst []float32) {
	n := len(dst)
	dev := max(0, min(n, d.Rows-lo))
	if dev > 0 {
		copy(dst[:dev], d.Sums[j*d.Rows+lo:])
	}
	if dev < n {
		from := lo + dev
		activeQuant.Load().f16Rows(dst[dev:], qq.qf, c.F16[from*c.Stride:(from+n-dev)*c.Stride], c.Stride)
	}
}

// ExactSearchSums is ExactSearchBatch with the compressed scan's sums
// taken from a device (d) for the rows it holds: the same bounds, the same
// rescore in float32 on the host, hence the same answer. scans is how many
// times the device read the codes (for st.BytesRead).
func ExactSearchSums(ctx context.Context, s fallback.Slab, c *Compressed, qs [][]float32, d DeviceSums, scans, k int, m core.Metric, workers int, approximate bool) (out [][]core.Hit, st QuantStats, err error) {
	defer parallel.Recover(&err)
	qqs, err := quantQueries(s, c, qs, m)
	if err != nil {
		return nil, st, err
	}
	nq := len(qs)
	if err := d.check(s, nq); err != nil {
		return nil, st, err
	}
	for _, qq := range qqs {
		qq.forDevice(c)
	}
	st.Queries = nq
	if s.Rows == 0 || k <= 0 || nq == 0 {
		return gpuplan.EmptyLists(nq), st, nil
	}
	const blockRows = 4096
	nblocks := (s.Rows + blockRows - 1) / blockRows
	items := nq * nblocks
	w := parallel.Workers(workers, items, s.Rows*nq*4)
	tops := make([][]topk.Heap, w)
	cands := make([][][]candidate, w)
	raws := make([][]float64, w)
	for i := range tops {
		raws[i] = make([]float64, blockRows)
		tops[i] = make([]topk.Heap, nq)
		cands[i] = make([][]candidate, nq)
		for j := range tops[i] {
			tops[i][j] = topk.New(k, s.Rows/w+blockRows, s.IDs)
		}
	}
	// Under Dot the CPU batch's filters run on the sums (scanI8Dot on
	// int8's integers, scanF16Dot on float16's float32 sums), with each
	// block's bound maxima computed once.
	filter := m != core.L2 && !approximate && (c.Prec == core.Int8 || f16Filter)
	i8dot := filter && c.Prec == core.Int8
	var amax, hmax, smax []float64
	var i32s [][]int32
	var f32s [][]float32
	if filter {
		amax, hmax, smax = make([]float64, nblocks), make([]float64, nblocks), make([]float64, nblocks)
		for b := range nblocks {
			lo := b * blockRows
			n := min(blockRows, s.Rows-lo)
			amax[b], hmax[b] = blockMaxima(c, lo, n, qqs[0].g32)
			smax[b] = float64(slices.Max(c.Scale[lo : lo+n]))
		}
		i32s, f32s = make([][]int32, w), make([][]float32, w)
		for i := range i32s {
			i32s[i], f32s[i] = make([]int32, blockRows), make([]float32, blockRows)
		}
	}
	err = parallel.Run(ctx, w, items, func(wk, it int) {
		j := it / nblocks
		b := it % nblocks
		lo := b * blockRows
		n := min(blockRows, s.Rows-lo)
		if i8dot {
			buf := i32s[wk][:n]
			d.sums32(qqs[j], c, j, lo, buf)
			scanI8Dot(qqs[j], c, buf, lo, s.Allow, &tops[wk][j], &cands[wk][j], amax[b], hmax[b])
			return
		}
		if filter {
			buf := f32s[wk][:n]
			d.sumsF16(qqs[j], c, j, lo, buf)
			scanF16Dot(qqs[j], c, buf, lo, s.Allow, &tops[wk][j], &cands[wk][j], amax[b], hmax[b], smax[b])
			return
		}
		raw := raws[wk][:n]
		d.sums(qqs[j], c, j, lo, raw)
		scanBlock(qqs[j], c, raw, lo, s.Allow, &tops[wk][j], &cands[wk][j], approximate)
	})
	if err != nil {
		return nil, st, err
	}
	// The device's reads of the codes, the host's of the per-row values
	// and of the codes past the device's rows.
	devBytes := CompressedBytes(c.Prec, c.Dim, d.Rows) - 16*int64(d.Rows)
	st.BytesRead = int64(scans)*devBytes + int64(nq)*(c.Bytes()-devBytes)
	out, err = finishQuant(ctx, s, qqs, tops, cands, k, m, workers, approximate, &st)
	return out, st, err
}

// ExactRangeSums is ExactRange with the compressed scan's sums taken from
// a device (d, one query) for the rows it holds.
func ExactRangeSums(ctx context.Context, s fallback.Slab, c *Compressed, q []float32, d DeviceSums, threshold float32, m core.Metric, workers int) (hits []core.Hit, st QuantStats, err error) {
	defer parallel.Recover(&err)
	qp, err := fallback.CheckQuery(s, q, m)
	if err != nil {
		return nil, st, err
	}
	if err := c.check(s); err != nil {
		return nil, st, err
	}
	if err := d.check(s, 1); err != nil {
		return nil, st, err
	}
	st.Queries = 1
	if s.Rows == 0 {
		return []core.Hit{}, st, nil
	}
	qq := newQuantQuery(c, qp, m)
	qq.forDevice(c)
	limit := topk.Key(m, threshold)
	raw := make([]float64, s.Rows)
	d.sums(qq, c, 0, 0, raw)
	rows := rangeCandidates(qq, c, raw, 0, s.Allow, limit, nil)
	hits, err = rescoreWithin(ctx, s, c, qq, rows, limit, m, workers, &st)
	return hits, st, err
}
