package chroma

import (
	"bytes"
	"net/http"
	"strconv"
	"sync"
	"unsafe"
)

// A request's embeddings are nearly all of its bytes (a query's 768
// numbers, an add's thousand base64 strings). encoding/json reads them
// three times (it validates the whole body, skips the field to hand it to
// UnmarshalJSON, which parses it again) and a query's numbers once more
// per embedding through a pointer each. The fast path here lifts the field
// out of the top-level object, reads it once with strict parsers of the
// two shapes clients send, and leaves the rest of the body, now small, to
// encoding/json. Anything the fast path does not take whole (an escape in
// a key, a key spelt in another case, a repeated key, a null, a number out
// of float32's range, a malformed body) goes the general way, so answers
// and errors are those of encoding/json alone.

// readBody reads a request body into a buffer from bodies, growing it
// once where the client says how long the body is (the body's limit
// still bounds what is read; the presize is capped so a false
// Content-Length costs little). done gives the buffer back: the caller
// calls it once nothing it decoded points into the body (encoding/json
// and the fast path copy what they keep). Reusing the buffers spares each
// write its megabytes of fresh memory, which this server's host faulted
// in at about 3 ms a megabyte (docs/benchmarks.md).
func readBody(r *http.Request) (b []byte, done func(), err error) {
	buf := bodies.Get().(*bytes.Buffer)
	buf.Reset()
	if n := r.ContentLength; n > 0 {
		buf.Grow(int(min(n, 16<<20)) + bytes.MinRead)
	}
	_, err = buf.ReadFrom(r.Body)
	return buf.Bytes(), func() {
		if buf.Cap() <= maxPooledBody {
			bodies.Put(buf)
		}
	}, err
}

// bodies holds request body buffers for reuse; one past maxPooledBody is
// left to the collector.
var bodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBody = 32 << 20

// liftEmbeddings reads the top-level field key of the JSON object b by
// the fast path: rest is b with that field's value replaced by null (for
// encoding/json to read), e the embeddings. ok is false where the fast
// path does not apply.
func liftEmbeddings(b []byte, key string) (rest []byte, e embeddings, ok bool) {
	vs, ve, found := findField(b, key)
	if !found {
		return nil, nil, false
	}
	val := b[vs:ve]
	if e, ok = base64List(val); !ok {
		if e, ok = numberLists(val); !ok {
			return nil, nil, false
		}
	}
	rest = make([]byte, 0, len(b)-len(val)+4)
	rest = append(rest, b[:vs]...)
	rest = append(rest, "null"...)
	rest = append(rest, b[ve:]...)
	return rest, e, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// findField finds the value of key, b[vs:ve], in the top-level object b.
// found is false when b is not an object this scanner follows, key is
// absent or repeated, or a key could match it as encoding/json matches
// (an escape, another case).
func findField(b []byte, key string) (vs, ve int, found bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return 0, 0, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return 0, 0, false
	}
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != '"' {
			return 0, 0, false
		}
		j := bytes.IndexByte(b[i+1:], '"')
		if j < 0 {
			return 0, 0, false
		}
		k := b[i+1 : i+1+j]
		if bytes.IndexByte(k, '\\') >= 0 {
			return 0, 0, false
		}
		i = skipSpace(b, i+j+2)
		if i >= len(b) || b[i] != ':' {
			return 0, 0, false
		}
		i = skipSpace(b, i+1)
		s := i
		var ok bool
		if i, ok = skipValue(b, i); !ok {
			return 0, 0, false
		}
		switch {
		case string(k) == key:
			if found {
				return 0, 0, false
			}
			vs, ve, found = s, i, true
		case bytes.EqualFold(k, []byte(key)):
			return 0, 0, false
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return 0, 0, false
		}
		switch b[i] {
		case ',':
			i++
		case '}':
			if skipSpace(b, i+1) != len(b) {
				return 0, 0, false
			}
			return vs, ve, found
		default:
			return 0, 0, false
		}
	}
}

// skipValue returns the end of the JSON value at b[i]. It follows
// strings and nesting only; encoding/json, or the strict parsers, judge
// the bytes.
func skipValue(b []byte, i int) (int, bool) {
	depth := 0
	for i < len(b) {
		switch c := b[i]; c {
		case '"':
			j, ok := stringEnd(b, i)
			if !ok {
				return 0, false
			}
			i = j
		case '{', '[':
			depth++
			i++
		case '}', ']':
			if depth == 0 {
				return i, true
			}
			depth--
			i++
		case ',', ' ', '\n', '\t', '\r':
			if depth == 0 {
				return i, true
			}
			i++
		default:
			i++
		}
		if depth == 0 && i < len(b) {
			if c := b[i-1]; c == '"' || c == '}' || c == ']' {
				return i, true
			}
		}
	}
	return i, depth == 0
}

// stringEnd returns the index just past the string that opens at b[i].
func stringEnd(b []byte, i int) (int, bool) {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return 0, false
		}
		q := i + j
		n := 0
		for p := q - 1; p >= i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, true
		}
		i = q + 1
	}
}

// numberLists reads a JSON list of lists of numbers (a query's
// embeddings) as encoding/json would into float32s; ok is false for
// anything else, or a number float32 cannot hold.
func numberLists(b []byte) (out [][]float32, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, false
	}
	i = skipSpace(b, i+1)
	out = [][]float32{}
	if i < len(b) && b[i] == ']' {
		return out, skipSpace(b, i+1) == len(b)
	}
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != '[' {
			return nil, false
		}
		i = skipSpace(b, i+1)
		v := make([]float32, 0, 1024)
		if i < len(b) && b[i] == ']' {
			i++
		} else {
			for {
				i = skipSpace(b, i)
				e := numberEnd(b, i)
				if e == i {
					return nil, false
				}
				x, err := strconv.ParseFloat(unsafe.String(&b[i], e-i), 32)
				if err != nil {
					return nil, false
				}
				v = append(v, float32(x))
				i = skipSpace(b, e)
				if i >= len(b) {
					return nil, false
				}
				if b[i] == ',' {
					i++
					continue
				}
				if b[i] != ']' {
					return nil, false
				}
				i++
				break
			}
		}
		out = append(out, v[:len(v):len(v)])
		i = skipSpace(b, i)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i++
		case ']':
			return out, skipSpace(b, i+1) == len(b)
		default:
			return nil, false
		}
	}
}

// numberEnd returns the end of the JSON number (RFC 8259's grammar) at
// b[i], or i where there is none.
func numberEnd(b []byte, i int) int {
	s := i
	digits := func() bool {
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > d
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		digits()
	default:
		return s
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return s
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return s
		}
	}
	return i
}
