package metaindex

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/meta"
)

// The model test: an Index under random appends, sets, truncates and keeps
// is compared after every step with a plain slice of rows — Row, EncodedRow
// and Eval of random filters against a brute-force evaluator written
// independently of the index (exact numeric comparison through math/big).

// gen draws rows and filters from small pools so that values repeat.
type gen struct {
	r     *rand.Rand
	hot   int                  // the keyword value most rows take in this phase
	kinds map[string]meta.Kind // of fields beyond modelKinds
}

var (
	kwPool   = []string{"a", "b", "c", "", "é", "long-value"}
	tagPool  = []string{"red", "green", "blue", "", "x", "y", "z", "w"}
	intPool  = []int64{0, 1, -1, 2, 3, 7, 100, -100, math.MaxInt64, math.MinInt64, 1 << 53, 1<<53 + 1, -(1 << 53) - 1}
	fltPool  = []float64{0, 1, -1, 0.5, -0.5, 2.5, 3, 7, 1e300, -1e300, 5e-324, 9007199254740993, 9.223372036854775807e18, -9.223372036854775808e18}
	timePool = []int64{0, 1, -1, 1_700_000_000_000_000_000, 1_700_000_000_000_000_001, math.MaxInt64, math.MinInt64}
)

func (g *gen) pick(n int) int { return g.r.IntN(n) }

func (g *gen) keyword() string {
	if g.r.IntN(2) == 0 {
		return kwPool[g.hot]
	}
	return kwPool[g.pick(len(kwPool))]
}

func (g *gen) user() string { return fmt.Sprintf("u%d", g.pick(40)) }

func (g *gen) tags() []string {
	n := g.pick(4)
	t := make([]string, n)
	for i := range t {
		t[i] = tagPool[g.pick(len(tagPool))]
	}
	return t
}

func (g *gen) intv() int64 {
	if g.r.IntN(3) == 0 {
		return intPool[g.pick(len(intPool))]
	}
	return int64(g.pick(21) - 10)
}

func (g *gen) floatv() float64 {
	if g.r.IntN(3) == 0 {
		return fltPool[g.pick(len(fltPool))]
	}
	return float64(g.pick(41)-20) / 4
}

func (g *gen) timev() int64 {
	if g.r.IntN(3) == 0 {
		return timePool[g.pick(len(timePool))]
	}
	return 1_700_000_000_000_000_000 + int64(g.pick(21)-10)
}

// row draws one row's fields: each field of the fixed schema present with
// some probability; sometimes none at all.
func (g *gen) row() meta.Fields {
	if g.r.IntN(8) == 0 {
		return nil
	}
	f := meta.Fields{}
	if g.r.IntN(10) < 8 {
		f["kw"] = meta.KeywordOf(g.keyword())
	}
	if g.r.IntN(10) < 6 {
		f["user"] = meta.KeywordOf(g.user())
	}
	if g.r.IntN(10) < 6 {
		f["n"] = meta.IntOf(g.intv())
	}
	if g.r.IntN(10) < 6 {
		f["x"] = meta.FloatOf(g.floatv())
	}
	if g.r.IntN(10) < 5 {
		f["t"] = timeNanos(g.timev())
	}
	if g.r.IntN(10) < 5 {
		f["tags"] = meta.TagsOf(g.tags()...)
	}
	if g.r.IntN(20) == 0 {
		f["rare"] = meta.IntOf(g.intv())
	}
	return f
}

var modelKinds = map[string]meta.Kind{"kw": meta.Keyword, "user": meta.Keyword, "n": meta.Int, "x": meta.Float, "t": meta.Time, "tags": meta.Tags, "rare": meta.Int}

// operand draws a value to compare field (of kind k) with.
func (g *gen) operand(k meta.Kind) meta.Value {
	switch k {
	case meta.Keyword:
		if g.r.IntN(2) == 0 {
			return meta.KeywordOf(g.user())
		}
		return meta.KeywordOf(g.keyword())
	case meta.Int, meta.Float:
		if g.r.IntN(2) == 0 {
			return meta.IntOf(g.intv())
		}
		return meta.FloatOf(g.floatv())
	case meta.Time:
		return timeNanos(g.timev())
	}
	return meta.Value{}
}

func (g *gen) filter(depth int, names []string) meta.Filter {
	if depth > 0 && g.r.IntN(3) == 0 {
		switch g.pick(4) {
		case 0:
			return meta.Not(g.filter(depth-1, names))
		case 1:
			return meta.And(g.filter(depth-1, names), g.filter(depth-1, names))
		case 2:
			return meta.Or(g.filter(depth-1, names), g.filter(depth-1, names), g.filter(depth-1, names))
		default:
			return meta.And(g.filter(depth-1, names), meta.Or(g.filter(depth-1, names)))
		}
	}
	if g.r.IntN(40) == 0 || len(names) == 0 {
		return meta.Filter{}
	}
	field := names[g.pick(len(names))]
	k := modelKinds[field]
	if k == 0 {
		k = g.kinds[field]
	}
	if k == meta.Tags {
		tag := tagPool[g.pick(len(tagPool))]
		if g.r.IntN(2) == 0 {
			return meta.Contains(field, tag)
		}
		return meta.NotContains(field, tag)
	}
	var vs []meta.Value
	for range g.pick(4) {
		vs = append(vs, g.operand(k))
	}
	v := g.operand(k)
	ops := []func(string, meta.Value) meta.Filter{meta.Eq, meta.Ne}
	if k != meta.Keyword {
		ops = append(ops, meta.Gt, meta.Gte, meta.Lt, meta.Lte)
	}
	switch g.pick(len(ops) + 2) {
	case len(ops):
		return meta.In(field, vs...)
	case len(ops) + 1:
		return meta.Nin(field, vs...)
	default:
		return ops[g.pick(len(ops))](field, v)
	}
}

// --- the brute-force evaluator ---

func bigOf(v meta.Value) *big.Float {
	if v.Kind() == meta.Float {
		return new(big.Float).SetFloat64(v.Float())
	}
	return new(big.Float).SetInt64(intOf(v))
}

// cmpExact compares two ints, floats or times exactly.
func cmpExact(a, b meta.Value) int { return bigOf(a).Cmp(bigOf(b)) }

// match is the brute-force evaluator: f read through its Parts, apart
// from the index's own tree.
func match(f meta.Filter, row meta.Fields) bool {
	op, field, vals, subs := f.Parts()
	switch op {
	case "":
		return true
	case "$and":
		for _, s := range subs {
			if !match(s, row) {
				return false
			}
		}
		return true
	case "$or":
		for _, s := range subs {
			if match(s, row) {
				return true
			}
		}
		return false
	case "$not":
		return !match(subs[0], row)
	case "$ne":
		return !match(meta.Eq(field, vals[0]), row)
	case "$nin":
		return !match(meta.In(field, vals...), row)
	case "$not_contains":
		return !match(meta.Contains(field, vals[0].Str()), row)
	}
	v, ok := row[field]
	if !ok {
		return false
	}
	switch op {
	case "$contains":
		return slices.Contains(v.Tags(), vals[0].Str())
	case "$in":
		for _, w := range vals {
			if match(meta.Eq(field, w), row) {
				return true
			}
		}
		return false
	case "$eq":
		if v.Kind() == meta.Keyword {
			return v.Str() == vals[0].Str()
		}
		return cmpExact(v, vals[0]) == 0
	case "$gt":
		return cmpExact(v, vals[0]) > 0
	case "$gte":
		return cmpExact(v, vals[0]) >= 0
	case "$lt":
		return cmpExact(v, vals[0]) < 0
	case "$lte":
		return cmpExact(v, vals[0]) <= 0
	}
	panic("unknown operator " + op)
}

// checkModel compares x with the model rows.
func checkModel(t *testing.T, g *gen, x *Index, model []meta.Fields, step string) {
	t.Helper()
	require.Equal(t, len(model), x.Len(), step)
	for i, want := range model {
		got := x.Row(i)
		if !got.Equal(want) {
			t.Fatalf("%s: row %d: got %s, want %s", step, i, got, want)
		}
		require.Equal(t, AppendBinary(nil, want), x.EncodedRow(i), "%s: row %d", step, i)
	}
	checkPostings(t, x, step)
	var names []string
	g.kinds = x.Schema()
	for name := range g.kinds {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]uint64, words(len(model)))
	filters := make([]meta.Filter, 0, 12+len(names))
	for range 12 {
		filters = append(filters, g.filter(3, names))
	}
	// One equality per keyword field and one $contains per tags field,
	// the shapes Rows answers.
	for _, name := range names {
		switch g.kinds[name] {
		case meta.Keyword:
			filters = append(filters, meta.Eq(name, g.operand(meta.Keyword)))
		case meta.Tags:
			filters = append(filters, meta.Contains(name, g.operand(meta.Keyword).Str()))
		}
	}
	for _, f := range filters {
		p, err := x.Prepare(f)
		require.NoError(t, err, "%s: Prepare(%s)", step, f)
		if rows, ok := p.Rows(); ok {
			want := []uint32{}
			for i, row := range model {
				if match(f, row) {
					want = append(want, uint32(i))
				}
			}
			require.Equal(t, want, append([]uint32{}, rows...), "%s: Rows(%s)", step, f)
		}
		for i := range out { // garbage the Eval must overwrite
			out[i] = g.r.Uint64()
		}
		require.NoError(t, x.Eval(f, out), "%s: %s", step, f)
		for i, row := range model {
			want := match(f, row)
			got := out[i>>6]&(1<<(uint(i)&63)) != 0
			if got != want {
				t.Fatalf("%s: filter %s: row %d (%s): got %v, want %v", step, f, i, row, got, want)
			}
		}
		if r := len(model) & 63; r != 0 {
			require.Zero(t, out[len(out)-1]>>uint(r), "%s: bits past the last row", step)
		}
	}
}

// checkPostings verifies the internal invariants: each live code's posting
// holds exactly the rows whose value (or tags) has the code, sorted, with
// the right count; free codes are empty; counters match.
func checkPostings(t *testing.T, x *Index, step string) {
	t.Helper()
	for name, c := range x.cols {
		count := 0
		for r := range x.n {
			if c.present(r) {
				count++
			}
		}
		require.Equal(t, count, c.count, "%s: field %s count", step, name)
		require.LessOrEqual(t, len(c.has), words(x.n), "%s: field %s presence words", step, name)
		if c.kind != meta.Keyword && c.kind != meta.Tags {
			continue
		}
		want := make([][]uint32, len(c.posts))
		tagRefs := 0
		for r := range x.n {
			if !c.present(r) {
				continue
			}
			if c.kind == meta.Keyword {
				want[c.codes[r]] = append(want[c.codes[r]], uint32(r))
			} else {
				for _, code := range c.rowTags[r] {
					want[code] = append(want[code], uint32(r))
				}
				tagRefs += len(c.rowTags[r])
			}
		}
		require.Equal(t, tagRefs, c.tagRefs, "%s: field %s tag refs", step, name)
		var listLen, bitWords, strBytes int64
		for code := range c.posts {
			p := &c.posts[code]
			live := c.isLive(uint32(code))
			if !live {
				require.Zero(t, p.n, "%s: field %s: free code %d has rows", step, name, code)
				require.Empty(t, want[code])
				continue
			}
			strBytes += int64(len(c.vals[code]))
			got := p.rows
			if p.bits != nil {
				got = nil
				require.LessOrEqual(t, len(p.bits), words(x.n))
				for w, b := range p.bits {
					for b != 0 {
						got = append(got, uint32(w<<6|trailingZeros(b)))
						b &= b - 1
					}
				}
				bitWords += int64(len(p.bits))
			} else {
				listLen += int64(len(p.rows))
			}
			require.NotEmpty(t, want[code], "%s: field %s: live code %d (%q) without rows", step, name, code, c.vals[code])
			require.Equal(t, want[code], got, "%s: field %s value %q", step, name, c.vals[code])
			require.Equal(t, len(got), p.n)
		}
		require.Equal(t, listLen, c.listLen, "%s: field %s list entries", step, name)
		require.Equal(t, bitWords, c.bitWords, "%s: field %s bitmap words", step, name)
		require.Equal(t, strBytes, c.strBytes, "%s: field %s string bytes", step, name)
		require.Equal(t, len(c.posts)-len(c.free), len(c.dict), "%s: field %s dictionary", step, name)
	}
}

func TestIndexModel(t *testing.T) {
	r := testkit.Rand(t)
	g := &gen{r: r}
	x := NewIndex(meta.Limits{})
	var model []meta.Fields
	steps := 300
	if testing.Short() {
		steps = 120
	}
	var sawBits, sawList bool
	for step := range steps {
		if r.IntN(25) == 0 {
			g.hot = r.IntN(len(kwPool))
		}
		var name string
		switch op := r.IntN(20); {
		case op < 8 || len(model) == 0: // append a batch, sometimes a large one
			k := r.IntN(12)
			if r.IntN(10) == 0 {
				k = 200 + r.IntN(600)
			}
			rows := make([]meta.Fields, k)
			for i := range rows {
				rows[i] = g.row()
			}
			name = fmt.Sprintf("step %d: append %d", step, k)
			require.NoError(t, x.Check(rows, nil), name)
			require.NoError(t, x.Append(rows), name)
			for _, f := range rows {
				model = append(model, cloneFields(f))
			}
		case op < 14: // sets
			for range 1 + r.IntN(30) {
				i := r.IntN(len(model))
				f := g.row()
				require.NoError(t, x.Set(i, f))
				model[i] = cloneFields(f)
			}
			name = fmt.Sprintf("step %d: sets", step)
		case op < 16: // truncate
			n := len(model) - r.IntN(min(len(model), 40)+1)
			if r.IntN(8) == 0 {
				n = r.IntN(len(model) + 1)
			}
			require.NoError(t, x.Truncate(n))
			model = model[:n]
			name = fmt.Sprintf("step %d: truncate to %d", step, n)
		case op < 18: // keep
			var keep []int
			p := r.Float64()
			for i := range model {
				if r.Float64() < p || r.IntN(3) == 0 {
					keep = append(keep, i)
				}
			}
			require.NoError(t, x.Keep(keep))
			next := make([]meta.Fields, len(keep))
			for i, k := range keep {
				next[i] = model[k]
			}
			model = next
			name = fmt.Sprintf("step %d: keep %d", step, len(keep))
		default: // a refused write changes nothing
			if s := x.Schema(); s["n"] != meta.Int || s["tags"] != meta.Tags {
				// A field's kind is fixed by its first value: until the
				// index has seen n and tags, these writes are not refused.
				name = fmt.Sprintf("step %d: no refused writes yet", step)
				break
			}
			bad := []meta.Fields{g.row(), {"n": meta.KeywordOf("not an int")}}
			err := x.Append(bad)
			require.ErrorIs(t, err, meta.ErrInvalid)
			require.ErrorContains(t, err, `row 1: field "n"`)
			if len(model) > 0 {
				require.ErrorIs(t, x.Set(r.IntN(len(model)), meta.Fields{"tags": meta.KeywordOf("x")}), meta.ErrInvalid)
			}
			name = fmt.Sprintf("step %d: refused writes", step)
		}
		for _, c := range x.cols {
			for _, p := range c.posts {
				if p.n > 0 && p.bits != nil {
					sawBits = true
				}
				if p.n >= 16 && p.bits == nil {
					sawList = true
				}
			}
		}
		checkModel(t, g, x, model, name)
	}
	require.True(t, sawBits, "no posting ever became a bitmap: the test does not reach that path")
	require.True(t, sawList, "no large posting stayed a list")
	for k, want := range modelKinds {
		if got, ok := x.Schema()[k]; ok {
			require.Equal(t, want, got)
		}
	}
}

func cloneFields(f meta.Fields) meta.Fields {
	if len(f) == 0 {
		return nil
	}
	c := meta.Fields{}
	for k, v := range f {
		c[k] = v
	}
	return c
}

// TestIndexBitmapPostings drives one value's posting across the list and
// bitmap forms both ways (Set, Truncate, Keep) and checks it each time.
func TestIndexBitmapPostings(t *testing.T) {
	r := testkit.Rand(t)
	g := &gen{r: r}
	x := NewIndex(meta.Limits{})
	const n = 4096
	model := make([]meta.Fields, n)
	for i := range model {
		model[i] = meta.Fields{"kw": meta.KeywordOf(fmt.Sprintf("v%d", r.IntN(3)))}
		if r.IntN(400) == 0 {
			model[i]["kw"] = meta.KeywordOf("rare")
		}
	}
	require.NoError(t, x.Append(model))
	c := x.cols["kw"]
	require.NotNil(t, c.posts[c.dict["v0"]].bits, "a third of the rows: a bitmap")
	// Rows lists a rare value's rows, an absent one's (none), and leaves a
	// bitmap's to Eval.
	var rare []uint32
	for i, f := range model {
		if f["kw"].Str() == "rare" {
			rare = append(rare, uint32(i))
		}
	}
	rowsOf := func(f meta.Filter) ([]uint32, bool, error) {
		p, err := x.Prepare(f)
		if err != nil {
			return nil, false, err
		}
		rows, ok := p.Rows()
		return rows, ok, nil
	}
	rows, ok, err := rowsOf(meta.Eq("kw", meta.KeywordOf("rare")))
	require.NoError(t, err)
	require.True(t, ok, "a list posting")
	require.Equal(t, rare, append([]uint32(nil), rows...))
	rows, ok, err = rowsOf(meta.Eq("kw", meta.KeywordOf("absent")))
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, rows)
	_, ok, err = rowsOf(meta.Eq("kw", meta.KeywordOf("v0")))
	require.NoError(t, err)
	require.False(t, ok, "a bitmap posting")
	_, ok, err = rowsOf(meta.Ne("kw", meta.KeywordOf("rare")))
	require.NoError(t, err)
	require.False(t, ok, "not an equality")
	_, _, err = rowsOf(meta.Eq("nofield", meta.KeywordOf("rare")))
	require.Error(t, err, "Eval's error")
	// Move nearly all of v0 away: its bitmap must turn back into a list.
	for i, f := range model {
		if f["kw"].Str() == "v0" && r.IntN(100) != 0 {
			model[i] = meta.Fields{"kw": meta.KeywordOf("v1")}
			require.NoError(t, x.Set(i, model[i]))
		}
	}
	require.Nil(t, c.posts[c.dict["v0"]].bits, "under 1/128 of the rows: a list")
	checkModel(t, g, x, model, "after moving v0 away")
	// Bring it back row by row.
	for i := range model {
		if r.IntN(2) == 0 {
			model[i] = meta.Fields{"kw": meta.KeywordOf("v0")}
			require.NoError(t, x.Set(i, model[i]))
		}
	}
	require.NotNil(t, c.posts[c.dict["v0"]].bits)
	checkModel(t, g, x, model, "after moving v0 back")
	require.NoError(t, x.Truncate(1000))
	model = model[:1000]
	checkModel(t, g, x, model, "truncated")
	keep := []int{}
	for i := range model {
		if i%7 == 0 {
			keep = append(keep, i)
		}
	}
	require.NoError(t, x.Keep(keep))
	next := []meta.Fields{}
	for _, k := range keep {
		next = append(next, model[k])
	}
	checkModel(t, g, x, next, "kept")
	require.NoError(t, x.Truncate(0))
	checkModel(t, g, x, nil, "empty")
	require.Empty(t, x.cols["kw"].dict, "every value freed")
}

// TestIndexNumericEdges compares ints with floats and floats with ints at
// the edges of exactness (2^53, 2^63), where a plain conversion rounds.
func TestIndexNumericEdges(t *testing.T) {
	ints := []int64{math.MinInt64, math.MinInt64 + 1, -(1 << 53) - 1, -(1 << 53), -1, 0, 1, 1 << 53, 1<<53 + 1, 1<<53 + 2, math.MaxInt64 - 1, math.MaxInt64}
	floats := []float64{-math.MaxFloat64, -two63 * 2, -two63, -9007199254740994, -9007199254740992, -1.5, -5e-324, 0, 5e-324, 0.5, 1, 9007199254740992, 9007199254740994, two63, two63 * 2, math.MaxFloat64}
	x := NewIndex(meta.Limits{})
	var model []meta.Fields
	for _, i := range ints {
		model = append(model, meta.Fields{"i": meta.IntOf(i)})
	}
	for _, f := range floats {
		model = append(model, meta.Fields{"f": meta.FloatOf(f)})
	}
	model = append(model, nil)
	require.NoError(t, x.Append(model))
	var operands []meta.Value
	for _, i := range ints {
		operands = append(operands, meta.IntOf(i))
	}
	for _, f := range floats {
		for _, o := range []float64{f, math.Nextafter(f, 0), math.Nextafter(f, math.Inf(1))} {
			if !math.IsInf(o, 0) {
				operands = append(operands, meta.FloatOf(o))
			}
		}
	}
	operands = append(operands, meta.FloatOf(0.5), meta.FloatOf(-0.5), meta.FloatOf(math.Copysign(0, -1)))
	out := make([]uint64, words(len(model)))
	for _, field := range []string{"i", "f"} {
		for _, v := range operands {
			for _, mk := range []func(string, meta.Value) meta.Filter{meta.Eq, meta.Ne, meta.Gt, meta.Gte, meta.Lt, meta.Lte} {
				f := mk(field, v)
				require.NoError(t, x.Eval(f, out))
				for i, row := range model {
					want := match(f, row)
					got := out[i>>6]&(1<<(uint(i)&63)) != 0
					require.Equal(t, want, got, "filter %s on row %d %s", f, i, row)
				}
			}
		}
	}
}

// TestEvalErrors: unknown fields, operators that do not fit a kind, values
// of the wrong kind and a bitmap of the wrong size are errors naming them,
// and leave the bitmap as it was.
func TestEvalErrors(t *testing.T) {
	x := NewIndex(meta.Limits{})
	require.NoError(t, x.Append([]meta.Fields{{
		"user": meta.KeywordOf("ann"), "age": meta.IntOf(3), "price": meta.FloatOf(2.5),
		"at": meta.TimeOf(time.Unix(5, 0)), "tags": meta.TagsOf("a"),
	}}))
	out := []uint64{0xdead}
	cases := []struct {
		f    meta.Filter
		want string
	}{
		{meta.Eq("nope", meta.IntOf(1)), `unknown field "nope" (known: age, at, price, tags, user)`},
		{meta.Gt("user", meta.KeywordOf("a")), `$gt compares ints, floats and times; field "user" is keyword`},
		{meta.Eq("user", meta.IntOf(1)), `field "user" is keyword, but $eq is given the int value 1`},
		{meta.Eq("age", meta.KeywordOf("3")), `field "age" is int, but $eq is given the keyword value "3"`},
		{meta.Eq("at", meta.IntOf(5)), `field "at" is time, but $eq is given the int value 5`},
		{meta.Lt("price", meta.TimeOf(time.Unix(1, 0))), `field "price" is float, but $lt is given the time value`},
		{meta.Eq("tags", meta.KeywordOf("a")), `field "tags" is tags: it takes $contains or $not_contains, not $eq`},
		{meta.Contains("user", "a"), `$contains applies to tags fields; field "user" is keyword`},
		{meta.Eq("price", meta.FloatOf(math.NaN())), `field "price": $eq NaN is not finite`},
		{meta.Eq("age", meta.Value{}), `field "age": $eq has no value`},
		{meta.Eq("at", meta.TimeOf(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC))), `field "at": $eq time outside`},
		{meta.And(meta.Eq("age", meta.IntOf(3)), meta.Not(meta.Eq("zzz", meta.IntOf(3)))), `unknown field "zzz"`},
	}
	for _, c := range cases {
		err := x.Eval(c.f, out)
		require.ErrorIs(t, err, meta.ErrInvalid, c.f.String())
		require.ErrorContains(t, err, c.want)
		require.Equal(t, []uint64{0xdead}, out, "a refused filter leaves the bitmap alone")
	}
	require.ErrorIs(t, x.Eval(meta.Filter{}, make([]uint64, 2)), meta.ErrInvalid)
	require.NoError(t, x.Eval(meta.Eq("age", meta.FloatOf(3)), out))
	require.Equal(t, []uint64{1}, out, "a float operand on an int field compares numerically")
	require.NoError(t, x.Eval(meta.Gt("price", meta.IntOf(2)), out))
	require.Equal(t, []uint64{1}, out, "an int operand on a float field compares numerically")
	require.NoError(t, x.Eval(meta.Or(), out))
	require.Equal(t, []uint64{0}, out, "Or() matches nothing")
	require.NoError(t, x.Eval(meta.And(), out))
	require.Equal(t, []uint64{1}, out, "And() matches every row")
	require.NoError(t, x.Eval(meta.In("age"), out))
	require.Equal(t, []uint64{0}, out, "In with no values matches nothing")
	require.NoError(t, x.Eval(meta.Nin("age"), out))
	require.Equal(t, []uint64{1}, out, "Nin with no values matches every row")
}

// TestIndexCheckLimits: Check refuses what Append would refuse — kind
// conflicts inside a batch, distinct values over the cap, too many fields —
// naming the row and field, and neither changes anything.
func TestIndexCheckLimits(t *testing.T) {
	x := NewIndex(meta.Limits{MaxDistinct: 3, MaxSchema: 3})
	require.NoError(t, x.Append([]meta.Fields{{"k": meta.KeywordOf("a")}, {"k": meta.KeywordOf("b")}}))
	before := x.Bytes()

	err := x.Check([]meta.Fields{{"new": meta.IntOf(1)}, {"new": meta.FloatOf(1)}}, nil)
	require.ErrorIs(t, err, meta.ErrInvalid)
	require.ErrorContains(t, err, `row 1: field "new": float value, but the field is int (from row 0 of this batch)`)

	err = x.Check([]meta.Fields{{"k": meta.KeywordOf("c")}, {"k": meta.KeywordOf("a")}, {"k": meta.KeywordOf("d")}}, nil)
	require.ErrorIs(t, err, meta.ErrTooLarge)
	require.ErrorContains(t, err, `row 2: field "k": more than 3 distinct values`)
	require.ErrorIs(t, x.Append([]meta.Fields{{"k": meta.KeywordOf("c")}, {"k": meta.KeywordOf("d")}}), meta.ErrTooLarge)

	err = x.Check([]meta.Fields{{"f1": meta.IntOf(1)}, {"f2": meta.IntOf(1), "f3": meta.IntOf(1)}}, nil)
	require.ErrorIs(t, err, meta.ErrTooLarge)
	require.ErrorContains(t, err, `row 1: field "f3": a new field`)

	err = x.Check([]meta.Fields{{"k": meta.IntOf(1)}}, []int{1})
	require.ErrorContains(t, err, `row 0: field "k": int value, but the field is keyword (in the index)`)
	require.ErrorIs(t, x.Check([]meta.Fields{nil}, []int{2}), meta.ErrInvalid)
	require.ErrorIs(t, x.Check([]meta.Fields{nil}, nil), nil)
	require.ErrorIs(t, x.Set(5, nil), meta.ErrInvalid)

	require.Equal(t, 2, x.Len())
	require.Equal(t, before, x.Bytes())
	require.Equal(t, map[string]meta.Kind{"k": meta.Keyword}, x.Schema())
	require.True(t, x.Row(0).Equal(meta.Fields{"k": meta.KeywordOf("a")}))

	require.ErrorIs(t, x.Keep([]int{1, 0}), meta.ErrInvalid)
	require.ErrorIs(t, x.Keep([]int{0, 2}), meta.ErrInvalid)
	require.ErrorIs(t, x.Truncate(-1), meta.ErrInvalid)
	require.NoError(t, x.Truncate(9))
	require.Equal(t, 2, x.Len())
}

// TestIndexSchema: Declare fixes kinds; the schema blob round-trips, is
// strict, and LoadSchema undoes the new fields of an undone append.
func TestIndexSchema(t *testing.T) {
	x := NewIndex(meta.Limits{})
	require.NoError(t, x.Declare("price", meta.Float))
	require.NoError(t, x.Declare("price", meta.Float))
	require.ErrorContains(t, x.Declare("price", meta.Int), `field "price": declared int, but it is already float`)
	require.ErrorIs(t, x.Declare("$x", meta.Int), meta.ErrInvalid)
	require.ErrorIs(t, x.Declare("y", 0), meta.ErrInvalid)
	err := x.Append([]meta.Fields{{"price": meta.IntOf(2)}})
	require.ErrorContains(t, err, `row 0: field "price": int value, but the field is float (in the index) (write 2.0, not 2, for a float)`)

	require.NoError(t, x.Append([]meta.Fields{{"price": meta.FloatOf(2)}, {"user": meta.KeywordOf("a")}}))
	saved := x.MarshalSchema()
	require.NoError(t, x.Append([]meta.Fields{{"extra": meta.TagsOf("q")}}))
	require.Contains(t, x.Schema(), "extra")
	require.ErrorContains(t, x.LoadSchema(saved), `lacks field "extra", which 1 rows hold`)
	require.NoError(t, x.Truncate(2))
	require.Contains(t, x.Schema(), "extra", "Truncate keeps the schema")
	require.NoError(t, x.LoadSchema(saved))
	require.Equal(t, map[string]meta.Kind{"price": meta.Float, "user": meta.Keyword}, x.Schema())
	require.Equal(t, saved, x.MarshalSchema())

	y := NewIndex(meta.Limits{})
	require.NoError(t, y.LoadSchema(saved))
	require.Equal(t, x.Schema(), y.Schema())
	require.ErrorContains(t, y.Append([]meta.Fields{{"user": meta.IntOf(1)}}), "keyword")

	// Strictness: every change to a valid blob that is not itself the
	// canonical encoding of a schema is refused.
	for i := range saved {
		for _, d := range []byte{1, 0x80, 0xff} {
			b := slices.Clone(saved)
			b[i] ^= d
			z := NewIndex(meta.Limits{})
			if err := z.LoadSchema(b); err == nil {
				require.Equal(t, b, z.MarshalSchema(), "accepted blob %x is not canonical", b)
			} else {
				require.ErrorIs(t, err, meta.ErrInvalid)
			}
		}
	}
	for n := range len(saved) {
		require.Error(t, NewIndex(meta.Limits{}).LoadSchema(saved[:n]), "truncated to %d bytes", n)
	}
	require.Error(t, NewIndex(meta.Limits{}).LoadSchema(append(slices.Clone(saved), 0)))
	require.ErrorIs(t, NewIndex(meta.Limits{MaxSchema: 1}).LoadSchema(saved), meta.ErrTooLarge)
	z := NewIndex(meta.Limits{})
	require.NoError(t, z.Append([]meta.Fields{{"price": meta.IntOf(1)}}))
	require.ErrorContains(t, z.LoadSchema(saved), `field "price" is float, but the index has it as int`)
}

// TestIndexBytes: Bytes grows with the data and falls when it goes.
func TestIndexBytes(t *testing.T) {
	r := testkit.Rand(t)
	g := &gen{r: r}
	x := NewIndex(meta.Limits{})
	empty := x.Bytes()
	rows := make([]meta.Fields, 5000)
	for i := range rows {
		rows[i] = g.row()
		if rows[i] == nil {
			rows[i] = meta.Fields{}
		}
		rows[i]["id"] = meta.KeywordOf(fmt.Sprintf("id-%d-%d", i, r.Uint64()))
	}
	require.NoError(t, x.Append(rows))
	full := x.Bytes()
	// at least the id strings and one posting entry and code per row
	require.Greater(t, full, empty+int64(5000*(len("id-0-")+8)))
	// Truncating most rows frees most of the id dictionary, which is then
	// compacted.
	require.NoError(t, x.Truncate(1000))
	require.Len(t, x.cols["id"].posts, 1000, "the dictionary was compacted")
	checkModel(t, g, x, rows[:1000], "truncated")
	require.Less(t, x.Bytes(), full/2)
	require.NoError(t, x.Append(rows[1000:2000]))
	checkModel(t, g, x, rows[:2000], "appended again")
	require.NoError(t, x.Keep([]int{0, 1, 2}))
	require.Less(t, x.Bytes(), full/10)
	require.NoError(t, x.Truncate(0))
	require.Less(t, x.Bytes(), full/10)
	require.True(t, errors.Is(x.Set(0, nil), meta.ErrInvalid))
}
