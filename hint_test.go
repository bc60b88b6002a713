package umbra_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/umbravec/umbra"
	"github.com/umbravec/umbra/internal/testkit"
)

// TestHintWords: every code has words for a Go caller, the words of
// the codes about choosing an adapter name the Config fields that do it,
// and no hint says nothing.
func TestHintWords(t *testing.T) {
	for _, code := range testkit.HintCodes(t) {
		words := umbra.Hint{Code: code}.String()
		assert.NotEmpty(t, words, code)
		assert.NotContains(t, words, "(hint ", "%s has no words of its own", code)
	}
	assert.Contains(t, umbra.Hint{Code: umbra.HintSoftwareOnly}.String(), "Device: GPU")
	assert.Contains(t, umbra.Hint{Code: umbra.HintProbeFailed}.String(), "Config.Adapters")
	assert.Contains(t, umbra.Hint{Code: umbra.HintNoMatch}.String(), "Config.Adapters (Name, Backend)")
	assert.Contains(t, umbra.Hint{Code: umbra.HintNoMatch, Args: map[string]string{"backend": "metal"}}.String(),
		`Config.Adapters (Backend "metal")`)
	assert.Empty(t, umbra.Hint{}.String())
}
