package main

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/hint"
)

// libraryWording matches the ways the engine names its Go API in advice.
var libraryWording = regexp.MustCompile(`Config\.|AdapterSelect|\bDevice:|\bDevice (GPU|CPU|Auto)\b|\bPower:`)

// TestEveryHintHasCLIWords: every code the engine can give a hint has
// words here, and none of them names the Go API, with or without the
// selection's arguments.
func TestEveryHintHasCLIWords(t *testing.T) {
	args := []map[string]string{nil, {hint.Backend: "vulkan"}, {hint.Name: "Radeon"}, {hint.Backend: "gl", hint.Name: "llvmpipe"}}
	for _, code := range hint.Codes {
		assert.Contains(t, hintWords, code, "hint code %q has no words on the command line", code)
		for _, a := range args {
			h := engine.Hint{Code: code, Args: a}
			words := cliHint(h)
			assert.NotEmpty(t, words, "%q %v", code, a)
			assert.NotRegexp(t, libraryWording, words, "%q %v", code, a)
		}
	}
	assert.Empty(t, cliHint(engine.Hint{}), "no hint, no words")
}

func TestCLIHintSaysFlags(t *testing.T) {
	tests := []struct {
		h    engine.Hint
		want string
	}{
		{engine.Hint{Code: hint.SoftwareOnly}, "use --device gpu to use the software adapter anyway"},
		{engine.Hint{Code: hint.ProbeFailed}, "pick another adapter with --adapter NAME or --backend B"},
		{engine.Hint{Code: hint.NoMatch}, "loosen --adapter or --backend or run `umbra probe`"},
		{engine.Hint{Code: hint.NoMatch, Args: map[string]string{hint.Backend: "metal", hint.Name: "M2"}}, `loosen --backend metal or --adapter "M2" or run`},
		{engine.Hint{Code: hint.NoAdapter}, "install your GPU vendor's driver"},
	}
	for _, tc := range tests {
		assert.Contains(t, cliHint(tc.h), tc.want, tc.h.Code)
	}
}
