package host

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// pyParser reads the small subset of Python literals that npy headers use:
// dicts, tuples, lists, strings, integers (with Python 2's L suffix), True,
// False and None.
type pyParser struct {
	s     string
	pos   int
	depth int
}

type (
	pyDict  map[string]any
	pyTuple []any
	pyList  []any
	pyNone  struct{}
)

func (p *pyParser) parse() (any, error) {
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.pos != len(p.s) {
		return nil, fmt.Errorf("unexpected %q after the literal at offset %d", p.rest(), p.pos)
	}
	return v, nil
}

func (p *pyParser) space() {
	for p.pos < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.pos]) >= 0 {
		p.pos++
	}
}

func (p *pyParser) rest() string {
	r := p.s[p.pos:]
	if len(r) > 16 {
		r = r[:16] + "..."
	}
	return r
}

func (p *pyParser) value() (any, error) {
	p.space()
	if p.pos >= len(p.s) {
		return nil, errors.New("unexpected end of header")
	}
	switch c := p.s[p.pos]; {
	case c == '{' || c == '(' || c == '[':
		return p.container(c)
	case c == '\'' || c == '"':
		return p.str()
	case c == '-' || c == '+' || ('0' <= c && c <= '9'):
		return p.integer()
	}
	for word, v := range map[string]any{"True": true, "False": false, "None": pyNone{}} {
		if strings.HasPrefix(p.s[p.pos:], word) {
			p.pos += len(word)
			return v, nil
		}
	}
	return nil, fmt.Errorf("unexpected %q at offset %d", p.rest(), p.pos)
}

func (p *pyParser) container(open byte) (any, error) {
	if p.depth++; p.depth > npyMaxDepth {
		return nil, fmt.Errorf("literal nested deeper than %d", npyMaxDepth)
	}
	defer func() { p.depth-- }()
	closer := map[byte]byte{'{': '}', '(': ')', '[': ']'}[open]
	p.pos++
	var items []any
	dict := pyDict{}
	commas := 0
	for {
		p.space()
		if p.pos < len(p.s) && p.s[p.pos] == closer {
			p.pos++
			break
		}
		if p.pos >= len(p.s) {
			return nil, fmt.Errorf("unexpected end of header: %q not closed", open)
		}
		if len(items)+len(dict) > commas {
			return nil, fmt.Errorf("expected ',' or %q at offset %d, found %q", closer, p.pos, p.rest())
		}
		if open == '{' {
			k, err := p.value()
			if err != nil {
				return nil, err
			}
			key, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("dict key %s is not a string", pyRepr(k))
			}
			p.space()
			if p.pos >= len(p.s) || p.s[p.pos] != ':' {
				return nil, fmt.Errorf("expected ':' after key %s at offset %d", pyRepr(key), p.pos)
			}
			p.pos++
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			if _, dup := dict[key]; dup {
				return nil, fmt.Errorf("duplicate key %s", pyRepr(key))
			}
			dict[key] = v
		} else {
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			items = append(items, v)
		}
		p.space()
		if p.pos < len(p.s) && p.s[p.pos] == ',' {
			p.pos++
			commas++
		}
	}
	switch open {
	case '{':
		return dict, nil
	case '[':
		return pyList(items), nil
	}
	if len(items) == 1 && commas == 0 {
		return items[0], nil // (x) is just x in Python, not a tuple
	}
	return pyTuple(items), nil
}

func (p *pyParser) str() (any, error) {
	q := p.s[p.pos]
	start := p.pos
	p.pos++
	var b strings.Builder
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		p.pos++
		switch c {
		case q:
			return b.String(), nil
		case '\\':
			if p.pos < len(p.s) {
				b.WriteByte(p.s[p.pos])
				p.pos++
			}
		case '\n':
			return nil, fmt.Errorf("unterminated string at offset %d", start)
		default:
			b.WriteByte(c)
		}
	}
	return nil, fmt.Errorf("unterminated string at offset %d", start)
}

func (p *pyParser) integer() (any, error) {
	start := p.pos
	if c := p.s[p.pos]; c == '-' || c == '+' {
		p.pos++
	}
	for p.pos < len(p.s) && '0' <= p.s[p.pos] && p.s[p.pos] <= '9' {
		p.pos++
	}
	lit := p.s[start:p.pos]
	if p.pos < len(p.s) && (p.s[p.pos] == 'L' || p.s[p.pos] == 'l') {
		p.pos++ // Python 2 long, as old numpy wrote shapes
	}
	n, err := strconv.ParseInt(lit, 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return nil, fmt.Errorf("integer %s out of range", clipText(lit))
		}
		return nil, fmt.Errorf("bad number %s at offset %d", clip(lit), start)
	}
	return n, nil
}

// pyRepr prints a parsed value back as Python would, for error messages, cut
// to about clipBytes: a header may hold a megabyte of nonsense.
func pyRepr(v any) string {
	s := pyReprFull(v)
	if len(s) > clipBytes {
		return fmt.Sprintf("%s... (%d bytes)", s[:clipBytes], len(s))
	}
	return s
}

func pyReprFull(v any) string {
	switch x := v.(type) {
	case string:
		return "'" + x + "'"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case pyNone:
		return "None"
	case int64:
		return strconv.FormatInt(x, 10)
	case pyTuple:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyRepr(e)
		}
		if len(x) == 1 {
			return "(" + parts[0] + ",)"
		}
		return "(" + strings.Join(parts, ", ") + ")"
	case pyList:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyRepr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case pyDict:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = pyRepr(k) + ": " + pyRepr(x[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}

// clipText cuts s to about clipBytes for a message, unquoted.
func clipText(s string) string {
	if len(s) > clipBytes {
		return fmt.Sprintf("%s... (%d bytes)", s[:clipBytes], len(s))
	}
	return s
}
