package packed

import (
	"fmt"
	"math"

	"github.com/umbravec/umbra/internal/growbuf"
)

// Mode says how rows are packed and what a row must be to be accepted.
type Mode struct {
	// Normalize scales every row to unit L2 norm (cosine). The norm is
	// summed in float64 in sumSquares's order, so a packed row is bit for
	// bit what Norm and a float64 scale give.
	Normalize bool
	// Check refuses a row of the wrong length or with a NaN or ±Inf
	// component; with RejectZero also a row whose components are all zero
	// (it has no direction under cosine).
	Check, RejectZero bool
}

// BadRow is why a checked append refused a row. Row counts from the first
// row of the call; nothing of the call is stored.
type BadRow struct {
	Row      int
	Len      int     // the row's length, when it is not Dim (WrongLen)
	WrongLen bool    // the row has Len components, not Dim
	Col      int     // the first non-finite component (NonFinite)
	Value    float32 // its value
	Zero     bool    // every component is zero and RejectZero is set
}

func (b *BadRow) Error() string {
	switch {
	case b.WrongLen:
		return fmt.Sprintf("row %d has %d components", b.Row, b.Len)
	case b.Zero:
		return fmt.Sprintf("row %d has norm 0", b.Row)
	}
	return fmt.Sprintf("row %d, component %d is %v", b.Row, b.Col, b.Value)
}

// Reserve makes room for n more rows without changing Rows: after it,
// appending up to n rows allocates nothing. A slab that must grow is
// reallocated once (Realloc), to what is needed plus a quarter of what is
// stored (none for an empty slab), never doubled: on the heap, appends of
// any size cost an amortised constant per row (each row is copied about
// four times over the slab's life) while the headroom stays within a
// quarter of the slab. A large slab moves into a reserved region, which
// it then fills in place, copying itself only each time it grows
// fourfold, and no memory is touched but the rows written (growbuf).
func (s *Slab) Reserve(n int) {
	need := (s.Rows + n) * s.Stride
	if need <= cap(s.Data) {
		return
	}
	extra := len(s.Data) / 4
	extra -= extra % s.Stride
	s.Realloc(len(s.Data), need+extra)
}

// Realloc moves the rows to new storage with room for at least capacity
// values, keeping the first used values of the old (len(Data) <= used <=
// cap(Data): rows packed past Rows and not yet committed move too);
// len(Data) is unchanged. The old storage is not freed (see Region).
func (s *Slab) Realloc(used, capacity int) {
	data, r := growbuf.Floats(len(s.Data), capacity)
	growbuf.Copy(data[:used], s.Data[:used])
	s.Data, s.mem = data, r
}

// Spare returns the storage of the n rows after the last one, reserving it
// first: rows packed there (PackRows) are not part of the slab until Commit.
func (s *Slab) Spare(n int) []float32 {
	s.Reserve(n)
	base := len(s.Data)
	return s.Data[base : base+n*s.Stride : base+n*s.Stride]
}

// Commit makes the n rows packed into Spare(n) part of the slab.
func (s *Slab) Commit(n int) {
	s.Data = s.Data[:len(s.Data)+n*s.Stride]
	s.Rows += n
}

// AppendRows packs vectors after the existing rows as m says. With m.Check
// the first bad row stops it with a *BadRow and the slab is left exactly
// as it was (rows written past Rows are not part of it). Each row is read
// once for its norm and checks and once more, from cache, to be written.
func (s *Slab) AppendRows(vectors [][]float32, m Mode) error {
	s.Reserve(len(vectors))
	base := len(s.Data)
	tail := s.Data[base : base+len(vectors)*s.Stride]
	if err := s.packRows(tail, len(vectors), func(i int) []float32 { return vectors[i] }, m); err != nil {
		return err
	}
	s.Data = s.Data[:base+len(tail)]
	s.Rows += len(vectors)
	return nil
}

// AppendFlatRows is AppendRows of n = len(data)/Dim rows given one after
// another in data, as read from a file. len(data) must be a multiple of Dim.
func (s *Slab) AppendFlatRows(data []float32, m Mode) error {
	d := s.Dim
	n := len(data) / d
	s.Reserve(n)
	base := len(s.Data)
	tail := s.Data[base : base+n*s.Stride]
	if err := s.packRows(tail, n, func(i int) []float32 { return data[i*d : (i+1)*d : (i+1)*d] }, m); err != nil {
		return err
	}
	s.Data = s.Data[:base+len(tail)]
	s.Rows += n
	return nil
}

// CanAdopt reports whether Adopt can take n rows' storage as the slab's
// own: the slab is empty and its rows need no padding.
func (s *Slab) CanAdopt() bool { return s.Rows == 0 && s.Stride == s.Dim }

// Adopt makes data (whole rows, packed in place by PackRows: dst and
// source the same slice) the slab's storage, when CanAdopt. Nothing is
// copied; the caller gives data up.
func (s *Slab) Adopt(data []float32) {
	n := len(data) / s.Stride
	s.Data, s.Rows, s.mem = data[:n*s.Stride:n*s.Stride], n, nil
}

// PackRows packs n rows, row(i) for i < n, into dst (n*Stride values) as m
// says, without touching the slab's rows: Upsert packs replaced rows aside
// first so a bad one changes nothing.
//
// Packing in place — row(i) the very storage of row i in dst, which needs
// Stride == Dim — is allowed: each value is read before it is written.
func (s *Slab) PackRows(dst []float32, n int, row func(i int) []float32, m Mode) error {
	return s.packRows(dst[:n*s.Stride], n, row, m)
}

// CheckRows checks n rows, row(i) for i < n, as PackRows with m would,
// writing nothing, and returns each row's scale under m.Normalize (1/norm,
// the very factor PackRows would use; nil otherwise): a write that must not
// start before every row is known good checks first, then writes with
// SetRowsScaled.
func (s *Slab) CheckRows(n int, row func(i int) []float32, m Mode) ([]float64, error) {
	if !m.Check && !m.Normalize {
		return nil, nil
	}
	d := s.Dim
	var inv []float64
	if m.Normalize {
		inv = make([]float64, n)
	}
	for i := range n {
		v := row(i)
		if len(v) != d {
			return nil, &BadRow{Row: i, WrongLen: true, Len: len(v)}
		}
		sum := sumSquares(v)
		if err := checkSum(sum, v, 0, m); err != nil {
			err.(*BadRow).Row += i
			return nil, err
		}
		if inv != nil {
			inv[i] = InvNorm(sum)
		}
	}
	return inv, nil
}

// SetRowsScaled writes row(j) into the slab's row rows[j], in place,
// scaled by inv[j] as CheckRows returned it (nil: as it is), and zeroes
// the padding: PackRows for rows already checked, bit for bit.
func (s *Slab) SetRowsScaled(rows []int, row func(j int) []float32, inv []float64) {
	for j, r := range rows {
		dst, v := s.PaddedRow(r), row(j)[:s.Dim]
		if inv != nil {
			scale(dst, v, inv[j])
		} else {
			copy(dst, v)
			clear(dst[s.Dim:])
		}
	}
}

func (s *Slab) packRows(dst []float32, n int, row func(i int) []float32, m Mode) error {
	d, st := s.Dim, s.Stride
	for i := range n {
		v := row(i)
		if m.Check && len(v) != d {
			return &BadRow{Row: i, WrongLen: true, Len: len(v)}
		}
		out := dst[i*st : (i+1)*st]
		var err error
		if m.Normalize {
			err = packNormalized(out, v[:d], m)
		} else {
			err = packPlain(out, v[:d], m)
		}
		if err != nil {
			err.(*BadRow).Row += i
			return err
		}
	}
	return nil
}

// packNormalized packs one row scaled to unit norm. Its sum of squares is
// the only check needed on the way (see sumSquares); the row is read once
// for it and once more, from cache, to be written.
func packNormalized(out, v []float32, m Mode) error {
	sum := sumSquares(v)
	if err := checkSum(sum, v, 0, m); err != nil {
		return err
	}
	scale(out, v, InvNorm(sum))
	return nil
}

// checkSum turns a row's sum of squares into its refusal, if any.
func checkSum(sum float64, v []float32, g int, m Mode) error {
	if !m.Check {
		return nil
	}
	if math.IsInf(sum, 0) || math.IsNaN(sum) {
		return nonFinite(v, g)
	}
	if sum == 0 && m.RejectZero {
		return &BadRow{Row: g, Zero: true}
	}
	return nil
}

// scale writes v*inv (each product taken in float64 and rounded once to
// float32, as Normalized does) into row, then zeroes row's padding. row is
// exactly one padded row.
func scale(row, v []float32, inv float64) {
	scaleValues(row[:len(v)], v, inv)
	clear(row[len(v):])
}

// scaleGo is the portable scale loop, and what the assembly must match.
func scaleGo(dst, v []float32, inv float64) {
	dst = dst[:len(v)]
	for j, x := range v {
		dst[j] = float32(float64(x) * inv)
	}
}

// packPlain packs one row as it is, checked first by its sum of squares
// (see sumSquares), which the vector unit takes faster than a scan of the
// bits; the copy then reads the row from cache.
func packPlain(out, v []float32, m Mode) error {
	if m.Check {
		if err := checkSum(sumSquares(v), v, 0, m); err != nil {
			return err
		}
	}
	copy(out, v)
	clear(out[len(v):])
	return nil
}

// nonFinite names the first NaN or ±Inf component of v, row g.
func nonFinite(v []float32, g int) error {
	for j, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return &BadRow{Row: g, Col: j, Value: x}
		}
	}
	panic("packed: a row reported non-finite holds no NaN or Inf")
}
