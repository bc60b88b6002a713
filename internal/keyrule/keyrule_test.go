package keyrule

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		key  string
		want string // in the error; "" for an allowed key
	}{
		{"alice/m1", ""},
		{"notes/a b, c.md", ""},
		{" spaced ", ""},
		{"tab\there", ""},
		{"ключ-🔑", ""},
		{strings.Repeat("k", MaxBytes), ""},
		{"", "empty"},
		{"a\nb", `"a\nb" holds a line break`},
		{"a\r", `"a\r" holds a line break`},
		{"bad\xffbyte", `"bad\xffbyte" is not valid UTF-8`},
		{strings.Repeat("k", MaxBytes+1), "4097 bytes, over 4096"},
	}
	for _, tc := range tests {
		err := Check(tc.key)
		if tc.want == "" {
			assert.NoError(t, err, "%q", tc.key)
			continue
		}
		if assert.Error(t, err, "%q", tc.key) {
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), Rule)
			assert.Less(t, len(err.Error()), 300, "a long key is cut in the message")
		}
	}
}

func TestQuoteCutsOnARune(t *testing.T) {
	key := strings.Repeat("a", 63) + "é" + strings.Repeat("b", 100)
	q := Quote(key)
	assert.Equal(t, `"`+strings.Repeat("a", 63)+`"…`, q, "the cut falls before a rune, not inside it")
	assert.Equal(t, `"short"`, Quote("short"))
}
