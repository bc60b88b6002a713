package umbra_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/umbravec/umbra"
)

// TestParseNamesRoundTrip: String and Parse agree for every metric and
// precision; an unknown name is ErrInvalidConfig.
func TestParseNamesRoundTrip(t *testing.T) {
	for _, m := range []umbra.Metric{umbra.Cosine, umbra.Dot, umbra.L2} {
		got, err := umbra.ParseMetric(m.String())
		require.NoError(t, err)
		assert.Equal(t, m, got)
	}
	for _, p := range []umbra.Precision{umbra.F32, umbra.F16, umbra.Int8} {
		got, err := umbra.ParsePrecision(p.String())
		require.NoError(t, err)
		assert.Equal(t, p, got)
	}
	_, err := umbra.ParseMetric("hamming")
	assert.ErrorIs(t, err, umbra.ErrInvalidConfig)
	_, err = umbra.ParsePrecision("f8")
	assert.ErrorIs(t, err, umbra.ErrInvalidConfig)
}
