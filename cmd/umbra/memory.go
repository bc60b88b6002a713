package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/atomicfile"
	"github.com/umbravec/umbra/meta"
)

// attrFlags are --meta and --payload, which build and add share: a JSON
// Lines file each, one line per vector of --data, in its order.
type attrFlags struct {
	Meta    string `name:"meta" placeholder:"FILE.jsonl" help:"metadata, one JSON object per vector, in order ({} for none): a string is a keyword, an integer an int64, another number a float64, an array of strings a tag set, {\"$time\": \"RFC 3339\"} a time. 'search --where' filters on it"`
	Payload string `name:"payload" placeholder:"FILE.jsonl" help:"payloads, one JSON value per vector, in order (null for none): stored as written and returned by 'search --with-payload' and 'get'"`
}

// read reads the files (nil for a flag not given), refusing a file whose
// line count is not rows (rows < 0: not known; the engine, or the
// collection, checks it against the rows read).
func (a attrFlags) read(ctx context.Context, rows int, what string) (fields []meta.Fields, payloads [][]byte, err error) {
	if a.Meta != "" {
		if fields, err = readMetaFile(ctx, a.Meta, meta.Limits{}.WithDefaults()); err != nil {
			return nil, nil, err
		}
		if rows >= 0 && len(fields) != rows {
			return nil, nil, fmt.Errorf("--meta %s holds %s, %s holds %s: want one line per vector", a.Meta, plural(len(fields), "line"), what, plural(rows, "vector"))
		}
	}
	if a.Payload != "" {
		if payloads, err = readPayloadFile(ctx, a.Payload, umbra.DefaultMaxPayloadBytes); err != nil {
			return nil, nil, err
		}
		if rows >= 0 && len(payloads) != rows {
			return nil, nil, fmt.Errorf("--payload %s holds %s, %s holds %s: want one line per vector", a.Payload, plural(len(payloads), "line"), what, plural(rows, "vector"))
		}
	}
	return fields, payloads, nil
}

// options is read's result as the engine's write options.
func (a attrFlags) options(ctx context.Context, rows int, what string) ([]umbra.WriteOption, error) {
	fields, payloads, err := a.read(ctx, rows, what)
	if err != nil {
		return nil, err
	}
	var opts []umbra.WriteOption
	if a.Meta != "" {
		opts = append(opts, umbra.WithMeta(fields...))
	}
	if a.Payload != "" {
		opts = append(opts, umbra.WithPayloads(payloads...))
	}
	return opts, nil
}

// attrError words an engine error about metadata or payloads by the flag
// whose file gave them, or returns nil for another error.
func (a attrFlags) attrError(err error) error {
	switch {
	case a.Meta != "" && errors.Is(err, umbra.ErrInvalidMeta):
		return fmt.Errorf("--meta %s: %s", a.Meta, cause(err))
	case a.Payload != "" && errors.Is(err, umbra.ErrTooLarge) && bytes.Contains([]byte(err.Error()), []byte("payload")):
		return fmt.Errorf("--payload %s: %s", a.Payload, cause(err))
	case errors.Is(err, umbra.ErrIDCount) && (a.Meta != "" || a.Payload != ""):
		return fmt.Errorf("--meta/--payload: %s", cause(err))
	}
	return nil
}

// eachJSONLine calls f with every line of the file at path and its
// number from 1 (eachLine), naming the flag, the file and the line in an
// error.
func eachJSONLine(ctx context.Context, flag, path string, f func(line []byte) error) error {
	if err := notDir(flag, path); err != nil {
		return err
	}
	file, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %s", flag, cause(err))
	}
	defer file.Close()
	last := 0
	err = eachLine(ctx, file, func(n int, line string) error {
		last = n
		if err := f([]byte(line)); err != nil {
			return fmt.Errorf("%s %s line %d: %s", flag, path, n, err)
		}
		return nil
	})
	if errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("%s %s line %d is longer than 16 MiB", flag, path, last+1)
	}
	if err != nil && !strings.HasPrefix(err.Error(), flag) {
		return fmt.Errorf("%s %s: %s", flag, path, cause(err))
	}
	return err
}

// readMetaFile reads a --meta file: one JSON object per line.
func readMetaFile(ctx context.Context, path string, lim meta.Limits) ([]meta.Fields, error) {
	var out []meta.Fields
	err := eachJSONLine(ctx, "--meta", path, func(line []byte) error {
		if len(bytes.TrimSpace(line)) == 0 {
			return errors.New("an empty line: want a JSON object ({} for a vector without metadata)")
		}
		f, err := meta.ParseFields(line, lim)
		if err != nil {
			return err
		}
		out = append(out, f)
		return nil
	})
	return out, err
}

// readPayloadFile reads a --payload file: one JSON value per line, kept as
// written (without the surrounding blanks); null is a vector without one.
//
// A payload is opaque: umbra never decodes it, so it is stored and given
// back byte for byte, escapes included — a "\ud800" (a lone UTF-16
// surrogate, which a decoder would turn into U+FFFD) stays those six
// characters. But a line must be JSON text, which is UTF-8 (RFC 8259,
// 8.1): a byte that is not UTF-8 is refused, naming where it is, as
// search and get could only print such a payload as something else.
func readPayloadFile(ctx context.Context, path string, max int) ([][]byte, error) {
	var out [][]byte
	err := eachJSONLine(ctx, "--payload", path, func(line []byte) error {
		line = bytes.TrimSpace(line)
		if at := invalidUTF8At(line); at >= 0 {
			return fmt.Errorf("the byte at offset %d (0x%02x) is not valid UTF-8: a payload is JSON text, which is UTF-8", at, line[at])
		}
		switch {
		case len(line) == 0:
			return errors.New("an empty line: want a JSON value (null for a vector without a payload)")
		case !json.Valid(line):
			return errors.New("not a JSON value")
		case len(line) > max:
			return fmt.Errorf("a payload of %d bytes, over the limit of %d", len(line), max)
		case string(line) == "null":
			out = append(out, nil)
		default:
			out = append(out, bytes.Clone(line))
		}
		return nil
	})
	return out, err
}

// invalidUTF8At is the offset of the first byte of b that is not part of
// valid UTF-8, or -1.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return -1
}

// jsonText says p is one JSON value in UTF-8: what a --payload line holds.
func jsonText(p []byte) bool { return utf8.Valid(p) && json.Valid(p) }

// payloadJSON is a payload as a search or get prints it: a JSON payload as
// itself (compacted to one line), any other bytes as a JSON string.
func payloadJSON(p []byte) json.RawMessage {
	if len(p) == 0 {
		return nil
	}
	if jsonText(p) {
		var b bytes.Buffer
		if json.Compact(&b, p) == nil {
			return b.Bytes()
		}
	}
	s, _ := json.Marshal(string(p))
	return s
}

// writeJSONLines writes one line per entry to path, atomically.
func writeJSONLines(path string, n int, line func(i int, dst []byte) []byte) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		var buf []byte
		for i := range n {
			buf = append(line(i, buf[:0]), '\n')
			if _, err := bw.Write(buf); err != nil {
				return err
			}
		}
		return bw.Flush()
	})
}
