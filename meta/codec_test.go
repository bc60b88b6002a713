package meta

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

func randValue(r *rand.Rand) Value {
	switch r.IntN(5) {
	case 0:
		return KeywordOf(randString(r))
	case 1:
		if r.IntN(2) == 0 {
			return IntOf(int64(r.Uint64()))
		}
		return IntOf(int64(r.IntN(2001) - 1000))
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
				return FloatOf(f)
			}
		}
	case 3:
		return timeNanos(int64(r.Uint64()))
	}
	tags := make([]string, r.IntN(5))
	for i := range tags {
		tags[i] = randString(r)
	}
	return TagsOf(tags...)
}

func randFields(r *rand.Rand) Fields {
	f := Fields{}
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
		require.NoError(t, f.Check(Limits{}))
		js := f.AppendJSON(nil)
		g, err := ParseFields(js, Limits{})
		require.NoError(t, err, "%s", js)
		require.True(t, f.Equal(g), "%s came back as %s", js, g)
		require.Equal(t, js, g.AppendJSON(nil))
		for name, v := range g {
			require.Equal(t, f[name].Kind(), v.Kind(), "field %q of %s", name, js)
		}
		bin := AppendBinary(nil, f)
		h, err := DecodeBinary(bin, Limits{})
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
		want Fields
	}{
		{`{}`, Fields{}},
		{" \n{ \"a\" :\t1 } \n", Fields{"a": IntOf(1)}},
		{`{"a": -0}`, Fields{"a": IntOf(0)}},
		{`{"a": 9223372036854775807, "b": -9223372036854775808}`, Fields{"a": IntOf(math.MaxInt64), "b": IntOf(math.MinInt64)}},
		{`{"a": 1.0, "b": 1e0, "c": -0.0, "d": 2.5E-3}`, Fields{"a": FloatOf(1), "b": FloatOf(1), "c": FloatOf(0), "d": FloatOf(0.0025)}},
		{`{"a": "x\u00e9\n"}`, Fields{"a": KeywordOf("xé\n")}},
		{`{"a": ["b", "a", "b"], "e": []}`, Fields{"a": TagsOf("a", "b"), "e": TagsOf()}},
		{`{"t": {"$time": "2024-05-01T12:00:00.000000123+02:00"}}`, Fields{"t": TimeOf(at)}},
		{`{"é": "ok", "a b": 1}`, Fields{"é": KeywordOf("ok"), "a b": IntOf(1)}},
	}
	for _, c := range cases {
		got, err := ParseFields([]byte(c.in), Limits{})
		require.NoError(t, err, c.in)
		require.True(t, c.want.Equal(got), "%s: got %s, want %s", c.in, got, c.want)
		for k, v := range c.want {
			require.Equal(t, v.Kind(), got[k].Kind(), "%s: field %s", c.in, k)
		}
	}
	require.Equal(t, `{"a":2.0,"b":1e+21,"c":1e-7,"d":0.0,"e":-3.5}`,
		Fields{"a": FloatOf(2), "b": FloatOf(1e21), "c": FloatOf(1e-7), "d": FloatOf(math.Copysign(0, -1)), "e": FloatOf(-3.5)}.String())
	require.Equal(t, `{"t":{"$time":"2024-05-01T10:00:00.000000123Z"},"u":"\"\\\n\u0001\u2028"}`,
		Fields{"t": TimeOf(at.In(time.FixedZone("x", 3600))), "u": KeywordOf("\"\\\n\x01\u2028")}.String())
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
		_, err := ParseFields([]byte(c.in), Limits{})
		require.ErrorIs(t, err, ErrInvalid, c.in)
		require.ErrorContains(t, err, c.want, c.in)
	}
}

// TestParseFieldsLimits: each limit is an ErrTooLarge naming the field, and
// hostile input (millions of tags, a huge string, deep nesting) stops at
// the first thing over.
func TestParseFieldsLimits(t *testing.T) {
	lim := Limits{MaxFields: 2, MaxNameBytes: 4, MaxStringBytes: 5, MaxTags: 3, MaxRowBytes: 15}
	cases := []struct{ in, want string }{
		{`{"a": 1, "b": 2, "c": 3}`, "more than 2 fields"},
		{`{"abcde": 1}`, "is 5 bytes, over the limit of 4"},
		{`{"a": "123456"}`, `field "a": keyword of 6 bytes, over the limit of 5`},
		{`{"a": ["1", "2", "3", "4"]}`, `field "a": more than 3 tags`},
		{`{"a": ["123456"]}`, `field "a": tag of 6 bytes`},
		{`{"a": ["1","2","3"], "b": "12345"}`, "row encodes to"},
	}
	for _, c := range cases {
		_, err := ParseFields([]byte(c.in), lim)
		require.ErrorIs(t, err, ErrTooLarge, c.in)
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
	_, err := ParseFields(b.Bytes(), Limits{})
	require.ErrorIs(t, err, ErrTooLarge)
	require.ErrorContains(t, err, `field "tags": more than 1024 tags`)
	_, err = ParseFields([]byte(`{"s": "`+strings.Repeat("x", 1<<20)+`"}`), Limits{})
	require.ErrorIs(t, err, ErrTooLarge)
	_, err = ParseFields([]byte(`{"a":`+strings.Repeat("[", 1<<20)), Limits{})
	require.ErrorIs(t, err, ErrInvalid)
}

// TestFieldsCheck: Check refuses NaN, ±Inf, times out of range, zero
// values, bad names and invalid UTF-8.
func TestFieldsCheck(t *testing.T) {
	cases := []struct {
		f    Fields
		want string
	}{
		{Fields{"a": FloatOf(math.NaN())}, `field "a": float NaN is not finite`},
		{Fields{"a": FloatOf(math.Inf(-1))}, `field "a": float -Inf is not finite`},
		{Fields{"a": TimeOf(time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC))}, `field "a": time outside`},
		{Fields{"a": {}}, `field "a": no value`},
		{Fields{"$a": IntOf(1)}, "starts with '$'"},
		{Fields{"\xff": IntOf(1)}, "not valid UTF-8"},
		{Fields{"a": KeywordOf("\xff")}, `field "a": keyword "\xff" is not valid UTF-8`},
		{Fields{"a": TagsOf("ok", "\xfe")}, `field "a": tag "\xfe" is not valid UTF-8`},
	}
	for _, c := range cases {
		err := c.f.Check(Limits{})
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorContains(t, err, c.want)
	}
	require.NoError(t, Fields{"a": TimeOf(time.Unix(0, math.MaxInt64)), "b": TimeOf(time.Unix(0, math.MinInt64))}.Check(Limits{}))
	v := TimeOf(time.Date(2024, 1, 2, 3, 4, 5, 6, time.FixedZone("x", -7200)))
	require.Equal(t, time.Date(2024, 1, 2, 5, 4, 5, 6, time.UTC), v.Time())
	require.Equal(t, time.UTC, v.Time().Location())
	tags := TagsOf("b", "a")
	got := tags.Tags()
	got[0] = "changed"
	require.Equal(t, []string{"a", "b"}, tags.Tags(), "Tags is a copy")
	require.Equal(t, "int", Int.String())
	require.Equal(t, "kind(9)", Kind(9).String())
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
			if g, err := DecodeBinary(c, Limits{}); err == nil {
				require.Equal(t, c, AppendBinary(nil, g), "accepted %x is not canonical", c)
			}
		}
		for n := 1; n < len(b); n++ {
			_, err := DecodeBinary(b[:n], Limits{})
			require.Error(t, err, "%x cut to %d bytes", b, n)
		}
		_, err := DecodeBinary(append(slices.Clone(b), 0), Limits{})
		require.Error(t, err)
	}
	one := AppendBinary(nil, Fields{"a": IntOf(1)}) // 01 01 'a' 02 02
	require.Equal(t, []byte{1, 1, 'a', byte(Int), 2}, one)
	bad := []struct {
		b    []byte
		want string
	}{
		{[]byte{0}, "not a zero count"},
		{[]byte{0x81, 0}, "varint not minimal"},
		{[]byte{1, 1, 'a', byte(Int), 0x82, 0}, "varint not minimal"},
		{[]byte{1, 1, 'a', 9, 2}, "unknown kind 9"},
		{[]byte{1, 1, 'a', 0, 2}, "unknown kind 0"},
		{[]byte{2, 1, 'b', byte(Int), 2, 1, 'a', byte(Int), 2}, "not strictly increasing"},
		{[]byte{2, 1, 'a', byte(Int), 2, 1, 'a', byte(Int), 2}, "not strictly increasing"},
		{binary.LittleEndian.AppendUint64([]byte{1, 1, 'a', byte(Float)}, 1<<63), "float -0"},
		{binary.LittleEndian.AppendUint64([]byte{1, 1, 'a', byte(Float)}, math.Float64bits(math.NaN())), "not finite"},
		{binary.LittleEndian.AppendUint64([]byte{1, 1, 'a', byte(Float)}, math.Float64bits(math.Inf(1))), "not finite"},
		{[]byte{1, 1, 'a', byte(Tags), 2, 1, 'b', 1, 'a'}, "tags not strictly increasing"},
		{[]byte{1, 1, 'a', byte(Tags), 2, 1, 'a', 1, 'a'}, "tags not strictly increasing"},
		{[]byte{1, 1, 'a', byte(Keyword), 5, 'x'}, "runs past the end"},
		{[]byte{1, 1, '$', byte(Int), 2}, "starts with '$'"},
		{[]byte{1, 0, byte(Int), 2}, "empty field name"},
		{[]byte{1, 1, 'a', byte(Keyword), 1, 0xff}, "not valid UTF-8"},
		{[]byte{1, 1, 'a', byte(Int), 2, 7}, "1 bytes left over"},
		{[]byte{200, 1}, "over the limit of 64"},
	}
	for _, c := range bad {
		_, err := DecodeBinary(c.b, Limits{})
		require.Error(t, err, "%x", c.b)
		require.ErrorContains(t, err, c.want, "%x", c.b)
	}
	_, err := DecodeBinary([]byte{1, 1, 'a', byte(Tags), 0xff, 0xff, 0x3f}, Limits{})
	require.ErrorIs(t, err, ErrTooLarge, "a huge tag count is refused before anything is allocated")
	_, err = DecodeBinary(make([]byte, 70000), Limits{})
	require.ErrorIs(t, err, ErrTooLarge)
}

// FuzzDecodeBinary: no input panics; what decodes passes Check and encodes
// back to the same bytes.
func FuzzDecodeBinary(f *testing.F) {
	f.Add([]byte{})
	f.Add(AppendBinary(nil, Fields{"a": IntOf(-5), "b": FloatOf(2.5), "c": KeywordOf("x"), "d": TagsOf("p", "q"), "e": timeNanos(77)}))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := DecodeBinary(b, Limits{})
		if err != nil {
			return
		}
		if err := g.Check(Limits{}); err != nil {
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
		g, err := ParseFields(b, Limits{})
		if err != nil {
			return
		}
		if !json.Valid(b) || !utf8.Valid(b) {
			t.Fatalf("%q is not JSON text, yet parsed to %s", b, g)
		}
		if err := g.Check(Limits{}); err != nil {
			t.Fatalf("%q parsed to %s, which Check refuses: %v", b, g, err)
		}
		js := g.AppendJSON(nil)
		h, err := ParseFields(js, Limits{})
		if err != nil || !g.Equal(h) || !bytes.Equal(js, h.AppendJSON(nil)) {
			t.Fatalf("%q parsed to %s; its JSON %s read back as %s, %v", b, g, js, h, err)
		}
		k, err := DecodeBinary(AppendBinary(nil, g), Limits{})
		if err != nil || !g.Equal(k) {
			t.Fatalf("%q parsed to %s; binary round trip gave %s, %v", b, g, k, err)
		}
	})
}
