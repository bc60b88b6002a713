package meta

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

var sprintf = fmt.Sprintf

func quote(s string) string { return strconv.Quote(s) }

// ParseFields reads one row's metadata from a JSON object (see the package
// doc, "JSON"), checked against lim (zero fields take their defaults).
// Whitespace is free; a duplicate field name, a value of no kind (null, a
// boolean, a nested object other than {"$time": ...}, an array of anything
// but strings), input that is not valid UTF-8 and data after the object are
// errors naming the field. The reader stops at the first thing wrong, so
// deep nesting or millions of tags cost no more than the input itself.
func ParseFields(b []byte, lim Limits) (Fields, error) {
	lim = lim.WithDefaults()
	if !validUTF8(b) {
		return nil, invalidf("metadata JSON is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonErr("metadata JSON", err)
	}
	if tok != json.Delim('{') {
		return nil, invalidf("metadata JSON: want an object, got %s", describe(tok))
	}
	f := Fields{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, jsonErr("metadata JSON", err)
		}
		name, _ := tok.(string)
		if err := checkName(name, lim); err != nil {
			return nil, err
		}
		if _, dup := f[name]; dup {
			return nil, invalidf("metadata JSON: field %q given twice", name)
		}
		if len(f) == lim.MaxFields {
			return nil, tooLargef("metadata JSON: more than %d fields", lim.MaxFields)
		}
		v, err := parseValue(dec, name, lim)
		if err != nil {
			return nil, err
		}
		if err := checkValue(name, v, lim); err != nil {
			return nil, err
		}
		f[name] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, jsonErr("metadata JSON", err)
	}
	if err := expectEOF(dec, "metadata JSON"); err != nil {
		return nil, err
	}
	if err := f.check(lim); err != nil {
		return nil, err
	}
	return f, nil
}

// expectEOF refuses anything after the top-level value.
func expectEOF(dec *json.Decoder, what string) error {
	tok, err := dec.Token()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return jsonErr(what, err)
	}
	return invalidf("%s: %s after the object", what, describe(tok))
}

// jsonErr wraps a decoder's error.
func jsonErr(what string, err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return invalidf("%s: unexpected end of input", what)
	}
	return invalidf("%s: %v", what, err)
}

// describe names a JSON token for an error.
func describe(tok json.Token) string {
	switch t := tok.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		if len(t) > 40 {
			t = t[:40] + "..."
		}
		return "the string " + strconv.Quote(t)
	case json.Number:
		return "the number " + string(t)
	case json.Delim:
		switch t {
		case '{':
			return "an object"
		case '[':
			return "an array"
		}
		return "'" + t.String() + "'"
	}
	return fmt.Sprintf("%v", tok)
}

// parseValue reads field name's value.
func parseValue(dec *json.Decoder, name string, lim Limits) (Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return Value{}, jsonErr(sprintf("metadata JSON: field %q", name), err)
	}
	switch t := tok.(type) {
	case string:
		return KeywordOf(t), nil
	case json.Number:
		return parseNumber(name, string(t))
	case json.Delim:
		switch t {
		case '[':
			return parseTags(dec, name, lim)
		case '{':
			return parseTime(dec, name)
		}
	}
	return Value{}, invalidf("metadata JSON: field %q: %s is not a metadata value (want a string, a number, an array of strings or {\"$time\": ...})", name, describe(tok))
}

// parseNumber types a JSON number: an integer without fraction or exponent
// is an Int; any other number a Float.
func parseNumber(name, s string) (Value, error) {
	if !strings.ContainsAny(s, ".eE") {
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return Value{}, invalidf("field %q: integer %s does not fit int64 (write %s.0 for a float)", name, s, s)
		}
		return IntOf(i), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return Value{}, invalidf("field %q: number %s is outside the float64 range", name, s)
	}
	return FloatOf(f), nil
}

// parseTags reads the rest of an array of strings.
func parseTags(dec *json.Decoder, name string, lim Limits) (Value, error) {
	var tags []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Value{}, jsonErr(sprintf("metadata JSON: field %q", name), err)
		}
		s, ok := tok.(string)
		if !ok {
			return Value{}, invalidf("metadata JSON: field %q: tags must be strings, got %s", name, describe(tok))
		}
		if len(tags) == lim.MaxTags {
			return Value{}, tooLargef("field %q: more than %d tags", name, lim.MaxTags)
		}
		if err := checkString(name, "tag", s, lim); err != nil {
			return Value{}, err
		}
		tags = append(tags, s)
	}
	if _, err := dec.Token(); err != nil {
		return Value{}, jsonErr(sprintf("metadata JSON: field %q", name), err)
	}
	return TagsOf(tags...), nil
}

// parseTime reads the rest of {"$time": "RFC 3339"}.
func parseTime(dec *json.Decoder, name string) (Value, error) {
	v, err := parseTimeBody(dec, name)
	if err != nil {
		return Value{}, err
	}
	if _, err := dec.Token(); err != nil { // '}'; More said it is next
		return Value{}, jsonErr(sprintf("field %q", name), err)
	}
	return v, nil
}

func parseTimeBody(dec *json.Decoder, name string) (Value, error) {
	bad := func(what string) error {
		return invalidf("field %q: an object value must be {\"$time\": \"RFC 3339 time\"}, %s", name, what)
	}
	if !dec.More() {
		return Value{}, bad("got {}")
	}
	tok, err := dec.Token()
	if err != nil {
		return Value{}, jsonErr(sprintf("field %q", name), err)
	}
	if k, _ := tok.(string); k != "$time" {
		return Value{}, bad(sprintf("got key %q", tok))
	}
	return timeRest(dec, name)
}

// timeRest reads the time string of {"$time": ...}, after the key, and
// checks that no other key follows (the closing brace is left).
func timeRest(dec *json.Decoder, name string) (Value, error) {
	bad := func(what string) error {
		return invalidf("field %q: an object value must be {\"$time\": \"RFC 3339 time\"}, %s", name, what)
	}
	tok, err := dec.Token()
	if err != nil {
		return Value{}, jsonErr(sprintf("field %q", name), err)
	}
	s, ok := tok.(string)
	if !ok {
		return Value{}, bad(sprintf("got %s for the time", describe(tok)))
	}
	if dec.More() {
		return Value{}, bad("got more than one key")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return Value{}, invalidf("field %q: time %q is not RFC 3339 (like 2024-05-01T12:00:00Z): %v", name, s, err)
	}
	v := TimeOf(t)
	if v.bad {
		return Value{}, invalidf("field %q: time %q outside 1677-09-21..2262-04-11 (int64 Unix nanoseconds)", name, s)
	}
	return v, nil
}

// AppendJSON appends f as one canonical JSON object: fields sorted by name,
// no spaces, a Time as {"$time":"RFC 3339 with nanoseconds, UTC"}, a Float
// always with a fraction or an exponent (2 is written 2.0) so that it reads
// back as a Float. ParseFields(f.AppendJSON(nil)) equals f for every f that
// passes Check. A zero Value is written as null (which ParseFields refuses).
func (f Fields) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	for i, name := range f.names() {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, name)
		dst = append(dst, ':')
		dst = appendValueJSON(dst, f[name])
	}
	return append(dst, '}')
}

// String is f.AppendJSON as a string.
func (f Fields) String() string { return string(f.AppendJSON(nil)) }

func appendValueJSON(dst []byte, v Value) []byte {
	switch v.kind {
	case Keyword:
		return appendJSONString(dst, v.s)
	case Int:
		return strconv.AppendInt(dst, v.i, 10)
	case Float:
		return appendJSONFloat(dst, v.f)
	case Time:
		dst = append(dst, `{"$time":"`...)
		dst = time.Unix(0, v.i).UTC().AppendFormat(dst, time.RFC3339Nano)
		return append(dst, `"}`...)
	case Tags:
		dst = append(dst, '[')
		for i, t := range v.tags {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, t)
		}
		return append(dst, ']')
	}
	return append(dst, "null"...)
}

// appendJSONFloat writes f as encoding/json does (shortest form that reads
// back exactly), then adds ".0" when that form is an integer. NaN and ±Inf,
// which JSON cannot carry, are written as null.
func appendJSONFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	if f == 0 {
		f = 0
	}
	start := len(dst)
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		n := len(dst)
		if n-start >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
		return dst
	}
	if bytes.IndexByte(dst[start:], '.') < 0 {
		dst = append(dst, ".0"...)
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s as a JSON string, escaping only what JSON
// requires (and U+2028, U+2029); invalid UTF-8 becomes U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
