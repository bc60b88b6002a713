package exact

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/umbravec/umbra/internal/core"
	"github.com/umbravec/umbra/internal/testkit"
)

// f32dev is float32 arithmetic as a WGSL device may do it: every +, −, ×
// rounded to either neighbour of the exact result (WGSL's "correctly
// rounded"), sqrt within 2 ULP, and, with ftz, subnormal inputs and
// results flushed to zero. The choices are random, so many rows meet
// many roundings.
type f32dev struct {
	r   *rand.Rand
	ftz bool
}

func (d *f32dev) flush(f float32) float32 {
	if d.ftz && f != 0 && math.Abs(float64(f)) < 0x1p-126 {
		return float32(math.Copysign(0, float64(f)))
	}
	return f
}

func (d *f32dev) round(x float64) float32 {
	f := float32(x)
	if float64(f) != x && d.r.IntN(2) == 0 {
		if float64(f) < x {
			f = math.Nextafter32(f, float32(math.Inf(1)))
		} else {
			f = math.Nextafter32(f, float32(math.Inf(-1)))
		}
	}
	return d.flush(f)
}

func (d *f32dev) add(a, b float32) float32 { return d.round(float64(d.flush(a)) + float64(d.flush(b))) }
func (d *f32dev) sub(a, b float32) float32 { return d.round(float64(d.flush(a)) - float64(d.flush(b))) }
func (d *f32dev) mul(a, b float32) float32 { return d.round(float64(d.flush(a)) * float64(d.flush(b))) }
func (d *f32dev) sqrt(a float32) float32 {
	f := float32(math.Sqrt(float64(d.flush(a))))
	for range d.r.IntN(5) - 2 + 2 { // up to two steps either way
		if d.r.IntN(2) == 0 {
			f = math.Nextafter32(f, 0)
		} else {
			f = math.Nextafter32(f, float32(math.Inf(1)))
		}
	}
	return d.flush(max(f, 0))
}

// bound is qbounds.wgsl's bound, step for step, in d's arithmetic.
func (d *f32dev) bound(c []float32, x [4]float32, bits uint32, int8, l2 bool) (lo, hi float32, ok bool) {
	s, xn, e, hat2 := x[0], x[1], x[2], x[3]
	var raw float32
	if int8 {
		raw = d.round(float64(int32(bits)))
	} else {
		raw = d.flush(math.Float32frombits(bits))
	}
	abs := func(v float32) float32 { return float32(math.Abs(float64(v))) }
	if !(s >= 0 && s < 0x1p62 && abs(raw) < 0x1p126 && xn >= 0 && xn < 0x1p60 && e >= 0 && e < 0x1p60 && hat2 >= 0 && hat2 < 0x1p110) {
		return 0, 0, false
	}
	sb := math.Float32bits(s)
	if sb&0x7f800000 == 0 && sb != 0 {
		return 0, 0, false
	}
	if !(d.mul(s, d.mul(abs(raw), 0x1p-64)) < d.mul(c[6], 0x1p-64)) {
		return 0, 0, false
	}
	a := c[0]
	dot := d.mul(a, d.mul(s, raw))
	flushed := d.mul(a, d.mul(s, 0x1p-126))
	hn := d.add(xn, e)
	const margin, floor = 0x1p-16, 0x1p-120
	if l2 {
		r := d.add(c[8], hn)
		if !(r < 0x1p49) {
			return 0, 0, false
		}
		half := d.add(d.add(d.mul(c[9], hn), d.mul(c[10], s)), flushed)
		slack := d.add(d.add(d.mul(2, half), d.mul(0x1p-22, d.mul(hn, hn))), d.mul(0x1p-30, d.mul(r, r)))
		d2 := d.add(d.sub(c[7], d.mul(2, dot)), hat2)
		mag := d.add(d.add(d.add(c[7], d.mul(2, abs(dot))), hat2), slack)
		w := d.add(d.add(slack, d.mul(margin, mag)), floor)
		up := d.add(d2, w)
		dn := d.sub(d2, w)
		rhi := d.mul(d.add(d.mul(d.sqrt(max(up, floor)), 1+0x1p-18), e), 1+0x1p-18)
		rlo := d.mul(max(d.sub(d.mul(d.sqrt(max(dn, 0)), 1-0x1p-18), e), 0), 1-0x1p-18)
		shi := d.add(d.mul(d.mul(rhi, rhi), c[11]), c[13])
		slo := d.sub(d.mul(d.mul(rlo, rlo), c[12]), c[13])
		return -shi, -slo, true
	}
	if !(hn < c[5]) {
		return 0, 0, false
	}
	w := d.add(d.add(d.add(d.add(d.mul(c[1], e), d.mul(c[2], xn)), d.mul(c[3], s)), c[4]), flushed)
	slack := d.add(d.add(w, d.mul(margin, d.add(abs(dot), w))), floor)
	return d.sub(dot, slack), d.add(dot, slack), true
}

// TestDeviceBoundsContainHost checks qbounds.wgsl's arithmetic, emulated
// with adversarial float32 rounding (with and without flushing
// subnormals), against the host's keyBounds for every row: a row the
// device bounds must be one the host bounds, with lo' ≤ lo and hi' ≥ hi.
// That is what makes the device's candidates a superset of the rows the
// host rescores. Data: ordinary rows, duplicates, tiny magnitudes (down
// into float32's subnormals) and huge ones (past the host's 2^100 limit
// for some pairs).
func TestDeviceBoundsContainHost(t *testing.T) {
	r := testkit.Rand(t)
	dev := &f32dev{r: r}
	for _, prec := range []core.Precision{core.F16, core.Int8} {
		for _, m := range []core.Metric{core.Dot, core.Cosine, core.L2} {
			for _, kind := range []string{"normal", "dups", "tiny", "huge"} {
				dim := 3 + r.IntN(60)
				rows := testkit.Vectors(r, 600, dim)
				for i, v := range rows {
					var s float64
					switch kind {
					case "dups":
						copy(v, rows[i%5])
						continue
					case "tiny":
						s = math.Ldexp(1, -(40 + r.IntN(100)))
					case "huge":
						s = math.Ldexp(1, r.IntN(60))
					default:
						s = math.Ldexp(1, r.IntN(20)-10)
					}
					for j := range v {
						v[j] = float32(float64(v[j]) * s)
					}
				}
				c, err := NewCompressed(prec, dim)
				noErr(t, err)
				c.Append(rows)
				s := newSlab(rows, dim, dim, false)
				qs := testkit.Vectors(r, 6, dim)
				for j, q := range qs {
					sc := math.Ldexp(1, []int{0, -30, -70, 20, 50, -120}[j])
					for i := range q {
						q[i] = float32(float64(q[i]) * sc)
					}
				}
				coefs, ok, err := DeviceBoundCoefs(s, c, qs, m)
				noErr(t, err)
				qqs, err := quantQueries(s, c, qs, m)
				noErr(t, err)
				raw := make([]float64, c.Rows)
				bounded := 0
				for j, qq := range qqs {
					qq.forDevice(c)
					if !ok[j] {
						continue
					}
					DeviceSums{}.sums(qq, c, 0, 0, raw)
					for i := range c.Rows {
						var bits uint32
						if prec == core.Int8 {
							bits = uint32(int32(raw[i] - float64(qq.off)))
						} else {
							bits = math.Float32bits(float32(raw[i]))
						}
						lo, hi, _ := qq.keyBounds(c, i, raw[i])
						x := [4]float32(DeviceRowData(c, i, i+1))
						for _, ftz := range []bool{false, true} {
							dev.ftz = ftz
							dlo, dhi, dok := dev.bound(coefs[j], x, bits, prec == core.Int8, m == core.L2)
							what := fmt.Sprintf("%v %v %s query %d row %d ftz %v: host [%g, %g] device [%g, %g] %v", prec, m, kind, j, i, ftz, lo, hi, dlo, dhi, dok)
							if !dok {
								continue
							}
							bounded++
							if math.IsInf(float64(lo), -1) && math.IsInf(float64(hi), 1) {
								t.Fatalf("%s: the device bounds a row the host does not", what)
							}
							if !(dlo <= lo) || !(dhi >= hi) {
								t.Fatalf("%s: the device's interval does not contain the host's", what)
							}
						}
					}
				}
				if kind == "normal" && bounded == 0 {
					t.Fatalf("%v %v: no row was bounded", prec, m)
				}
			}
		}
	}
}

// ExactSearchCands refuses candidates it cannot trust: a row past the
// device's rows, a list per query missing, or fewer rows than k (τ would
// be unknown).
func TestExactSearchCandsRefuses(t *testing.T) {
	r := testkit.Rand(t)
	rows := testkit.Vectors(r, 50, 8)
	c, err := NewCompressed(core.Int8, 8)
	noErr(t, err)
	c.Append(rows)
	s := newSlab(rows, 8, 8, false)
	qs := testkit.Vectors(r, 1, 8)
	ctx := t.Context()
	_, _, err = ExactSearchCands(ctx, s, c, qs, DeviceCands{Cands: [][]DeviceCand{{{Row: 40}}}, Rows: 40}, 1, 2, 1, core.Dot, 1)
	if err == nil {
		t.Fatal("a candidate past the device's rows was taken")
	}
	_, _, err = ExactSearchCands(ctx, s, c, qs, DeviceCands{Rows: 40}, 1, 2, 1, core.Dot, 1)
	if err == nil {
		t.Fatal("a missing list was taken")
	}
	_, _, err = ExactSearchCands(ctx, s, c, qs, DeviceCands{Cands: [][]DeviceCand{{{Row: 1}}}, Rows: 50}, 1, 2, 3, core.Dot, 1)
	if err == nil {
		t.Fatal("one candidate for k = 3 was taken")
	}
	_, _, err = ExactRangeCands(ctx, s, c, qs[0], []DeviceCand{{Row: 45}}, 40, 1, 2, 0, core.Dot, 1)
	if err == nil {
		t.Fatal("a range candidate past the device's rows was taken")
	}
	_, _, err = ExactRangeCands(ctx, s, c, qs[0], nil, 51, 1, 2, 0, core.Dot, 1)
	if err == nil {
		t.Fatal("more device rows than rows were taken")
	}
	// With the rows past the device's on the CPU, one candidate and ten
	// more rows make k = 3 possible.
	got, _, err := ExactSearchCands(ctx, s, c, qs, DeviceCands{Cands: [][]DeviceCand{{{Row: 1, Raw: 0}}}, Rows: 40}, 1, 2, 3, core.Dot, 1)
	noErr(t, err)
	if len(got[0]) != 3 {
		t.Fatalf("got %d hits", len(got[0]))
	}
}
