package engine

import "github.com/umbravec/umbra"

// hintFor is the hint code under the adapter selection sel: its Args hold
// the selection's Backend and Name where they were set.
func hintFor(code string, sel AdapterSelect) umbra.Hint { return sel.plain().Hint(code) }
