package engine

import "github.com/umbravec/umbra/internal/hint"

// Hint says what to do when the GPU path is not used, as data: a stable
// Code naming the situation and the Args it was found with. Its String
// method words it for a Go caller, naming Config's fields; a program words
// it for its own users from Code and Args (the umbra command names its
// flags). Info, AdapterError and diag.ProbeReport carry one.
//
// Code is one of
//
//   - "no-gpu-support": the binary has no wgpu backend (no cgo, or the
//     nogpu tag);
//   - "no-adapter": no GPU adapter answered;
//   - "no-match": adapters answered, but none passes Config.Adapters;
//   - "software-only": only software adapters, which run on the CPU, work;
//   - "probe-failed": an adapter failed its test dispatch, its
//     calibration, or a search after start-up;
//   - "too-large": the index outgrew what the GPU can hold;
//
// or "" when there is nothing to fix. Args holds "backend" and "name",
// the Backend and Name of the adapter selection, when they were set.
type Hint = hint.Hint

// hintFor is the hint code under the adapter selection sel.
func hintFor(code string, sel AdapterSelect) Hint { return hint.For(code, sel.Backend, sel.Name) }
