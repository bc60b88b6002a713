package meta

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is the JSON reader under ParseFields and ParseWhere. It is
// written for them rather than taken from encoding/json for two reasons:
//
//   - Strings are read strictly. encoding/json replaces a lone UTF-16
//     surrogate escape ("\ud800") and invalid UTF-8 bytes with U+FFFD, so
//     a stored or matched string would silently differ from what was
//     written; here either is an error that says where it is.
//   - Nothing is boxed. A json.Decoder's Token returns each token as an
//     interface (a string, a json.Number, a json.Delim), about a hundred
//     bytes per token, so a filter cost 25 to 240 bytes of garbage per byte
//     of input. Here a token is a value whose bytes are the input's own
//     (or, for a string with escapes, a buffer reused from one string to
//     the next); the callers allocate only what they keep.
//
// The reader checks the grammar of RFC 8259 (no trailing commas, no
// leading zeros, no literals but true, false and null) one token at a
// time, as Decoder.Token does, so a caller stops at the first thing it
// does not want without reading the rest.

// tokKind is the kind of a token.
type tokKind uint8

const (
	tokEOF tokKind = iota // the end of the input, after the top-level value
	tokBeginObject
	tokEndObject
	tokBeginArray
	tokEndArray
	tokString // a key or a string value: raw holds it decoded
	tokNumber // raw holds its text, as written
	tokTrue
	tokFalse
	tokNull
)

// token is one token of the input. raw is valid until the next call to
// the scanner; str copies it.
type token struct {
	kind tokKind
	raw  []byte
	at   int // byte offset in the input
}

// str is a string token's text as a string of its own.
func (t token) str() string { return string(t.raw) }

// is says t is the string s.
func (t token) is(s string) bool { return t.kind == tokString && string(t.raw) == s }

// describe names a token for an error.
func (t token) describe() string {
	switch t.kind {
	case tokNull:
		return "null"
	case tokTrue, tokFalse:
		return "a boolean"
	case tokString:
		s := string(t.raw)
		if len(s) > 40 {
			s = s[:40] + "..."
		}
		return "the string " + quote(s)
	case tokNumber:
		s := string(t.raw)
		if len(s) > 40 {
			s = s[:40] + "..."
		}
		return "the number " + s
	case tokBeginObject:
		return "an object"
	case tokBeginArray:
		return "an array"
	case tokEndObject:
		return "'}'"
	case tokEndArray:
		return "']'"
	}
	return "the end of the input"
}

// What the scanner expects next.
const (
	expValue      = iota // a value: at the top, after ':' or after ',' in an array
	expValueOrEnd        // after '['
	expKeyOrEnd          // after '{'
	expKey               // after ',' in an object
	expCommaOrEnd        // after a value inside an object or an array
	expEOF               // after the top-level value
)

// maxScanDepth bounds the open objects and arrays. The parsers refuse far
// less nesting themselves (ParseWhere: 32 objects; ParseFields: 3 levels);
// this only keeps the scanner's own stack fixed.
const maxScanDepth = 128

// scanner reads JSON one token at a time.
type scanner struct {
	b     []byte
	i     int
	state uint8
	depth int
	stack [maxScanDepth]byte // '{' or '[' of each open container
	buf   []byte             // a string with escapes, decoded

	opened int     // objects and arrays opened so far
	counts []int32 // their members, in order (count)
}

func newScanner(b []byte) *scanner { return &scanner{b: b} }

// scanError is a syntax or encoding error, at a byte offset from 0.
type scanError struct {
	msg string
	at  int
	end bool // the input ended too soon
}

func (e *scanError) Error() string {
	if e.end {
		return "unexpected end of input"
	}
	return fmt.Sprintf("%s at offset %d", e.msg, e.at)
}

func (s *scanner) fail(at int, format string, a ...any) error {
	return &scanError{msg: fmt.Sprintf(format, a...), at: at}
}

func (s *scanner) endErr() error { return &scanError{end: true, at: len(s.b)} }

func (s *scanner) skipWS() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// more says whether the open object or array has another member: the next
// thing is not its end.
func (s *scanner) more() bool {
	s.skipWS()
	return s.i < len(s.b) && s.b[s.i] != ']' && s.b[s.i] != '}'
}

// charName names the byte at i for an error.
func (s *scanner) charName(i int) string {
	c := s.b[i]
	if c >= 0x20 && c < utf8.RuneSelf {
		return quote(string(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// next returns the next token. Commas and colons are consumed on the way:
// a key comes back as a tokString, its colon already read.
func (s *scanner) next() (token, error) {
	for {
		s.skipWS()
		if s.i >= len(s.b) {
			if s.state == expEOF {
				return token{kind: tokEOF, at: s.i}, nil
			}
			return token{}, s.endErr()
		}
		c := s.b[s.i]
		switch s.state {
		case expCommaOrEnd:
			top := s.stack[s.depth-1]
			if c == ',' {
				s.i++
				if top == '{' {
					s.state = expKey
				} else {
					s.state = expValue
				}
				continue
			}
			if (top == '{' && c == '}') || (top == '[' && c == ']') {
				return s.close(), nil
			}
			if top == '{' {
				return token{}, s.fail(s.i, "invalid character %s after an object's member (want ',' or '}')", s.charName(s.i))
			}
			return token{}, s.fail(s.i, "invalid character %s after an array element (want ',' or ']')", s.charName(s.i))
		case expKeyOrEnd, expKey:
			if c == '}' && s.state == expKeyOrEnd {
				return s.close(), nil
			}
			if c != '"' {
				return token{}, s.fail(s.i, "invalid character %s looking for an object's key (a string)", s.charName(s.i))
			}
			t, err := s.str()
			if err != nil {
				return token{}, err
			}
			s.skipWS()
			if s.i >= len(s.b) {
				return token{}, s.endErr()
			}
			if s.b[s.i] != ':' {
				return token{}, s.fail(s.i, "invalid character %s after an object's key (want ':')", s.charName(s.i))
			}
			s.i++
			s.state = expValue
			return t, nil
		case expValueOrEnd:
			if c == ']' {
				return s.close(), nil
			}
		}
		return s.value(c)
	}
}

// close reads the '}' or ']' at s.i.
func (s *scanner) close() token {
	t := token{kind: tokEndObject, at: s.i}
	if s.b[s.i] == ']' {
		t.kind = tokEndArray
	}
	s.i++
	s.depth--
	s.afterValue()
	return t
}

func (s *scanner) afterValue() {
	if s.depth == 0 {
		s.state = expEOF
	} else {
		s.state = expCommaOrEnd
	}
}

// value reads the value starting with c at s.i.
func (s *scanner) value(c byte) (token, error) {
	at := s.i
	switch {
	case c == '{' || c == '[':
		if s.depth == maxScanDepth {
			return token{}, s.fail(at, "nested deeper than %d objects and arrays", maxScanDepth)
		}
		s.stack[s.depth] = c
		s.depth++
		s.opened++
		s.i++
		if c == '{' {
			s.state = expKeyOrEnd
			return token{kind: tokBeginObject, at: at}, nil
		}
		s.state = expValueOrEnd
		return token{kind: tokBeginArray, at: at}, nil
	case c == '"':
		t, err := s.str()
		if err != nil {
			return token{}, err
		}
		s.afterValue()
		return t, nil
	case c == '-' || (c >= '0' && c <= '9'):
		t, err := s.number()
		if err != nil {
			return token{}, err
		}
		s.afterValue()
		return t, nil
	case c == 't':
		return s.literal("true", tokTrue)
	case c == 'f':
		return s.literal("false", tokFalse)
	case c == 'n':
		return s.literal("null", tokNull)
	}
	return token{}, s.fail(at, "invalid character %s looking for a value", s.charName(at))
}

func (s *scanner) literal(word string, kind tokKind) (token, error) {
	at := s.i
	for j := 0; j < len(word); j++ {
		if s.i+j >= len(s.b) {
			return token{}, s.endErr()
		}
		if s.b[s.i+j] != word[j] {
			return token{}, s.fail(s.i+j, "invalid character %s in literal %s", s.charName(s.i+j), word)
		}
	}
	s.i += len(word)
	s.afterValue()
	return token{kind: kind, at: at}, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number reads a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() (token, error) {
	b, at := s.b, s.i
	i := at
	digits := func() error {
		if i >= len(b) {
			return s.endErr()
		}
		if !isDigit(b[i]) {
			return s.fail(i, "invalid character %s in a number (want a digit)", s.charName(i))
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
		return nil
	}
	if b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if err := digits(); err != nil {
		return token{}, err
	}
	if i < len(b) && b[i] == '.' {
		i++
		if err := digits(); err != nil {
			return token{}, err
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if err := digits(); err != nil {
			return token{}, err
		}
	}
	if i < len(b) && (isDigit(b[i]) || b[i] == '.' || b[i] == 'e' || b[i] == 'E' || b[i] == '-' || b[i] == '+') {
		// 01, 1.2.3, 1e5e5: the number ended where its grammar does
		return token{}, s.fail(i, "invalid character %s after the number %s", s.charName(i), b[at:i])
	}
	s.i = i
	return token{kind: tokNumber, raw: b[at:i:i], at: at}, nil
}

// str reads the string whose opening quote is at s.i. Its text must be
// Unicode: a byte that is not UTF-8 and a \u escape of a UTF-16 surrogate
// that is not half of a pair (\ud800 alone, \ud800\u0041, \udc00) are
// errors, not replaced by U+FFFD as encoding/json does.
func (s *scanner) str() (token, error) {
	b, at := s.b, s.i
	start := at + 1
	i := start
	// The common case: no escapes, so the token's bytes are the input's.
	for i < len(b) {
		c := b[i]
		if c == '"' {
			s.i = i + 1
			return token{kind: tokString, raw: b[start:i:i], at: at}, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return token{}, s.badUTF8(i)
		}
		i += size
	}
	buf := append(s.buf[:0], b[start:i]...)
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			s.buf = buf
			s.i = i + 1
			return token{kind: tokString, raw: buf, at: at}, nil
		case c < 0x20:
			return token{}, s.fail(i, "control character U+%04X in a string (write it escaped, as \\u%04x)", c, c)
		case c == '\\':
			if i+1 >= len(b) {
				return token{}, s.endErr()
			}
			esc := b[i+1]
			switch esc {
			case '"', '\\', '/':
				buf = append(buf, esc)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, err := s.hex4(i)
				if err != nil {
					return token{}, err
				}
				n := 6
				switch {
				case r >= 0xdc00 && r < 0xe000:
					return token{}, s.fail(i, "lone UTF-16 surrogate \\u%04x in a string (a low surrogate with no high one before it is not a character)", r)
				case r >= 0xd800 && r < 0xdc00:
					lo, err := s.hex4(i + 6)
					if err != nil || lo < 0xdc00 || lo >= 0xe000 {
						return token{}, s.fail(i, "lone UTF-16 surrogate \\u%04x in a string (a high surrogate must be followed by a low one, \\udc00 to \\udfff)", r)
					}
					r, n = utf16.DecodeRune(r, lo), 12
				}
				buf = utf8.AppendRune(buf, r)
				i += n
				continue
			default:
				return token{}, s.fail(i, "invalid escape \\%s in a string", string(rune(esc)))
			}
			i += 2
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				return token{}, s.badUTF8(i)
			}
			buf = append(buf, b[i:i+size]...)
			i += size
		}
	}
	return token{}, s.endErr()
}

// hex4 reads the rune of the \uXXXX escape at i; an escape that is not
// one (or the input's end) is an error.
func (s *scanner) hex4(i int) (rune, error) {
	b := s.b
	if i+6 > len(b) {
		if i+1 < len(b) && b[i] == '\\' {
			return 0, s.endErr()
		}
		return 0, s.fail(i, "not a \\u escape")
	}
	if b[i] != '\\' || b[i+1] != 'u' {
		return 0, s.fail(i, "not a \\u escape")
	}
	var r rune
	for _, c := range b[i+2 : i+6] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, s.fail(i, "invalid \\u escape %q in a string (want 4 hex digits)", b[i:i+6])
		}
		r = r<<4 | rune(c)
	}
	return r, nil
}

func (s *scanner) badUTF8(i int) error {
	return s.fail(i, "byte 0x%02x in a string is not valid UTF-8", s.b[i])
}

// count returns how many members the object or array just opened holds
// (its '{' or '[' read last), at most limit+1, without reading them. Its
// callers size their slices with it, once. The first call counts the
// members of every object and array of the input in one pass (members),
// so that a deep document is not read again at each level. On malformed
// input a count may be off; the parse refuses that input anyway.
func (s *scanner) count(limit int) int {
	if s.counts == nil {
		s.counts = members(s.b)
	}
	k := s.opened - 1
	if k < 0 || k >= len(s.counts) {
		return 0
	}
	return min(int(s.counts[k]), limit+1)
}

// members returns the number of members of each object and array of b,
// in the order they open, counting the commas at each one's own level:
// exact for valid JSON. It allocates 4 bytes per object or array (never
// nil), and nothing else; nesting past maxScanDepth is not counted (the
// scanner refuses it).
func members(b []byte) []int32 {
	n := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = stringEnd(b, i)
		case '{', '[':
			n++
		}
	}
	counts := make([]int32, n)
	var open [maxScanDepth]int32 // index in counts of each open container
	var empty [maxScanDepth]bool // it has no member yet
	depth, k := 0, 0
	for i := 0; i < len(b) && depth <= maxScanDepth; i++ {
		switch c := b[i]; c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{', '[':
			if depth > 0 && empty[depth-1] {
				empty[depth-1] = false
				counts[open[depth-1]]++
			}
			if depth == maxScanDepth {
				return counts
			}
			open[depth], empty[depth] = int32(k), true
			depth++
			k++
			continue
		case '}', ']':
			if depth > 0 {
				depth--
			}
			continue
		case ',':
			if depth > 0 {
				counts[open[depth-1]]++
			}
			continue
		case '"':
			i = stringEnd(b, i)
		}
		if depth > 0 && empty[depth-1] {
			empty[depth-1] = false
			counts[open[depth-1]]++
		}
	}
	return counts
}

// stringEnd returns the index of the quote that ends the string opening
// at b[i] (len(b) if none does).
func stringEnd(b []byte, i int) int {
	for i++; i < len(b) && b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	return i
}
