package metaindex

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra/internal/testkit"
	"github.com/umbravec/umbra/meta"
)

// randString draws a string full of what JSON must escape.
func randString(r *rand.Rand) string {
	alphabet := []string{"a", "b", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "€", "\u2028", "\u2029", "\ufffd", "😀", "<", "&", "$"}
	var b strings.Builder
	for range r.IntN(12) {
		b.WriteString(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

func randValue(r *rand.Rand) meta.Value {
	switch r.IntN(5) {
	case 0:
		return meta.KeywordOf(randString(r))
	case 1:
		if r.IntN(2) == 0 {
			return meta.IntOf(int64(r.Uint64()))
		}
		return meta.IntOf(int64(r.IntN(2001) - 1000))
	case 2:
		for {
			var f float64
			switch r.IntN(3) {
			case 0:
				f = math.Float64frombits(r.Uint64())
			case 1:
				f = float64(r.IntN(2001) - 1000)
			default:
				f = r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20))
			}
			if !math.IsNaN(f) && !math.IsInf(f, 0) {
				return meta.FloatOf(f)
			}
		}
	case 3:
		return timeNanos(int64(r.Uint64()))
	}
	tags := make([]string, r.IntN(5))
	for i := range tags {
		tags[i] = randString(r)
	}
	return meta.TagsOf(tags...)
}

func randFields(r *rand.Rand) meta.Fields {
	f := meta.Fields{}
	for range r.IntN(8) {
		name := randString(r)
		if name == "" || name[0] == '$' {
			name = "f" + name
		}
		f[name] = randValue(r)
	}
	return f
}

// TestRoundTrip: random rows (strings with every character JSON escapes,
// floats from random bits) come back equal through JSON and through the
// binary codec, and both encodings are canonical.
func TestRoundTrip(t *testing.T) {
	r := testkit.Rand(t)
	for range 3000 {
		f := randFields(r)
		require.NoError(t, f.Check(meta.Limits{}))
		js := f.AppendJSON(nil)
		g, err := meta.ParseFields(js, meta.Limits{})
		require.NoError(t, err, "%s", js)
		require.True(t, f.Equal(g), "%s came back as %s", js, g)
		require.Equal(t, js, g.AppendJSON(nil))
		for name, v := range g {
			require.Equal(t, f[name].Kind(), v.Kind(), "field %q of %s", name, js)
		}
		bin := AppendBinary(nil, f)
		h, err := DecodeBinary(bin, meta.Limits{})
		require.NoError(t, err, "%x", bin)
		require.True(t, f.Equal(h), "%s came back as %s", js, h)
		require.Equal(t, bin, AppendBinary(nil, h))
		if len(f) == 0 {
			require.Empty(t, bin, "a row without fields encodes to nothing")
		}
	}
}

func TestParseFieldsTyping(t *testing.T) {
	at := time.Date(2024, 5, 1, 10, 0, 0, 123, time.UTC)
	cases := []struct {
		in   string
		want meta.Fields
	}{
		{`{}`, meta.Fields{}},
		{" \n{ \"a\" :\t1 } \n", meta.Fields{"a": meta.IntOf(1)}},
		{`{"a": -0}`, meta.Fields{"a": meta.IntOf(0)}},
		{`{"a": 9223372036854775807, "b": -9223372036854775808}`, meta.Fields{"a": meta.IntOf(math.MaxInt64), "b": meta.IntOf(math.MinInt64)}},
		{`{"a": 1.0, "b": 1e0, "c": -0.0, "d": 2.5E-3}`, meta.Fields{"a": meta.FloatOf(1), "b": meta.FloatOf(1), "c": meta.FloatOf(0), "d": meta.FloatOf(0.0025)}},
		{`{"a": "x\u00e9\n"}`, meta.Fields{"a": meta.KeywordOf("xé\n")}},
		{`{"a": ["b", "a", "b"], "e": []}`, meta.Fields{"a": meta.TagsOf("a", "b"), "e": meta.TagsOf()}},
		{`{"t": {"$time": "2024-05-01T12:00:00.000000123+02:00"}}`, meta.Fields{"t": meta.TimeOf(at)}},
		{`{"é": "ok", "a b": 1}`, meta.Fields{"é": meta.KeywordOf("ok"), "a b": meta.IntOf(1)}},
	}
	for _, c := range cases {
		got, err := meta.ParseFields([]byte(c.in), meta.Limits{})
		require.NoError(t, err, c.in)
		require.True(t, c.want.Equal(got), "%s: got %s, want %s", c.in, got, c.want)
		for k, v := range c.want {
			require.Equal(t, v.Kind(), got[k].Kind(), "%s: field %s", c.in, k)
		}
	}
	require.Equal(t, `{"a":2.0,"b":1e+21,"c":1e-7,"d":0.0,"e":-3.5}`,
		meta.Fields{"a": meta.FloatOf(2), "b": meta.FloatOf(1e21), "c": meta.FloatOf(1e-7), "d": meta.FloatOf(math.Copysign(0, -1)), "e": meta.FloatOf(-3.5)}.String())
	require.Equal(t, `{"t":{"$time":"2024-05-01T10:00:00.000000123Z"},"u":"\"\\\n\u0001\u2028"}`,
		meta.Fields{"t": meta.TimeOf(at.In(time.FixedZone("x", 3600))), "u": meta.KeywordOf("\"\\\n\x01\u2028")}.String())
}

func TestParseFieldsErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{``, "unexpected end"},
		{`[]`, "want an object, got an array"},
		{`{"a": null}`, `field "a": null is not a metadata value`},
		{`{"a": true}`, `field "a": a boolean is not`},
		{`{"a": {"b": 1}}`, `field "a": an object value must be {"$time": "RFC 3339 time"}, got key "b"`},
		{`{"a": {}}`, `field "a": an object value must be`},
		{`{"a": {"$time": "2024-01-01T00:00:00Z", "x": 1}}`, "more than one key"},
		{`{"a": {"$time": 5}}`, "got the number 5 for the time"},
		{`{"a": {"$time": "yesterday"}}`, `field "a": time "yesterday" is not RFC 3339`},
		{`{"a": {"$time": "3000-01-01T00:00:00Z"}}`, `field "a": time "3000-01-01T00:00:00Z" outside`},
		{`{"a": [1, 2]}`, `field "a": tags must be strings, got the number 1`},
		{`{"a": ["x", 2]}`, `field "a": tags must be strings`},
		{`{"a": ["x", ["y"]]}`, `field "a": tags must be strings, got an array`},
		{`{"a": 1, "a": 2}`, `field "a" given twice`},
		{`{"$a": 1}`, `field name "$a" starts with '$'`},
		{`{"": 1}`, "empty field name"},
		{`{"a": 1} {}`, "an object after the object"},
		{`{"a": 1} x`, "invalid character"},
		{"{\"a\": \"\xff\"}", "not valid UTF-8"},
		{`{"a": 9223372036854775808}`, `field "a": integer 9223372036854775808 does not fit int64`},
		{`{"a": 1e400}`, `field "a": number 1e400 is outside the float64 range`},
		{`{"a": 01}`, "invalid character"},
		{`{"a": 1`, "unexpected end"},
		{`{"a": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`, `field "a": tags must be strings, got an array`},
	}
	for _, c := range cases {
		_, err := meta.ParseFields([]byte(c.in), meta.Limits{})
		require.ErrorIs(t, err, meta.ErrInvalid, c.in)
		require.ErrorContains(t, err, c.want, c.in)
	}
}

// TestParseFieldsLimits: each limit is an meta.ErrTooLarge naming the field, and
// hostile input (millions of tags, a huge string, deep nesting) stops at
// the first thing over.
func TestParseFieldsLimits(t *testing.T) {
	lim := meta.Limits{MaxFields: 2, MaxNameBytes: 4, MaxStringBytes: 5, MaxTags: 3, MaxRowBytes: 15}
	cases := []struct{ in, want string }{
		{`{"a": 1, "b": 2, "c": 3}`, "more than 2 fields"},
		{`{"abcde": 1}`, "is 5 bytes, over the limit of 4"},
		{`{"a": "123456"}`, `field "a": keyword of 6 bytes, over the limit of 5`},
		{`{"a": ["1", "2", "3", "4"]}`, `field "a": more than 3 tags`},
		{`{"a": ["123456"]}`, `field "a": tag of 6 bytes`},
		{`{"a": ["1","2","3"], "b": "12345"}`, "row encodes to"},
	}
	for _, c := range cases {
		_, err := meta.ParseFields([]byte(c.in), lim)
		require.ErrorIs(t, err, meta.ErrTooLarge, c.in)
		require.ErrorContains(t, err, c.want, c.in)
	}
	var b bytes.Buffer
	b.WriteString(`{"tags": [`)
	for i := range 1_000_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"t"`)
	}
	b.WriteString(`]}`)
	_, err := meta.ParseFields(b.Bytes(), meta.Limits{})
	require.ErrorIs(t, err, meta.ErrTooLarge)
	require.ErrorContains(t, err, `field "tags": more than 1024 tags`)
	_, err = meta.ParseFields([]byte(`{"s": "`+strings.Repeat("x", 1<<20)+`"}`), meta.Limits{})
	require.ErrorIs(t, err, meta.ErrTooLarge)
	_, err = meta.ParseFields([]byte(`{"a":`+strings.Repeat("[", 1<<20)), meta.Limits{})
	require.ErrorIs(t, err, meta.ErrInvalid)
}

// TestFieldsCheck: Check refuses NaN, ±Inf, times out of range, zero
// values, bad names and invalid UTF-8.
func TestFieldsCheck(t *testing.T) {
	cases := []struct {
		f    meta.Fields
		want string
	}{
		{meta.Fields{"a": meta.FloatOf(math.NaN())}, `field "a": float NaN is not finite`},
		{meta.Fields{"a": meta.FloatOf(math.Inf(-1))}, `field "a": float -Inf is not finite`},
		{meta.Fields{"a": meta.TimeOf(time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC))}, `field "a": time outside`},
		{meta.Fields{"a": {}}, `field "a": no value`},
		{meta.Fields{"$a": meta.IntOf(1)}, "starts with '$'"},
		{meta.Fields{"\xff": meta.IntOf(1)}, "not valid UTF-8"},
		{meta.Fields{"a": meta.KeywordOf("\xff")}, `field "a": keyword "\xff" is not valid UTF-8`},
		{meta.Fields{"a": meta.TagsOf("ok", "\xfe")}, `field "a": tag "\xfe" is not valid UTF-8`},
	}
	for _, c := range cases {
		err := c.f.Check(meta.Limits{})
		require.ErrorIs(t, err, meta.ErrInvalid)
		require.ErrorContains(t, err, c.want)
	}
	require.NoError(t, meta.Fields{"a": meta.TimeOf(time.Unix(0, math.MaxInt64)), "b": meta.TimeOf(time.Unix(0, math.MinInt64))}.Check(meta.Limits{}))
	v := meta.TimeOf(time.Date(2024, 1, 2, 3, 4, 5, 6, time.FixedZone("x", -7200)))
	require.Equal(t, time.Date(2024, 1, 2, 5, 4, 5, 6, time.UTC), v.Time())
	require.Equal(t, time.UTC, v.Time().Location())
	tags := meta.TagsOf("b", "a")
	got := tags.Tags()
	got[0] = "changed"
	require.Equal(t, []string{"a", "b"}, tags.Tags(), "Tags is a copy")
	require.Equal(t, "int", meta.Int.String())
	require.Equal(t, "kind(9)", meta.Kind(9).String())
}

// TestDecodeBinaryStrict: every byte flip or truncation of valid encodings
// is refused or decodes to something that encodes back to the same bytes;
// specific non-canonical forms are refused by name.
func TestDecodeBinaryStrict(t *testing.T) {
	r := testkit.Rand(t)
	for range 300 {
		f := randFields(r)
		b := AppendBinary(nil, f)
		for i := range b {
			c := slices.Clone(b)
			c[i] ^= byte(1 << r.IntN(8))
			if g, err := DecodeBinary(c, meta.Limits{}); err == nil {
				require.Equal(t, c, AppendBinary(nil, g), "accepted %x is not canonical", c)
			}
		}
		for n := 1; n < len(b); n++ {
			_, err := DecodeBinary(b[:n], meta.Limits{})
			require.Error(t, err, "%x cut to %d bytes", b, n)
		}
		_, err := DecodeBinary(append(slices.Clone(b), 0), meta.Limits{})
		require.Error(t, err)
	}
	one := AppendBinary(nil, meta.Fields{"a": meta.IntOf(1)}) // 01 01 'a' 02 02
	require.Equal(t, []byte{1, 1, 'a', byte(meta.Int), 2}, one)
	bad := []struct {
		b    []byte
		want string
	}{
		{[]byte{0}, "not a zero count"},
		{[]byte{0x81, 0}, "varint not minimal"},
		{[]byte{1, 1, 'a', byte(meta.Int), 0x82, 0}, "varint not minimal"},
		{[]byte{1, 1, 'a', 9, 2}, "unknown kind 9"},
		{[]byte{1, 1, 'a', 0, 2}, "unknown kind 0"},
		{[]byte{2, 1, 'b', byte(meta.Int), 2, 1, 'a', byte(meta.Int), 2}, "not strictly increasing"},
		{[]byte{2, 1, 'a', byte(meta.Int), 2, 1, 'a', byte(meta.Int), 2}, "not strictly increasing"},
		{binary.LittleEndian.AppendUint64([]byte{1, 1, 'a', byte(meta.Float)}, 1<<63), "float -0"},
		{binary.LittleEndian.AppendUint64([]byte{1, 1, 'a', byte(meta.Float)}, math.Float64bits(math.NaN())), "not finite"},
		{binary.LittleEndian.AppendUint64([]byte{1, 1, 'a', byte(meta.Float)}, math.Float64bits(math.Inf(1))), "not finite"},
		{[]byte{1, 1, 'a', byte(meta.Tags), 2, 1, 'b', 1, 'a'}, "tags not strictly increasing"},
		{[]byte{1, 1, 'a', byte(meta.Tags), 2, 1, 'a', 1, 'a'}, "tags not strictly increasing"},
		{[]byte{1, 1, 'a', byte(meta.Keyword), 5, 'x'}, "runs past the end"},
		{[]byte{1, 1, '$', byte(meta.Int), 2}, "starts with '$'"},
		{[]byte{1, 0, byte(meta.Int), 2}, "empty field name"},
		{[]byte{1, 1, 'a', byte(meta.Keyword), 1, 0xff}, "not valid UTF-8"},
		{[]byte{1, 1, 'a', byte(meta.Int), 2, 7}, "1 bytes left over"},
		{[]byte{200, 1}, "over the limit of 64"},
	}
	for _, c := range bad {
		_, err := DecodeBinary(c.b, meta.Limits{})
		require.Error(t, err, "%x", c.b)
		require.ErrorContains(t, err, c.want, "%x", c.b)
	}
	_, err := DecodeBinary([]byte{1, 1, 'a', byte(meta.Tags), 0xff, 0xff, 0x3f}, meta.Limits{})
	require.ErrorIs(t, err, meta.ErrTooLarge, "a huge tag count is refused before anything is allocated")
	_, err = DecodeBinary(make([]byte, 70000), meta.Limits{})
	require.ErrorIs(t, err, meta.ErrTooLarge)
}

// FuzzDecodeBinary: no input panics; what decodes passes Check and encodes
// back to the same bytes.
func FuzzDecodeBinary(f *testing.F) {
	f.Add([]byte{})
	f.Add(AppendBinary(nil, meta.Fields{"a": meta.IntOf(-5), "b": meta.FloatOf(2.5), "c": meta.KeywordOf("x"), "d": meta.TagsOf("p", "q"), "e": timeNanos(77)}))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := DecodeBinary(b, meta.Limits{})
		if err != nil {
			return
		}
		if err := g.Check(meta.Limits{}); err != nil {
			t.Fatalf("%x decoded to %s, which Check refuses: %v", b, g, err)
		}
		if !bytes.Equal(b, AppendBinary(nil, g)) {
			t.Fatalf("%x decoded to %s, which encodes as %x", b, g, AppendBinary(nil, g))
		}
	})
}

// FuzzParseFields: no input panics; what parses passes Check, round-trips
// through AppendJSON (canonically) and through the binary codec.
func FuzzParseFields(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":2.5,"c":"x","d":["p","q"],"e":{"$time":"2024-05-01T12:00:00Z"}}`, `{"a":1e0}`, `{"a":[]}`,
		`{"k":"\ud83d\ude00","\uD834\uDD1E":["\u00e9","x\ty"]}`} {
		f.Add([]byte(s))
	}
	for _, c := range notUnicode { // each refused, wherever it stands
		f.Add([]byte(`{"k": ` + c.json + `}`))
		f.Add([]byte(`{"t": ["a", ` + c.json + `]}`))
		f.Add([]byte(`{` + c.json + `: 1}`))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := meta.ParseFields(b, meta.Limits{})
		if err != nil {
			return
		}
		if !json.Valid(b) || !utf8.Valid(b) {
			t.Fatalf("%q is not JSON text, yet parsed to %s", b, g)
		}
		if err := g.Check(meta.Limits{}); err != nil {
			t.Fatalf("%q parsed to %s, which Check refuses: %v", b, g, err)
		}
		js := g.AppendJSON(nil)
		h, err := meta.ParseFields(js, meta.Limits{})
		if err != nil || !g.Equal(h) || !bytes.Equal(js, h.AppendJSON(nil)) {
			t.Fatalf("%q parsed to %s; its JSON %s read back as %s, %v", b, g, js, h, err)
		}
		k, err := DecodeBinary(AppendBinary(nil, g), meta.Limits{})
		if err != nil || !g.Equal(k) {
			t.Fatalf("%q parsed to %s; binary round trip gave %s, %v", b, g, k, err)
		}
	})
}

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
