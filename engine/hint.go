package engine

import "github.com/umbravec/umbra"

// hintFor is the hint code under the adapter selection sel: its Args hold
// the selection's Backend and Name where they were set.
func hintFor(code string, sel AdapterSelect) umbra.Hint {
	h := umbra.Hint{Code: code}
	if sel.Backend != "" || sel.Name != "" {
		h.Args = map[string]string{}
		if sel.Backend != "" {
			h.Args["backend"] = sel.Backend
		}
		if sel.Name != "" {
			h.Args["name"] = sel.Name
		}
	}
	return h
}
