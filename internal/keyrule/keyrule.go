// Package keyrule is the one rule a string key must meet, shared by the
// engine, which enforces it on every write that stores keys, and the umbra
// command, which checks key files and lists against it before it opens a
// store, so that both refuse the same keys for the same reasons.
//
// A key is non-empty, valid UTF-8, holds no line break (\n or \r), and is
// at most MaxBytes bytes long. Why each:
//
//   - non-empty: an empty line is how a key file (umbra export --keys-out,
//     build --keys) writes a row without a key, and Hit.Key is empty for
//     one, so "" cannot also be a key;
//   - valid UTF-8: keys come back as text (JSON output, key files), where
//     invalid bytes would be replaced and read back as another key;
//   - no \n or \r: key files hold one key per line (a \r\n line end is
//     read as \n);
//   - at most MaxBytes: a path, a URL or a UUID fits, and a key (kept
//     twice in memory, once per direction of the mapping) costs bounded
//     memory.
package keyrule

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxBytes is the longest key, in bytes: PATH_MAX on Linux, so that any
// file path is a key.
const MaxBytes = 4096

// Rule says in a few words which keys are allowed, for error messages.
const Rule = "a key is non-empty UTF-8 text of at most 4096 bytes without line breaks"

// Check returns why key breaks the rule, or nil. The reason names the
// key (Quote) but not where it came from: the caller says that.
func Check(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("the key is empty (%s)", Rule)
	case len(key) > MaxBytes:
		return fmt.Errorf("key %s is %d bytes, over %d (%s)", Quote(key), len(key), MaxBytes, Rule)
	case !utf8.ValidString(key):
		return fmt.Errorf("key %s is not valid UTF-8 (%s)", Quote(key), Rule)
	case strings.ContainsAny(key, "\n\r"):
		return fmt.Errorf("key %s holds a line break (%s)", Quote(key), Rule)
	}
	return nil
}

// quoteBytes is how much of a key an error message shows.
const quoteBytes = 64

// Quote returns key quoted for a message (Go syntax: control characters and
// invalid bytes escaped), cut after its first 64 bytes so that a huge key
// does not make a huge message.
func Quote(key string) string {
	if len(key) <= quoteBytes {
		return fmt.Sprintf("%q", key)
	}
	cut := quoteBytes
	for cut > quoteBytes-utf8.UTFMax && !utf8.RuneStart(key[cut]) {
		cut--
	}
	return fmt.Sprintf("%q…", key[:cut])
}
