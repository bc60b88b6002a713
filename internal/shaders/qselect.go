package shaders

import (
	_ "embed"
	"fmt"
	"strings"

	"github.com/umbravec/umbra/internal/core"
)

//go:embed qbounds.wgsl
var qboundsSource string

var qboundsTemplate = assemble("qbounds.wgsl", qboundsSource)

// QBoundsBindings is qbounds.wgsl's bind group layout, QBoundsEntries its
// entry points in dispatch order (select.wgsl's rounds run between bounds
// and compact), and QCoefBytes the size of one query's Coef.
var (
	QBoundsBindings = []Binding{{0, ReadOnlyStorage}, {1, ReadOnlyStorage}, {2, ReadOnlyStorage}, {3, Storage},
		{4, Storage}, {5, Storage}, {6, ReadOnlyStorage}}
	QBoundsEntries = []string{"bounds", "compact", "counts"}
)

const (
	QCoefWords = 16
	QCoefBytes = 4 * QCoefWords
	// QRowWords is how many float32 of per-row bound data one row takes.
	QRowWords = 4
)

// QBounds returns the WGSL source of qbounds.wgsl for rows of precision
// prec (F16 or Int8) under metric.
func QBounds(prec core.Precision, metric core.Metric) (string, error) {
	if err := checkMetric(metric); err != nil {
		return "", err
	}
	if prec != core.F16 && prec != core.Int8 {
		return "", fmt.Errorf("shaders: qbounds.wgsl takes F16 or Int8 rows, not %v", prec)
	}
	var b strings.Builder
	if err := qboundsTemplate.Execute(&b, struct{ L2, Int8 bool }{metric == core.L2, prec == core.Int8}); err != nil {
		return "", fmt.Errorf("shaders: %w", err)
	}
	return b.String(), nil
}
