package meta

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

var sprintf = fmt.Sprintf

func quote(s string) string { return strconv.Quote(s) }

// ParseFields reads one row's metadata from a JSON object (see the package
// doc, "JSON"), checked against lim (zero fields take their defaults).
// Whitespace is free; a duplicate field name, a value of no kind (null, a
// boolean, a nested object other than {"$time": ...}, an array of anything
// but strings), a string that is not Unicode (invalid UTF-8, or a \u
// escape of a lone UTF-16 surrogate such as "\ud800", which encoding/json
// would turn into U+FFFD) and data after the object are errors naming the
// field. The reader stops at the first thing wrong, so deep nesting or
// millions of tags cost no more than the input itself.
func ParseFields(b []byte, lim Limits) (Fields, error) {
	lim = lim.WithDefaults()
	sc := newScanner(b)
	tok, err := sc.next()
	if err != nil {
		return nil, jsonErr("metadata JSON", err)
	}
	if tok.kind != tokBeginObject {
		return nil, invalidf("metadata JSON: want an object, got %s", tok.describe())
	}
	f := Fields{}
	for sc.more() {
		tok, err := sc.next()
		if err != nil {
			// The name is what could not be read: its place names it.
			return nil, jsonErr(sprintf("metadata JSON: the name of field %d", len(f)+1), err)
		}
		name := tok.str()
		if err := checkName(name, lim); err != nil {
			return nil, err
		}
		if _, dup := f[name]; dup {
			return nil, invalidf("metadata JSON: field %q given twice", name)
		}
		if len(f) == lim.MaxFields {
			return nil, tooLargef("metadata JSON: more than %d fields", lim.MaxFields)
		}
		v, err := parseValue(sc, name, lim)
		if err != nil {
			return nil, err
		}
		if err := checkValue(name, v, lim); err != nil {
			return nil, err
		}
		f[name] = v
	}
	if _, err := sc.next(); err != nil { // the closing brace
		return nil, jsonErr("metadata JSON", err)
	}
	if err := expectEOF(sc, "metadata JSON"); err != nil {
		return nil, err
	}
	if err := f.check(lim); err != nil {
		return nil, err
	}
	return f, nil
}

// expectEOF refuses anything after the top-level value.
func expectEOF(sc *scanner, what string) error {
	tok, err := sc.next()
	if err != nil {
		return jsonErr(what, err)
	}
	if tok.kind == tokEOF {
		return nil
	}
	return invalidf("%s: %s after the object", what, tok.describe())
}

// jsonErr wraps the scanner's error.
func jsonErr(what string, err error) error {
	return invalidf("%s: %v", what, err)
}

// parseValue reads field name's value.
func parseValue(sc *scanner, name string, lim Limits) (Value, error) {
	tok, err := sc.next()
	if err != nil {
		return Value{}, jsonErr(sprintf("metadata JSON: field %q", name), err)
	}
	switch tok.kind {
	case tokString:
		return KeywordOf(tok.str()), nil
	case tokNumber:
		return parseNumber(name, tok.raw)
	case tokBeginArray:
		return parseTags(sc, name, lim)
	case tokBeginObject:
		return parseTime(sc, name)
	}
	return Value{}, invalidf("metadata JSON: field %q: %s is not a metadata value (want a string, a number, an array of strings or {\"$time\": ...})", name, tok.describe())
}

// parseNumber types a JSON number: an integer without fraction or exponent
// is an Int; any other number a Float.
func parseNumber(name string, raw []byte) (Value, error) {
	if !bytes.ContainsAny(raw, ".eE") {
		i, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return Value{}, invalidf("field %q: integer %s does not fit int64 (write %s.0 for a float)", name, raw, raw)
		}
		return IntOf(i), nil
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) {
		return Value{}, invalidf("field %q: number %s is outside the float64 range", name, raw)
	}
	return FloatOf(f), nil
}

// parseTags reads the rest of an array of strings.
func parseTags(sc *scanner, name string, lim Limits) (Value, error) {
	var tags []string
	for sc.more() {
		tok, err := sc.next()
		if err != nil {
			return Value{}, jsonErr(sprintf("metadata JSON: field %q: tag %d", name, len(tags)+1), err)
		}
		if tok.kind != tokString {
			return Value{}, invalidf("metadata JSON: field %q: tags must be strings, got %s", name, tok.describe())
		}
		if len(tags) == lim.MaxTags {
			return Value{}, tooLargef("field %q: more than %d tags", name, lim.MaxTags)
		}
		if len(tok.raw) > lim.MaxStringBytes {
			return Value{}, tooLargef("field %q: tag of %d bytes, over the limit of %d", name, len(tok.raw), lim.MaxStringBytes)
		}
		tags = append(tags, tok.str())
	}
	if _, err := sc.next(); err != nil {
		return Value{}, jsonErr(sprintf("metadata JSON: field %q", name), err)
	}
	return TagsOf(tags...), nil
}

// parseTime reads the rest of {"$time": "RFC 3339"}.
func parseTime(sc *scanner, name string) (Value, error) {
	v, err := parseTimeBody(sc, name)
	if err != nil {
		return Value{}, err
	}
	if _, err := sc.next(); err != nil { // '}'; more said it is next
		return Value{}, jsonErr(sprintf("field %q", name), err)
	}
	return v, nil
}

func parseTimeBody(sc *scanner, name string) (Value, error) {
	bad := func(what string) error {
		return invalidf("field %q: an object value must be {\"$time\": \"RFC 3339 time\"}, %s", name, what)
	}
	if !sc.more() {
		return Value{}, bad("got {}")
	}
	tok, err := sc.next()
	if err != nil {
		return Value{}, jsonErr(sprintf("field %q", name), err)
	}
	if !tok.is("$time") {
		return Value{}, bad(sprintf("got key %q", tok.raw))
	}
	return timeRest(sc, name)
}

// timeRest reads the time string of {"$time": ...}, after the key, and
// checks that no other key follows (the closing brace is left).
func timeRest(sc *scanner, name string) (Value, error) {
	bad := func(what string) error {
		return invalidf("field %q: an object value must be {\"$time\": \"RFC 3339 time\"}, %s", name, what)
	}
	tok, err := sc.next()
	if err != nil {
		return Value{}, jsonErr(sprintf("field %q: $time", name), err)
	}
	if tok.kind != tokString {
		return Value{}, bad(sprintf("got %s for the time", tok.describe()))
	}
	t, perr := time.Parse(time.RFC3339Nano, string(tok.raw))
	if sc.more() {
		return Value{}, bad("got more than one key")
	}
	if perr != nil {
		return Value{}, invalidf("field %q: time %q is not RFC 3339 (like 2024-05-01T12:00:00Z): %v", name, tok.raw, perr)
	}
	v := TimeOf(t)
	if v.bad {
		return Value{}, invalidf("field %q: time %q outside 1677-09-21..2262-04-11 (int64 Unix nanoseconds)", name, tok.raw)
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
		return appendJSONFloat(dst, v.flt())
	case Time:
		dst = append(dst, `{"$time":"`...)
		dst = time.Unix(0, v.i).UTC().AppendFormat(dst, time.RFC3339Nano)
		return append(dst, `"}`...)
	case Tags:
		dst = append(dst, '[')
		for i, t := range v.tagList() {
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
