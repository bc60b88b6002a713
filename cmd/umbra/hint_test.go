package main

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/testkit"
)

// libraryWording matches the ways the engine names its Go API in advice.
var libraryWording = regexp.MustCompile(`Config\.|AdapterSelect|\bDevice:|\bDevice (GPU|CPU|Auto)\b|\bPower:`)

// TestEveryHintHasCLIWords: every code the engine can give a hint has
// words here, and none of them names the Go API, with or without the
// selection's arguments.
func TestEveryHintHasCLIWords(t *testing.T) {
	t.Parallel()
	args := []map[string]string{nil, {"backend": "vulkan"}, {"name": "Radeon"}, {"backend": "gl", "name": "llvmpipe"}}
	for _, code := range testkit.HintCodes(t) {
		assert.Contains(t, hintWords, code, "hint code %q has no words on the command line", code)
		for _, a := range args {
			h := umbra.Hint{Code: code, Args: a}
			words := cliHint(h)
			assert.NotEmpty(t, words, "%q %v", code, a)
			assert.NotRegexp(t, libraryWording, words, "%q %v", code, a)
		}
	}
	assert.Empty(t, cliHint(umbra.Hint{}), "no hint, no words")
}

func TestCLIHintSaysFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		h    umbra.Hint
		want string
	}{
		{umbra.Hint{Code: umbra.HintSoftwareOnly}, "use --device gpu to use the software adapter anyway"},
		{umbra.Hint{Code: umbra.HintProbeFailed}, "pick another adapter with --adapter NAME or --backend B"},
		{umbra.Hint{Code: umbra.HintNoMatch}, "loosen --adapter or --backend or run `umbra probe`"},
		{umbra.Hint{Code: umbra.HintNoMatch, Args: map[string]string{"backend": "metal", "name": "M2"}}, `loosen --backend metal or --adapter "M2" or run`},
		{umbra.Hint{Code: umbra.HintNoAdapter}, "install your GPU vendor's driver"},
	}
	for _, tc := range tests {
		assert.Contains(t, cliHint(tc.h), tc.want, tc.h.Code)
	}
}
