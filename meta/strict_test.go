package meta

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
)

// notUnicode are strings as they can be written in JSON that are not
// Unicode text: encoding/json reads each as U+FFFD, so a row or a filter
// would hold another string than the one written. Each must be refused.
var notUnicode = []struct{ name, json, want string }{
	{"high surrogate alone", `"\ud800"`, `lone UTF-16 surrogate \ud800`},
	{"low surrogate alone", `"\udc00"`, `lone UTF-16 surrogate \udc00`},
	{"high surrogate before a low one's end", `"x\uDBFF"`, `lone UTF-16 surrogate \udbff`},
	{"high surrogate then a non-surrogate escape", `"\ud800\u0041"`, `lone UTF-16 surrogate \ud800`},
	{"high surrogate then a high one", `"\ud800\ud800"`, `lone UTF-16 surrogate \ud800`},
	{"high surrogate then a letter", `"\ud83dx"`, `lone UTF-16 surrogate \ud83d`},
	{"low surrogate after a pair", `"\ud83d\ude00\ude00"`, `lone UTF-16 surrogate \ude00`},
	{"raw byte 0xff", "\"a\xffb\"", "byte 0xff in a string is not valid UTF-8"},
	{"raw truncated sequence", "\"\xc3\"", "byte 0xc3 in a string is not valid UTF-8"},
	{"raw surrogate encoded in UTF-8", "\"\xed\xa0\x80\"", "byte 0xed in a string is not valid UTF-8"},
	{"raw overlong encoding", "\"\xc0\xaf\"", "byte 0xc0 in a string is not valid UTF-8"},
	{"raw byte after an escape", "\"\\n\xfe\"", "byte 0xfe in a string is not valid UTF-8"},
}

// TestParseFieldsRefusesNonUnicode: a lone surrogate escape or a byte that
// is not UTF-8 in a field's name, a keyword, a tag or a time is an error
// naming the field (or, for a name, its place), never a U+FFFD stored.
func TestParseFieldsRefusesNonUnicode(t *testing.T) {
	for _, c := range notUnicode {
		for _, place := range []struct{ doc, want string }{
			{`{"a": 1, "k": ` + c.json + `}`, `field "k"`},
			{`{"t": ["ok", ` + c.json + `]}`, `field "t": tag 2`},
			{`{"at": {"$time": ` + c.json + `}}`, `field "at"`},
			{`{"a": 1, ` + c.json + `: 2}`, `the name of field 2`},
		} {
			_, err := ParseFields([]byte(place.doc), Limits{})
			require.ErrorIs(t, err, ErrInvalid, "%s: %s", c.name, place.doc)
			require.ErrorContains(t, err, place.want, "%s: %s", c.name, place.doc)
			require.ErrorContains(t, err, c.want, "%s: %s", c.name, place.doc)
		}
	}
}

// TestParseWhereRefusesNonUnicode: the same strings in a filter, as a
// field name, an equality value, an operator's operand or one value of a
// list, are errors naming the field and the operator.
func TestParseWhereRefusesNonUnicode(t *testing.T) {
	for _, c := range notUnicode {
		for _, place := range []struct{ doc, want string }{
			{`{"k": ` + c.json + `}`, `where: field "k"`},
			{`{"k": {"$ne": ` + c.json + `}}`, `where: field "k": $ne`},
			{`{"k": {"$in": ["a", ` + c.json + `]}}`, `where: field "k": $in`},
			{`{"k": {"$nin": [` + c.json + `]}}`, `where: field "k": $nin`},
			{`{"tags": {"$contains": ` + c.json + `}}`, `where: field "tags": $contains`},
			{`{"$or": [{"a": 1}, {"k": {"$not_contains": ` + c.json + `}}]}`, `where: field "k": $not_contains`},
			{`{"at": {"$gt": {"$time": ` + c.json + `}}}`, `field "at"`},
			{`{"a": 1, ` + c.json + `: 2}`, `where: a key`},
			{`{"a": {` + c.json + `: 2}}`, `where: field "a"`},
		} {
			_, err := ParseWhere([]byte(place.doc))
			require.ErrorIs(t, err, ErrInvalid, "%s: %s", c.name, place.doc)
			require.ErrorContains(t, err, place.want, "%s: %s", c.name, place.doc)
			require.ErrorContains(t, err, c.want, "%s: %s", c.name, place.doc)
		}
	}
}

// TestSurrogatePairsRead: a surrogate pair is one character, read as it,
// and what is escaped reads as the same text written raw.
func TestSurrogatePairsRead(t *testing.T) {
	f, err := ParseFields([]byte(`{"k": "\ud83d\ude00", "t": ["\uD834\uDD1E", "\u00e9"], "\ud83d\udc4d": 1}`), Limits{})
	require.NoError(t, err)
	require.True(t, Fields{"k": KeywordOf("😀"), "t": TagsOf("𝄞", "é"), "👍": IntOf(1)}.Equal(f), "got %s", f)
	g, err := ParseFields([]byte(`{"k": "😀", "t": ["𝄞", "é"], "👍": 1}`), Limits{})
	require.NoError(t, err)
	require.True(t, f.Equal(g))

	w, err := ParseWhere([]byte(`{"k": {"$in": ["\ud83d\ude00", "x"]}, "\ud83d\udc4d": "\uDBFF\uDFFF"}`))
	require.NoError(t, err)
	require.Equal(t, `(k in ["😀", "x"] AND 👍 == "`+"\U0010FFFF"+`")`, w.String())
	w, err = ParseWhere([]byte(`{"k": "\ud83d\ude00"}`))
	require.NoError(t, err)
	op, field, vals, _ := w.Parts()
	require.Equal(t, []string{"$eq", "k"}, []string{op, field})
	require.Len(t, vals, 1)
	require.True(t, vals[0].Equal(KeywordOf("😀")), "the pair is its character, not U+FFFD: %s", vals[0])
}

// TestParseWhereTermLimit: MaxWhereTerms terms parse; one more is an
// ErrTooLarge naming the limit, in a list, in an $or and in an object.
func TestParseWhereTermLimit(t *testing.T) {
	in := func(n int) string {
		return `{"k": {"$in": [` + strings.TrimSuffix(strings.Repeat("1,", n), ",") + `]}}`
	}
	_, err := ParseWhere([]byte(in(MaxWhereTerms - 1))) // + the $in itself
	require.NoError(t, err)
	for _, doc := range []string{
		in(MaxWhereTerms),
		`{"$or": [` + strings.TrimSuffix(strings.Repeat(`{"a": 1},`, MaxWhereTerms/2), ",") + `]}`,
		`{"$and": [{"a": {"$gt": 1, "$lt": 2}}, ` + in(MaxWhereTerms-5) + `]}`,
	} {
		_, err := ParseWhere([]byte(doc))
		require.ErrorIs(t, err, ErrTooLarge, "%.80s", doc)
		require.ErrorContains(t, err, fmt.Sprintf("more than %d terms", MaxWhereTerms))
		require.ErrorContains(t, err, "meta.MaxWhereTerms")
	}
	obj := make([]string, 0, MaxWhereTerms+1)
	for i := range MaxWhereTerms + 1 {
		obj = append(obj, fmt.Sprintf(`"f%d": 1`, i))
	}
	_, err = ParseWhere([]byte(`{` + strings.Join(obj, ",") + `}`))
	require.ErrorIs(t, err, ErrTooLarge)
	_, err = ParseWhere([]byte(`{` + strings.Join(obj[:MaxWhereTerms], ",") + `}`))
	require.NoError(t, err)
}

// whereErrorBytes is what a refusal may allocate besides: its message.
const whereErrorBytes = 2 << 10

// allocated is the bytes f allocates, the least of three runs.
func allocated(f func()) uint64 {
	least := ^uint64(0)
	for range 3 {
		var a, b runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&a)
		f()
		runtime.ReadMemStats(&b)
		least = min(least, b.TotalAlloc-a.TotalAlloc)
	}
	return least
}

// TestParseWhereAllocation: reading a filter allocates at most
// whereAllocPerByte bytes per byte of it, for generated filters of every
// shape that is cheap to write and costly to hold: long lists of short
// values, $or of many small objects, objects of many keys, deep nesting —
// and for the same documents when they are refused, over the term limit
// or broken at their end.
func TestParseWhereAllocation(t *testing.T) {
	r := testkit.Rand(t)
	const terms = 1 << 14 // large enough that fixed costs do not count
	join := func(n int, f func(i int) string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = f(i)
		}
		return strings.Join(parts, ",")
	}
	name := func(i int) string { // distinct short names
		const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		s := ""
		for {
			s += string(letters[i%len(letters)])
			if i /= len(letters); i == 0 {
				return s
			}
		}
	}
	word := func() string { return fmt.Sprintf("u%d", r.IntN(100000)) }
	deep := func(width int) string { // 16 levels of $and/$or, width leaves each
		var b strings.Builder
		for d := range 15 {
			fmt.Fprintf(&b, `{"$%s":[%s,`, []string{"and", "or"}[d%2], join(width, func(i int) string { return fmt.Sprintf(`{"%s":%d}`, name(i), i%10) }))
		}
		b.WriteString(`{"$not":{"z":1}}`)
		for range 15 {
			b.WriteString(`]}`)
		}
		return b.String()
	}
	docs := map[string]string{
		"$in of one-digit ints":   `{"k":{"$in":[` + join(terms, func(int) string { return fmt.Sprint(r.IntN(10)) }) + `]}}`,
		"$nin of ints":            `{"k":{"$nin":[` + join(terms, func(int) string { return fmt.Sprint(r.Int64()) }) + `]}}`,
		"$in of short strings":    `{"k":{"$in":[` + join(terms, func(int) string { return `"` + name(r.IntN(2704)) + `"` }) + `]}}`,
		"$in of empty strings":    `{"k":{"$in":[` + join(terms, func(int) string { return `""` }) + `]}}`,
		"$in of escaped strings":  `{"k":{"$in":[` + join(terms, func(int) string { return `"\u00e9\ud83d\ude00"` }) + `]}}`,
		"$in of floats":           `{"k":{"$in":[` + join(terms, func(int) string { return fmt.Sprint(r.Float64()) }) + `]}}`,
		"$in of times":            `{"k":{"$in":[` + join(terms/2, func(int) string { return `{"$time":"2024-05-01T12:00:00Z"}` }) + `]}}`,
		"$or of one-key objects":  `{"$or":[` + join(terms/2-1, func(i int) string { return fmt.Sprintf(`{"%s":%d}`, name(i%52), i%10) }) + `]}`,
		"$or of two-key objects":  `{"$or":[` + join(terms/3-1, func(int) string { return `{"a":1,"b":1}` }) + `]}`,
		"$and of empty objects":   `{"$and":[` + join(terms-1, func(int) string { return `{}` }) + `]}`,
		"$or of $not":             `{"$or":[` + join(terms/3, func(int) string { return `{"$not":{}}` }) + `]}`,
		"$or of empty $or":        `{"$or":[` + join(terms/3, func(int) string { return `{"$or":[]}` }) + `]}`,
		"$or of operator objects": `{"$or":[` + join(terms/7, func(int) string { return `{"a":{"$gt":1,"$lt":2,"$gte":1,"$lte":2,"$ne":3}}` }) + `]}`,
		"$or of realistic filters": `{"$or":[` + join(terms/4, func(int) string {
			return `{"user":"` + word() + `","tags":{"$contains":"t` + fmt.Sprint(r.IntN(40)) + `"}}`
		}) + `]}`,
		"one object of many keys": `{` + join(terms, func(i int) string { return fmt.Sprintf(`"%s":%d`, name(i), i%10) }) + `}`,
		"$not nested 31 deep":     strings.Repeat(`{"$not":`, 31) + `{"a":1}` + strings.Repeat(`}`, 31),
		"$and/$or nested 16 deep": deep(terms / 40),
		"small":                   `{"a":1}`,
		"empty":                   `{}`,
	}
	for what, doc := range docs {
		for _, variant := range []struct {
			name string
			doc  string
			ok   bool
		}{
			{"", doc, true},
			{"broken at its end", doc[:len(doc)-1] + `,`, false},
			{"with a lone surrogate at its end", doc[:len(doc)-1] + `,"x":"\udc00"}`, false},
		} {
			b := []byte(variant.doc)
			var err error
			got := allocated(func() { _, err = ParseWhere(b) })
			if variant.ok {
				require.NoError(t, err, what)
			} else {
				require.Error(t, err, "%s, %s", what, variant.name)
			}
			limit := uint64(whereAllocPerByte*len(b) + whereErrorBytes)
			require.LessOrEqual(t, got, limit, "%s %s: %d bytes of filter allocated %d bytes, %.1f per byte (whereAllocPerByte is %d)",
				what, variant.name, len(b), got, float64(got)/float64(len(b)), whereAllocPerByte)
			if variant.ok {
				t.Logf("%-26s %8d bytes, %5.1f bytes allocated per byte", what, len(b), float64(got)/float64(len(b)))
			}
		}
	}
	// Over the term limit, a document is refused at the cost of what it
	// holds up to there.
	over := []byte(`{"$or":[` + join(3*MaxWhereTerms, func(int) string { return `{"a":1}` }) + `]}`)
	var err error
	got := allocated(func() { _, err = ParseWhere(over) })
	require.ErrorIs(t, err, ErrTooLarge)
	require.LessOrEqual(t, got, uint64(whereAllocPerByte*len(over)+whereErrorBytes))
}
