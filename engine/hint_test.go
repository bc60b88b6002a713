package engine_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/umbravec/umbra/engine"
	"github.com/umbravec/umbra/internal/hint"
)

// TestHintWords: every code has words for a Go caller, the words of
// the codes about choosing an adapter name the Config fields that do it,
// and no hint says nothing.
func TestHintWords(t *testing.T) {
	for _, code := range hint.Codes {
		words := engine.Hint{Code: code}.String()
		assert.NotEmpty(t, words, code)
		assert.NotContains(t, words, "(hint ", "%s has no words of its own", code)
	}
	assert.Contains(t, engine.Hint{Code: hint.SoftwareOnly}.String(), "Device: GPU")
	assert.Contains(t, engine.Hint{Code: hint.ProbeFailed}.String(), "Config.Adapters")
	assert.Contains(t, engine.Hint{Code: hint.NoMatch}.String(), "Config.Adapters (Name, Backend)")
	assert.Contains(t, engine.Hint{Code: hint.NoMatch, Args: map[string]string{hint.Backend: "metal"}}.String(),
		`Config.Adapters (Backend "metal")`)
	assert.Empty(t, engine.Hint{}.String())
}
