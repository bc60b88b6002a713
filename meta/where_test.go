package meta

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestParseWhere(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{}`, `all`},
		{`{"user": "ann"}`, `user == "ann"`},
		{`{"age": 3, "user": "ann"}`, `(age == 3 AND user == "ann")`},
		{`{"age": {"$gte": 18, "$lt": 65.5}}`, `(age >= 18 AND age < 65.5)`},
		{`{"age": {"$eq": 2.0}}`, `age == 2.0`},
		{`{"age": {"$ne": -1}}`, `age != -1`},
		{`{"age": {"$gt": 1e3}}`, `age > 1000.0`},
		{`{"age": {"$lte": 1}}`, `age <= 1`},
		{`{"user": {"$in": ["a", "b"]}}`, `user in ["a", "b"]`},
		{`{"user": {"$nin": []}}`, `user not in []`},
		{`{"tags": {"$contains": "x"}}`, `tags contains "x"`},
		{`{"tags": {"$not_contains": "x"}}`, `tags not contains "x"`},
		{`{"at": {"$time": "2024-05-01T12:00:00+02:00"}}`, `at == {"$time":"2024-05-01T10:00:00Z"}`},
		{`{"at": {"$gt": {"$time": "2024-05-01T12:00:00Z"}}}`, `at > {"$time":"2024-05-01T12:00:00Z"}`},
		{`{"at": {"$in": [{"$time": "2024-05-01T12:00:00Z"}, 5]}}`, `at in [{"$time":"2024-05-01T12:00:00Z"}, 5]`},
		{`{"$and": [{"a": 1}, {"b": 2}]}`, `(a == 1 AND b == 2)`},
		{`{"$or": [{"a": 1}, {"b": 2}, {"c": 3}]}`, `(a == 1 OR b == 2 OR c == 3)`},
		{`{"$or": [{"a": 1}]}`, `a == 1`},
		{`{"$or": []}`, `none`},
		{`{"$and": []}`, `all`},
		{`{"$not": {"a": 1}}`, `NOT a == 1`},
		{`{"$not": {"$or": [{"a": 1}, {"tags": {"$contains": "q"}}]}, "b": "x"}`, `(NOT (a == 1 OR tags contains "q") AND b == "x")`},
		{" {\n\"a\" : \"\\u00e9\" } ", `a == "é"`},
	}
	for _, c := range cases {
		f, err := ParseWhere([]byte(c.in))
		require.NoError(t, err, c.in)
		require.Equal(t, c.want, f.String(), c.in)
		g, err := ParseWhere(f.AppendJSON(nil))
		require.NoError(t, err, "%s → %s", c.in, f.AppendJSON(nil))
		require.Equal(t, c.want, g.String(), "%s → %s", c.in, f.AppendJSON(nil))
	}
}

func TestParseWhereErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{``, "unexpected end"},
		{`[]`, "want an object, got an array"},
		{`{"$where": 1}`, `unknown operator "$where" at the top of an object`},
		{`{"a": {"$like": "x"}}`, `field "a": unknown operator "$like" (want one of $eq, $ne`},
		{`{"a": {}}`, `field "a": empty operator object`},
		{`{"a": null}`, `field "a": null is not a value`},
		{`{"a": true}`, `field "a": a boolean is not a value`},
		{`{"a": ["x"]}`, `field "a": an array is not a value to compare (use {"$in": [...]} or {"$contains": "tag"})`},
		{`{"a": {"$in": "x"}}`, `field "a": $in takes an array of values, got the string "x"`},
		{`{"a": {"$in": [["x"]]}}`, `field "a": $in: an array is not a value`},
		{`{"a": {"$in": [null]}}`, `field "a": null is not a value`},
		{`{"a": {"$contains": 1}}`, `field "a": $contains takes a string (a tag), got the number 1`},
		{`{"a": {"$eq": {"b": 1}}}`, `field "a": an object value must be {"$time": "RFC 3339 time"}, got key "b"`},
		{`{"a": {"$eq": 1, "$eq": 2}}`, `field "a": operator "$eq" given twice`},
		{`{"a": 1, "a": 2}`, `key "a" given twice`},
		{`{"$and": {"a": 1}}`, `$and takes an array of objects, got an object`},
		{`{"$or": [1]}`, `$or takes an array of objects, got the number 1 in it`},
		{`{"$not": [{"a": 1}]}`, `$not takes an object, got an array`},
		{`{"a": 99999999999999999999}`, `field "a": integer 99999999999999999999 does not fit int64`},
		{`{"a": {"$time": "nope"}}`, `time "nope" is not RFC 3339`},
		{`{"": 1}`, `empty field name`},
		{`{"a": 1} 2`, `the number 2 after the object`},
		{"{\"a\": \"\xff\"}", "not valid UTF-8"},
	}
	for _, c := range cases {
		_, err := ParseWhere([]byte(c.in))
		require.ErrorIs(t, err, ErrInvalid, c.in)
		require.ErrorContains(t, err, c.want, c.in)
	}
	deep := ""
	for range 40 {
		deep += `{"$not":`
	}
	deep += `{"a": 1}`
	for range 40 {
		deep += `}`
	}
	_, err := ParseWhere([]byte(deep))
	require.ErrorIs(t, err, ErrTooLarge)
	require.ErrorContains(t, err, "nested deeper than 32")
}

// FuzzParseWhere: no input panics, and what parses round-trips
// (internal/metaindex's FuzzEvalWhere evaluates what parses).
func FuzzParseWhere(f *testing.F) {
	for _, s := range []string{`{}`, `{"a": {"$gte": 1, "$lt": 2.5}}`, `{"$or": [{"t": {"$contains": "x"}}, {"$not": {"k": {"$in": ["a"]}}}]}`, `{"d": {"$gt": {"$time": "2024-01-01T00:00:00Z"}}}`,
		`{"k": "\ud83d\ude00"}`, `{"\ud83d\ude00": {"$in": ["\u00e9", "\uDBFF\uDFFF"]}}`, `{"k": "a\"\\\/\b\f\n\r\t"}`} {
		f.Add([]byte(s))
	}
	for _, c := range notUnicode { // each refused, wherever it stands
		f.Add([]byte(`{"k": ` + c.json + `}`))
		f.Add([]byte(`{"k": {"$in": [1, ` + c.json + `]}}`))
		f.Add([]byte(`{` + c.json + `: 1}`))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := ParseWhere(b)
		if err != nil {
			return
		}
		if !json.Valid(b) || !utf8.Valid(b) {
			t.Fatalf("%q is not JSON text, yet parsed to %s", b, w)
		}
		_ = w.String()
		js := w.AppendJSON(nil)
		v, err := ParseWhere(js)
		if err != nil || v.String() != w.String() {
			t.Fatalf("%q parsed to %s; its JSON %s read back as %s, %v", b, w, js, v, err)
		}
	})
}
